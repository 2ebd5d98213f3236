package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// maxTerminalSide bounds a run terminal's columns and rows.
const maxTerminalSide = 1000

// errClientGone ends a run whose client closed its connection.
var errClientGone = errors.New("the client went away")

// createRun checks the request, runs its command in a fresh instance of
// the app's current release through the Releaser and, once the instance
// is ready, records the run (the tenant's concurrent-runs quota checked
// there), switches the connection to the run's frames and streams the
// command both ways; a detached run (req.Detach) answers 202 instead and
// goes on in the background (detachRun). Every refusal comes before the
// switch, as an HTTP answer, and changes nothing; after it, how the run
// ended is its last frame.
func (s *Server) createRun(c echo.Context) error {
	r := c.Request()
	var req apiclient.RunRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	if !req.Detach && (r.ProtoMajor != 1 || !strings.EqualFold(r.Header.Get("Upgrade"), apiclient.RunProtocol) || !headerHas(r.Header, "Connection", "upgrade")) {
		c.Response().Header().Set("Upgrade", apiclient.RunProtocol)
		return &httpError{status: http.StatusUpgradeRequired, message: "a run streams its command's input and output over the request's connection: " +
			"send Connection: Upgrade and Upgrade: " + apiclient.RunProtocol + " over HTTP/1.1 (bex run does), then read frames (docs/api.md); " +
			"or send detach: true to run it in the background, its output going to the app's log"}
	}
	if req.Detach && (req.Stdin || req.Terminal) {
		return invalid("detach", "a detached run reads no input and has no terminal: leave out stdin and terminal (bex run --detach without -i)")
	}
	if err := store.CheckRunCommand(req.Command); err != nil {
		return invalidField("command", err)
	}
	timeout := apiclient.DefaultRunTimeout
	switch {
	case req.TimeoutSeconds < 0 || time.Duration(req.TimeoutSeconds)*time.Second > apiclient.MaxRunTimeout:
		return invalid("timeoutSeconds", "timeoutSeconds %d: a run lasts at most %d seconds (%s); leave it out for %s",
			req.TimeoutSeconds, int(apiclient.MaxRunTimeout/time.Second), apiclient.MaxRunTimeout, apiclient.DefaultRunTimeout)
	case req.TimeoutSeconds > 0:
		timeout = time.Duration(req.TimeoutSeconds) * time.Second
	}
	if req.Cols > maxTerminalSide || req.Rows > maxTerminalSide {
		return invalid("cols", "a terminal of %d×%d: at most %d columns and rows", req.Cols, req.Rows, maxTerminalSide)
	}
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	if app.Status.CurrentRelease == 0 {
		return &httpError{status: http.StatusConflict, message: fmt.Sprintf("app %q has no release to run a command in yet: push to its git remote first", app.Name)}
	}
	p := principalOf(c)
	ctx := r.Context()
	q, err := s.quotas.For(ctx, s.store, p.tenant.ID)
	if err != nil {
		return err
	}
	if req.Detach {
		return s.detachRun(c, app.Name, req, timeout, q.ConcurrentRuns)
	}
	// Once the connection is switched the request's context is no
	// measure of the client (the server may end it when the connection
	// closes, first): the run ends when its own reader sees the client
	// go, before that when the request's context ends.
	ctx, end := context.WithCancelCause(context.WithoutCancel(ctx))
	defer end(nil)
	var attached atomic.Bool
	defer context.AfterFunc(r.Context(), func() {
		if !attached.Load() {
			end(errClientGone)
		}
	})()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, runTimeout{after: timeout})
	defer cancel()

	var a *runAttachment
	letGo := func() {}
	cmd := runtime.Command{
		Args: req.Command, Name: "run", Terminal: req.Terminal, Size: runtime.TerminalSize{Cols: req.Cols, Rows: req.Rows},
		Stdin: req.Stdin || req.Terminal,
		Attach: func(release int) (runtime.Streams, error) {
			run, err := s.recordRun(ctx, c, app.Name, release, req, timeout, q.ConcurrentRuns)
			if err != nil {
				return runtime.Streams{}, err
			}
			letGo = s.runs.add(run.ID, end)
			attached.Store(true)
			a, err = s.attachRun(c, run, req.Stdin || req.Terminal, end)
			if err != nil {
				s.finishRun(run, store.RunResult{Reason: "the connection could not be switched to the run's stream: " + err.Error(), End: store.RunNotStarted})
				return runtime.Streams{}, err
			}
			streams := a.streams
			streams.RunID = run.ID
			return streams, nil
		},
	}
	exit, err := s.deployer.Run(ctx, p.tenant.Name, app.Name, cmd)
	letGo()
	if a == nil {
		// Nothing ran and the answer is still HTTP's.
		return runRefusal(app.Name, err)
	}
	exit = s.endRun(a.run, exit, err, context.Cause(ctx))
	a.close(apiclient.RunExit{Run: a.run.Number, Release: a.run.Release, ExitCode: exit.Code, Reason: exit.Reason})
	return nil
}

// detachRun runs req's command in the background, bounded by timeout
// alone, its output going to the app's log as the lines of run.<number>
// (runtime.Streams.Log); it answers 202 with the run once the run is
// recorded (the quota checked) and audited, or the refusal when the run
// did not start. The run ends when its command does, at its time limit,
// when it is stopped (stopRun), when the app is removed or when the
// platform stops; its record says how.
func (s *Server) detachRun(c echo.Context, app string, req apiclient.RunRequest, timeout time.Duration, concurrentRuns int) error {
	tenant := principalOf(c).tenant.Name
	ctx, end := context.WithCancelCause(context.WithoutCancel(c.Request().Context()))
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, runTimeout{after: timeout})
	var run store.Run
	letGo := func() {}
	started, refused := make(chan struct{}), make(chan error, 1)
	cmd := runtime.Command{Args: req.Command, Name: "run", Attach: func(release int) (runtime.Streams, error) {
		var err error
		if run, err = s.recordRun(ctx, c, app, release, req, timeout, concurrentRuns); err != nil {
			return runtime.Streams{}, err
		}
		letGo = s.runs.add(run.ID, end)
		close(started)
		return runtime.Streams{Log: &runtime.LogAs{Process: "run", Index: run.Number}, RunID: run.ID}, nil
	}}
	go func() {
		defer end(nil)
		defer cancel()
		exit, err := s.deployer.Run(ctx, tenant, app, cmd)
		letGo()
		if run.ID == "" {
			refused <- err
			return
		}
		s.endRun(run, exit, err, context.Cause(ctx))
	}()
	select {
	case <-started:
		return c.JSON(http.StatusAccepted, oneOffView(run))
	case err := <-refused:
		return runRefusal(app, err)
	}
}

// recordRun records a run of req in release, refused past the tenant's
// concurrentRuns, and audits it as app.run.
func (s *Server) recordRun(ctx context.Context, c echo.Context, app string, release int, req apiclient.RunRequest, timeout time.Duration, concurrentRuns int) (store.Run, error) {
	p := principalOf(c)
	run, err := s.store.CreateRun(ctx, store.NewRun{
		TenantID: p.tenant.ID, App: app, Release: release, Command: req.Command, Terminal: req.Terminal, Detached: req.Detach,
		CreatedBy: p.actor(), ServerID: s.serverID, ConcurrentRuns: &concurrentRuns,
	})
	if err != nil {
		return store.Run{}, err
	}
	details := map[string]any{
		"run": run.Number, "release": release, "command": req.Command, "terminal": req.Terminal, "timeoutSeconds": int(timeout / time.Second),
	}
	if req.Detach {
		details["detached"] = true
	}
	s.audit(c, "app.run", app, details)
	return run, nil
}

// runRefusal is the HTTP answer to a run that did not start: err is
// what the Releaser's Run returned before anything ran.
func runRefusal(app string, err error) error {
	if errors.Is(err, runtime.ErrRunNotSupported) {
		return &httpError{status: http.StatusNotImplemented, message: fmt.Sprintf(
			"app %s runs where one-off commands do not run: %v", app, err)}
	}
	if errors.Is(err, runtime.ErrNoInput) {
		return invalid("stdin", "app %s runs where a one-off command reads no input and has no terminal "+
			"(its output and exit status still come back): run it without -i and with --no-tty (stdin and terminal false)", app)
	}
	if err == nil {
		err = errors.New("the runtime ran the command without attaching it")
	}
	return fmt.Errorf("running a command in %s: %w", app, err)
}

// endRun records how a recorded run ended, from what the Releaser's Run
// returned and the cause of the run's context once it did, and returns
// it: an error is a command that could not start.
func (s *Server) endRun(run store.Run, exit runtime.Exit, err, cause error) runtime.Exit {
	res := store.RunResult{End: runEndOf(exit, err, cause)}
	if err != nil {
		exit = runtime.Exit{Code: 1, Reason: "the command could not start: " + err.Error()}
	} else {
		res.ExitCode = &exit.Code
	}
	res.Reason = exit.Reason
	s.finishRun(run, res)
	return exit
}

// runTimeout ends a run's context at its time limit.
type runTimeout struct{ after time.Duration }

func (e runTimeout) Error() string { return fmt.Sprintf("timed out after %s", e.after) }

// runEndOf says how a run ended, for its audit entry, from what the
// Releaser's Run returned (an error: it did not start) and the cause of
// its context. The runtime gives the cause as the reason of a command
// it ended (runtime.Runner); a reason that is not the cause is the
// runtime's own (the app removed, the platform stopping, a memory limit).
func runEndOf(exit runtime.Exit, err, cause error) store.RunEnd {
	switch {
	case err != nil:
		return store.RunNotStarted
	case exit.Reason == "":
		return store.RunExited
	case cause == nil || exit.Reason != cause.Error():
		return store.RunKilled
	}
	var stopped runStopped
	var timedOut runTimeout
	switch {
	case errors.As(cause, &stopped):
		return store.RunStopped
	case errors.As(cause, &timedOut):
		return store.RunTimedOut
	case errors.Is(cause, errClientGone):
		return store.RunDisconnected
	}
	return store.RunKilled
}

// headerHas reports whether the comma-separated header name holds token.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// DefaultRunKeepAlive is how often an attached run that writes nothing
// is sent a keep-alive frame when Options do not say: well under the
// 30 to 60 s after which common proxies and load balancers close an idle
// connection.
const DefaultRunKeepAlive = 15 * time.Second

// runAttachment is a run's switched connection.
type runAttachment struct {
	run     store.Run
	conn    net.Conn
	frames  *apiclient.FrameWriter
	streams runtime.Streams
	// done is closed once the exit frame is to be sent: no keep-alive
	// frame follows.
	done     chan struct{}
	doneOnce sync.Once
}

// attachRun answers 101 Switching Protocols and returns the run's streams
// over the connection: frames the client sends go to the command's stdin
// (when input asks for it; otherwise they are dropped) and terminal; when
// the client closes the connection, end ends the run.
func (s *Server) attachRun(c echo.Context, run store.Run, input bool, end context.CancelCauseFunc) (*runAttachment, error) {
	conn, rw, err := c.Response().Hijack()
	if err != nil {
		return nil, err
	}
	// The server's deadlines were for the request; the run sets its own.
	if err := conn.SetDeadline(time.Time{}); err != nil {
		conn.Close()
		return nil, err
	}
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\nBex-Run: %d\r\nBex-Release: %d\r\n\r\n",
		apiclient.RunProtocol, run.Number, run.Release)
	if err := rw.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	stdin, stdinW := io.Pipe()
	resize := make(chan runtime.TerminalSize, 1)
	go readRunFrames(rw.Reader, stdinW, resize, end)
	fw := apiclient.NewFrameWriter(conn)
	a := &runAttachment{
		run: run, conn: conn, frames: fw, done: make(chan struct{}),
		streams: runtime.Streams{Stdin: stdin, Stdout: fw.Stream(apiclient.StreamStdout), Stderr: fw.Stream(apiclient.StreamStderr), Resize: resize},
	}
	if s.runKeepAlive > 0 {
		go a.keepAlive(s.runKeepAlive)
	}
	if !input {
		// Nobody reads it: stdin frames fail their write at once.
		stdin.Close()
		a.streams.Stdin = nil
	}
	return a, nil
}

// readRunFrames reads the client's frames until the connection ends:
// stdin's go to stdin (an empty one closes it), resizes to resize (the
// latest one only, when the last is not taken yet). A connection that
// ends, or a frame that cannot be read, ends the run.
func readRunFrames(r *bufio.Reader, stdin *io.PipeWriter, resize chan runtime.TerminalSize, end context.CancelCauseFunc) {
	defer close(resize)
	buf := make([]byte, apiclient.MaxFramePayload)
	for {
		stream, p, err := apiclient.ReadFrame(r, buf)
		if err != nil {
			stdin.CloseWithError(errClientGone)
			end(errClientGone)
			return
		}
		switch stream {
		case apiclient.StreamStdin:
			if len(p) == 0 {
				stdin.Close()
				continue
			}
			// Written while the command reads, or dropped once stdin is
			// closed.
			_, _ = stdin.Write(p)
		case apiclient.StreamResize:
			var size apiclient.TerminalSize
			if json.Unmarshal(p, &size) != nil || size.Cols > maxTerminalSide || size.Rows > maxTerminalSide {
				continue
			}
			select {
			case <-resize:
			default:
			}
			resize <- runtime.TerminalSize{Cols: size.Cols, Rows: size.Rows}
		}
	}
}

// keepAlive sends an empty keep-alive frame every interval until the run
// ends or the connection fails. Sent whether or not the command wrote
// meanwhile: eight bytes an interval cost less than telling.
func (a *runAttachment) keepAlive(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-a.done:
			return
		case <-t.C:
			if a.frames.WriteFrame(apiclient.StreamKeepAlive, nil) != nil {
				return
			}
		}
	}
}

// close sends the exit frame and closes the connection.
func (a *runAttachment) close(exit apiclient.RunExit) {
	a.doneOnce.Do(func() { close(a.done) })
	b, _ := json.Marshal(exit)
	_ = a.frames.WriteFrame(apiclient.StreamExit, b)
	a.conn.Close()
}

// finishRun records how run ended, even when its client has gone, and
// so audits its end (app.run.end, store.FinishRun). A run marked lost
// meanwhile (this server went unseen) keeps that end, audited when it was
// marked. An end it cannot write (the store did not answer) is kept and
// tried again after each heartbeat of the run keeper (Run), so that the
// run stops counting and is audited once the store answers again;
// meanwhile its row says running, and the heartbeats keep it from being
// taken for lost.
func (s *Server) finishRun(run store.Run, res store.RunResult) {
	if err := s.writeEnd(context.Background(), run, res); err != nil {
		s.log.Error(err, "Recording the end of a run; trying again after each heartbeat", "app", run.App, "run", run.Number)
		s.unwritten.add(run, res)
	}
}

// writeEnd records run's end, taking at most 10 s; the error is one
// worth trying again: an end recorded already, or refused, is not.
func (s *Server) writeEnd(ctx context.Context, run store.Run, res store.RunResult) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.store.FinishRun(ctx, run.ID, res)
	switch {
	case errors.Is(err, store.ErrConflict):
		s.log.Info("Run ended after its record did; the record is kept", "app", run.App, "run", run.Number, "reason", res.Reason)
		return nil
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid):
		s.log.Error(err, "Recording the end of a run", "app", run.App, "run", run.Number)
		return nil
	}
	return err
}

// listRuns answers the app's runs, newest first.
func (s *Server) listRuns(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	limit, err := limitOf(c)
	if err != nil {
		return err
	}
	runs, err := s.store.ListRuns(c.Request().Context(), principalOf(c).tenant.ID, app.Name, limit)
	if err != nil {
		return err
	}
	views := make([]apiclient.Run, 0, len(runs))
	for _, r := range runs {
		views = append(views, oneOffView(r))
	}
	return c.JSON(http.StatusOK, views)
}

// oneOffView is the API's view of a run's record.
func oneOffView(r store.Run) apiclient.Run {
	v := apiclient.Run{
		Number: r.Number, Release: r.Release, Command: r.Command, Terminal: r.Terminal, Detached: r.Detached, CreatedBy: r.CreatedBy,
		Status: string(r.Status), ExitCode: r.ExitCode, Reason: r.Reason, StartedAt: r.StartedAt.UTC(),
	}
	if r.FinishedAt != nil {
		at := r.FinishedAt.UTC()
		v.FinishedAt = &at
	}
	if r.StopRequestedAt != nil {
		at := r.StopRequestedAt.UTC()
		v.StopRequestedAt, v.StopRequestedBy = &at, r.StopRequestedBy
	}
	return v
}
