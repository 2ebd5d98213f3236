package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"bex.co/bex/internal/lines"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/sandbox"
)

var _ runtime.Runner = (*Driver)(nil)

// errAppRemoved and errDriverClosed end the runs of an app removed, and
// of a driver closed.
var (
	errAppRemoved   = errors.New("the app was removed")
	errDriverClosed = errors.New("the platform is stopping")
)

// oneOff is a run in progress: its end, and how to end it.
type oneOff struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// Run implements runtime.Runner: a container of the release in the
// sandbox (the release's files at /app, or its root filesystem; its
// environment and limits), on a terminal when asked; without a sandbox, a
// process of the release's directory in its own process group, never on a
// terminal. Ending ctx sends SIGTERM, then SIGKILL after GracePeriod.
// Remove of the app and Close end its runs as ctx would. Streams.Log
// sends the output to the app's log buffer too, as an instance's goes.
func (d *Driver) Run(ctx context.Context, rel runtime.Release, cmd runtime.Command) (runtime.Exit, error) {
	if err := d.validate(rel); err != nil {
		return runtime.Exit{}, err
	}
	if len(cmd.Args) == 0 || cmd.Args[0] == "" {
		return runtime.Exit{}, errors.New("no command to run")
	}
	if cmd.Attach == nil {
		return runtime.Exit{}, errors.New("the command has no streams to attach")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &oneOff{cancel: cancel, done: make(chan struct{})}
	defer close(r.done)
	unregister, err := d.register(appKey{rel.Tenant, rel.App}, r)
	if err != nil {
		return runtime.Exit{}, err
	}
	defer unregister()
	envMap := d.baseEnv(rel)
	env := make([]string, 0, len(envMap))
	for k, v := range envMap {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	var logged *runLog
	attach := cmd.Attach
	cmd.Attach = func(release int) (runtime.Streams, error) {
		s, err := attach(release)
		if err != nil || s.Log == nil {
			return s, err
		}
		logged, err = d.logRun(rel, cmd.Args, &s)
		return s, err
	}
	var exit runtime.Exit
	if d.opts.Sandbox == nil {
		exit, err = d.runOnHost(ctx, rel, cmd, env)
	} else {
		exit, err = d.runInSandbox(ctx, rel, cmd, env)
	}
	if logged != nil {
		logged.end(exit, err)
	}
	return exit, err
}

// runLog is a one-off command's output going to its app's log
// (Streams.Log).
type runLog struct {
	logs           *logBuffer
	as             runtime.LogAs
	stdout, stderr *lines.Writer
}

// logRun makes s's output go to the app's log too, as the lines of
// s.Log, and says there that the command runs.
func (d *Driver) logRun(rel runtime.Release, args []string, s *runtime.Streams) (*runLog, error) {
	a, err := d.app(rel.Tenant, rel.App)
	if err != nil {
		return nil, err
	}
	l := &runLog{logs: a.logs, as: *s.Log}
	l.stdout, l.stderr = &lines.Writer{Emit: l.emitter(runtime.Stdout)}, &lines.Writer{Emit: l.emitter(runtime.Stderr)}
	s.Stdout, s.Stderr = alsoTo(s.Stdout, l.stdout), alsoTo(s.Stderr, l.stderr)
	l.add(runtime.System, "Running "+strings.Join(args, " "))
	return l, nil
}

func (l *runLog) emitter(stream string) func([]byte, bool) {
	return func(line []byte, _ bool) { l.add(stream, string(line)) }
}

func (l *runLog) add(stream, text string) {
	l.logs.add(runtime.LogLine{Time: time.Now(), Process: l.as.Process, Instance: l.as.Index, Stream: stream, Text: text})
}

// end writes what is left of the output's last lines and how the
// command ended, as Run returns it.
func (l *runLog) end(exit runtime.Exit, err error) {
	l.stdout.Flush()
	l.stderr.Flush()
	switch {
	case err != nil:
		l.add(runtime.System, fmt.Sprintf("Could not start: %v", err))
	case exit.Reason != "":
		l.add(runtime.System, fmt.Sprintf("Stopped, %s (exit status %d)", exit.Reason, exit.Code))
	default:
		l.add(runtime.System, fmt.Sprintf("Process exited with status %d", exit.Code))
	}
}

// alsoTo is w and to, or to alone when w is nil.
func alsoTo(w, to io.Writer) io.Writer {
	if w == nil {
		return to
	}
	return io.MultiWriter(w, to)
}

// register records r as a run of the app, for Remove and Close to end.
func (d *Driver) register(k appKey, r *oneOff) (func(), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("process driver is closed")
	}
	if d.runs == nil {
		d.runs = map[appKey]map[*oneOff]bool{}
	}
	if d.runs[k] == nil {
		d.runs[k] = map[*oneOff]bool{}
	}
	d.runs[k][r] = true
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		delete(d.runs[k], r)
		if len(d.runs[k]) == 0 {
			delete(d.runs, k)
		}
	}, nil
}

// endRuns ends the runs of the app (all apps when k is nil) with cause and
// waits until they are gone.
func (d *Driver) endRuns(k *appKey, cause error) {
	d.mu.Lock()
	var runs []*oneOff
	for key, set := range d.runs {
		if k != nil && key != *k {
			continue
		}
		for r := range set {
			runs = append(runs, r)
		}
	}
	d.mu.Unlock()
	for _, r := range runs {
		r.cancel(cause)
	}
	for _, r := range runs {
		<-r.done
	}
}

// runInSandbox runs cmd in a container of its own.
func (d *Driver) runInSandbox(ctx context.Context, rel runtime.Release, cmd runtime.Command, env []string) (runtime.Exit, error) {
	limits, err := limitsOf(rel.Resources)
	if err != nil {
		return runtime.Exit{}, err
	}
	spec := sandbox.Spec{
		Tenant:       rel.Tenant,
		Hostname:     strings.ReplaceAll(cmd.Name, ".", "-"),
		Args:         cmd.Args,
		Env:          env,
		Limits:       limits,
		Terminal:     cmd.Terminal,
		TerminalSize: sandbox.TerminalSize(cmd.Size),
	}
	if rel.RootFS != "" {
		spec.RootFS, spec.WorkDir = rel.RootFS, rel.WorkDir
	} else {
		spec.AppDir = rel.Dir
	}
	c, err := d.opts.Sandbox.Create(spec)
	if err != nil {
		return runtime.Exit{}, fmt.Errorf("preparing the instance of %s: %w", cmd.Name, err)
	}
	defer c.Destroy()
	ex, err := c.Command()
	if err != nil {
		return runtime.Exit{}, err
	}
	streams, err := cmd.Attach(rel.Number)
	if err != nil {
		return runtime.Exit{}, err
	}
	stdout, stderr := orDiscard(streams.Stdout), orDiscard(streams.Stderr)
	if !cmd.Terminal {
		ex.Stdout, ex.Stderr = stdout, stderr
		if err := pipeStdin(ex, streams.Stdin); err != nil {
			return runtime.Exit{}, err
		}
	}
	ex.WaitDelay = time.Second
	if err := ex.Start(); err != nil {
		return runtime.Exit{}, fmt.Errorf("starting %s: %w", cmd.Name, err)
	}
	stop := d.stopOnCancel(ctx, func(sig syscall.Signal) { _ = c.Signal(sig) })
	var copied chan struct{}
	var console *sandbox.Console
	if cmd.Terminal {
		console, err = c.Console()
		if err != nil {
			_ = c.Signal(syscall.SIGKILL)
			_ = ex.Wait()
			stop()
			return runtime.Exit{}, err
		}
		defer console.Close()
		copied = make(chan struct{})
		go func() {
			_, _ = io.Copy(stdout, console)
			close(copied)
		}()
		go func() {
			if streams.Stdin != nil {
				_, _ = io.Copy(console, streams.Stdin)
			}
		}()
		go resizeOnRequest(ctx, console, streams.Resize)
	}
	waitErr := ex.Wait()
	stop()
	if copied != nil {
		// What the process wrote last comes before its end.
		select {
		case <-copied:
		case <-time.After(time.Second):
			console.Close()
			<-copied
		}
	}
	exit := exitOf(ctx, ex.ProcessState, waitErr)
	if c.OOMKilled() {
		exit.Reason = fmt.Sprintf("killed for going past its memory limit (%d MiB)", c.MemoryLimit()>>20)
	}
	return exit, nil
}

// runOnHost runs cmd as a process of this machine in the release's
// directory, in a process group of its own.
func (d *Driver) runOnHost(ctx context.Context, rel runtime.Release, cmd runtime.Command, env []string) (runtime.Exit, error) {
	// A shell in between finds Args[0] on the release's PATH, not on
	// this process's, and is replaced by the command at once.
	ex := exec.Command("/bin/sh", append([]string{"-c", `exec "$@"`, "sh"}, cmd.Args...)...)
	ex.Dir, ex.Env = rel.Dir, env
	ex.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	streams, err := cmd.Attach(rel.Number)
	if err != nil {
		return runtime.Exit{}, err
	}
	ex.Stdout, ex.Stderr = orDiscard(streams.Stdout), orDiscard(streams.Stderr)
	if cmd.Terminal {
		// No terminal on the host: what the terminal would show, both
		// streams, goes to its output.
		ex.Stderr = ex.Stdout
	}
	if err := pipeStdin(ex, streams.Stdin); err != nil {
		return runtime.Exit{}, err
	}
	ex.WaitDelay = time.Second
	if err := ex.Start(); err != nil {
		return runtime.Exit{}, fmt.Errorf("starting %s: %w", cmd.Name, err)
	}
	pid := ex.Process.Pid
	stop := d.stopOnCancel(ctx, func(sig syscall.Signal) { _ = syscall.Kill(-pid, sig) })
	waitErr := ex.Wait()
	stop()
	// Nothing it started outlives it.
	killGroup(pid, groupKillWait)
	return exitOf(ctx, ex.ProcessState, waitErr), nil
}

// pipeStdin gives ex's process stdin from in, copied by a goroutine of
// its own that ends with in (or once the process is gone), so that a
// reader that never ends does not hold Wait; nil gives it none.
func pipeStdin(ex *exec.Cmd, in io.Reader) error {
	if in == nil {
		return nil
	}
	w, err := ex.StdinPipe()
	if err != nil {
		return err
	}
	go func() {
		_, _ = io.Copy(w, in)
		w.Close()
	}()
	return nil
}

// stopOnCancel signals, once ctx ends, SIGTERM with signal, then SIGKILL
// after GracePeriod; the returned stop ends the watch.
func (d *Driver) stopOnCancel(ctx context.Context, signal func(syscall.Signal)) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		signal(syscall.SIGTERM)
		t := time.NewTimer(d.opts.GracePeriod)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			signal(syscall.SIGKILL)
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// resizeOnRequest applies each size received to console until sizes is
// closed or ctx ends.
func resizeOnRequest(ctx context.Context, console *sandbox.Console, sizes <-chan runtime.TerminalSize) {
	if sizes == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case s, ok := <-sizes:
			if !ok {
				return
			}
			_ = console.Resize(sandbox.TerminalSize(s))
		}
	}
}

// exitOf reads how a run ended from its process's state and Wait's
// error, and why when ctx had ended it.
func exitOf(ctx context.Context, ps *os.ProcessState, err error) runtime.Exit {
	var exit runtime.Exit
	switch {
	case ps == nil:
		exit.Code, exit.Reason = 1, fmt.Sprint(err)
	case !ps.Exited():
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			exit.Code = 128 + int(ws.Signal())
		} else {
			exit.Code = 1
		}
	default:
		exit.Code = ps.ExitCode()
	}
	if ctx.Err() != nil {
		exit.Reason = context.Cause(ctx).Error()
	}
	return exit
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
