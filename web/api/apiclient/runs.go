package apiclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Limits of a run, as the API applies them.
const (
	// DefaultRunTimeout is how long a run may last when its request does
	// not say.
	DefaultRunTimeout = time.Hour
	// MaxRunTimeout is the longest a run may last.
	MaxRunTimeout = 24 * time.Hour
)

// RunRequest is the body of POST /api/v1/apps/{app}/runs: a command to
// run in a fresh instance of the app's current release.
type RunRequest struct {
	// Command is the command line, run as it is with no shell in between:
	// ["rake", "db:migrate"], or ["sh", "-c", "echo $FOO"] for a shell.
	// At most 256 arguments and 16 KiB.
	Command []string `json:"command"`
	// Terminal runs it on a pseudo-terminal of Cols × Rows (an interactive
	// shell): stdout then carries everything it writes, and the client may
	// send the terminal's new sizes.
	Terminal bool   `json:"terminal,omitempty"`
	Cols     uint16 `json:"cols,omitempty"`
	Rows     uint16 `json:"rows,omitempty"`
	// TimeoutSeconds bounds the run: one hour when 0, at most 24 hours.
	// A run that lasts longer is stopped.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// Stdin says the client sends the command's input (stdin frames;
	// Terminal implies it). Without either the command's stdin is empty
	// and stdin frames are dropped. On a runtime that takes no input a
	// request with Stdin or Terminal answers 422 on field stdin, and
	// nothing runs. Client.Run sets it when RunStreams.Stdin is set.
	Stdin bool `json:"stdin,omitempty"`
	// Detach runs the command in the background, without the upgrade:
	// the answer is 202 with the Run once it runs, its output goes to the
	// app's log (bex logs) as the lines of run.<Number>, and how it ended
	// to its record. A detached run reads no input and has no terminal:
	// with Stdin or Terminal it answers 422 on field detach.
	// Client.RunDetached sets it.
	Detach bool `json:"detach,omitempty"`
}

// Run is one one-off run of an app, as GET /api/v1/apps/{app}/runs lists
// it.
type Run struct {
	// Number is 1, 2, 3, ... per app; the run is run.<Number>.
	Number  int      `json:"number"`
	Release int      `json:"release"`
	Command []string `json:"command"`
	// Terminal says whether it ran on a terminal.
	Terminal bool `json:"terminal"`
	// Detached says it ran in the background, its output going to the
	// app's log.
	Detached bool `json:"detached"`
	// CreatedBy is who ran it: an email, or token:<name>.
	CreatedBy string `json:"createdBy"`
	// Status is running, succeeded (exit status 0), failed, or lost: the
	// API server running it stopped answering before it ended (Reason
	// says so), and it no longer counts towards the concurrentRuns quota.
	Status string `json:"status"`
	// ExitCode is its exit status once it ended; absent while it runs,
	// when it never started, and when it was lost.
	ExitCode *int `json:"exitCode,omitempty"`
	// Reason says why it ended when not on its own (timed out, the client
	// went away, its server stopped answering), or why it never started.
	Reason     string     `json:"reason,omitempty"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// StopRequestedAt is when a stop was asked of it (StopRun),
	// StopRequestedBy by whom; absent when none was. A run stopped ends
	// with the reason "stopped by <StopRequestedBy>".
	StopRequestedAt *time.Time `json:"stopRequestedAt,omitempty"`
	StopRequestedBy string     `json:"stopRequestedBy,omitempty"`
}

// Summary says how a run stands, in the words bex runs and the
// dashboard's app page use: "running", "stopping (asked by a@b.c)",
// "exit 0", "exit 143: timed out after 1h0m0s", "lost: the API server
// running it stopped answering", "not started: …".
func (r Run) Summary() string {
	switch {
	case r.Status == "running" && r.StopRequestedAt != nil:
		return StoppingBy(r.StopRequestedBy)
	case r.Status == "running":
		return "running"
	case r.Status == "lost":
		return "lost: " + r.Reason
	case r.ExitCode == nil:
		return "not started: " + r.Reason
	case r.Reason != "":
		return fmt.Sprintf("exit %d: %s", *r.ExitCode, r.Reason)
	}
	return fmt.Sprintf("exit %d", *r.ExitCode)
}

// StoppingBy is the state of a run asked to stop by who, as bex runs, bex
// ps and the dashboard write it.
func StoppingBy(who string) string { return "stopping (asked by " + who + ")" }

// RunExit is the exit frame of a run's stream: how the command ended.
type RunExit struct {
	// Run is the run's number, Release the release it ran in.
	Run     int `json:"run"`
	Release int `json:"release"`
	// ExitCode is the command's exit status; 128+N when signal N ended
	// it.
	ExitCode int `json:"exitCode"`
	// Reason says why it was ended when not on its own: "timed out after
	// 1h0m0s", "killed for going past its memory limit (512 MiB)"; or why
	// it could not start (then ExitCode is 1 or more).
	Reason string `json:"reason,omitempty"`
}

// TerminalSize is the size of a run's terminal in characters: the payload
// of a resize frame.
type TerminalSize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// RunProtocol is the Upgrade token of a run: after the request's answer
// "101 Switching Protocols", the connection carries frames both ways.
const RunProtocol = "bex-run.v1"

// The streams of a run's frames.
const (
	// StreamStdin (client to server) is the command's input; an empty
	// one closes it.
	StreamStdin byte = 0
	// StreamStdout and StreamStderr (server to client) are its output.
	StreamStdout byte = 1
	StreamStderr byte = 2
	// StreamExit (server to client) is the last frame: a RunExit in JSON.
	StreamExit byte = 3
	// StreamResize (client to server) is a TerminalSize in JSON.
	StreamResize byte = 4
	// StreamKeepAlive (server to client) is an empty frame the server
	// sends every so often while the run lasts, so that proxies that
	// close idle connections keep the run's; the client ignores it, as
	// it ignores any stream it does not know.
	StreamKeepAlive byte = 5
)

// MaxFramePayload is the most a frame carries.
const MaxFramePayload = 32 << 10

// frameHeader is the size of a frame's header: the stream, three zero
// bytes, the payload's length as a big-endian uint32 (Docker's attach
// framing).
const frameHeader = 8

// FrameWriter writes frames to a run's connection. It is safe for
// concurrent use: each frame is written whole.
type FrameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewFrameWriter returns a FrameWriter on w.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// WriteFrame writes p on stream, in frames of at most MaxFramePayload; an
// empty p is one empty frame.
func (f *FrameWriter) WriteFrame(stream byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for first := true; first || len(p) > 0; first = false {
		n := min(len(p), MaxFramePayload)
		var h [frameHeader]byte
		h[0] = stream
		binary.BigEndian.PutUint32(h[4:], uint32(n))
		if _, err := f.w.Write(append(h[:], p[:n]...)); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Stream returns a writer whose writes are frames of stream.
func (f *FrameWriter) Stream(stream byte) io.Writer { return streamWriter{f, stream} }

type streamWriter struct {
	f      *FrameWriter
	stream byte
}

func (s streamWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := s.f.WriteFrame(s.stream, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// ReadFrame reads the next frame from r into buf (of MaxFramePayload
// bytes at least) and returns its stream and payload. A frame that
// announces more than MaxFramePayload, or whose header's reserved bytes
// are not zero, is an error.
func ReadFrame(r io.Reader, buf []byte) (byte, []byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[4:])
	if h[1] != 0 || h[2] != 0 || h[3] != 0 || n > MaxFramePayload || int(n) > len(buf) {
		return 0, nil, fmt.Errorf("invalid frame header % x: want a stream byte, three zero bytes and a length of at most %d", h, MaxFramePayload)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return h[0], buf[:n], nil
}

// RunStreams are a run's streams on the client's side. A nil Stdin sends
// none: the command reads end-of-file at once. Resize, when set, sends the
// terminal's new sizes until it is closed.
type RunStreams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Resize         <-chan TerminalSize
}

// Run runs req's command in a fresh instance of the app's current release
// and attaches s: what the command writes comes to Stdout and Stderr as it
// comes, Stdin goes to it. It returns how the command ended once it has;
// ending ctx closes the connection, which ends the run. A refusal (a
// quota, an app without a release) is an *Error, and nothing ran. A read
// of Stdin in progress when Run returns is left to end on its own.
func (c *Client) Run(ctx context.Context, app string, req RunRequest, s RunStreams) (RunExit, error) {
	if s.Stdin != nil {
		req.Stdin = true
	}
	body, err := json.Marshal(req)
	if err != nil {
		return RunExit{}, fmt.Errorf("encoding request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/v1/apps/"+seg(app)+"/runs", bytes.NewReader(body))
	if err != nil {
		return RunExit{}, fmt.Errorf("building request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Connection", "Upgrade")
	hr.Header.Set("Upgrade", RunProtocol)
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.upgrading().Do(hr)
	if err != nil {
		return RunExit{}, fmt.Errorf("calling the API at %s: %w", c.base, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return RunExit{}, errorOf(resp)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return RunExit{}, errors.New("the API switched protocols but gave no connection to write to")
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	fw := NewFrameWriter(conn)
	go sendStdin(fw, s.Stdin)
	if s.Resize != nil {
		go sendSizes(ctx, fw, s.Resize)
	}
	stdout, stderr := s.Stdout, s.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	buf := make([]byte, MaxFramePayload)
	for {
		stream, p, err := ReadFrame(conn, buf)
		if err != nil {
			if ctx.Err() != nil {
				return RunExit{}, ctx.Err()
			}
			return RunExit{}, fmt.Errorf("the run's connection ended before its exit status came: %w", err)
		}
		switch stream {
		case StreamStdout:
			_, err = stdout.Write(p)
		case StreamStderr:
			_, err = stderr.Write(p)
		case StreamExit:
			var exit RunExit
			if err := json.Unmarshal(p, &exit); err != nil {
				return RunExit{}, fmt.Errorf("reading the run's exit status: %w", err)
			}
			return exit, nil
		}
		if err != nil {
			return RunExit{}, err
		}
	}
}

// upgrading is the client's HTTP client, speaking HTTP/1.1 only: an
// Upgrade has no meaning in HTTP/2.
func (c *Client) upgrading() *http.Client {
	hc := *c.http
	t, ok := hc.Transport.(*http.Transport)
	if hc.Transport == nil {
		t, ok = http.DefaultTransport.(*http.Transport)
	}
	if ok {
		t = t.Clone()
		t.ForceAttemptHTTP2 = false
		t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		hc.Transport = t
	}
	return &hc
}

// sendStdin sends in as stdin frames, then the empty frame that closes
// the command's stdin.
func sendStdin(fw *FrameWriter, in io.Reader) {
	if in != nil {
		if _, err := io.Copy(fw.Stream(StreamStdin), in); err != nil {
			return
		}
	}
	_ = fw.WriteFrame(StreamStdin, nil)
}

// sendSizes sends each size as a resize frame until sizes is closed or
// ctx ends.
func sendSizes(ctx context.Context, fw *FrameWriter, sizes <-chan TerminalSize) {
	for {
		select {
		case <-ctx.Done():
			return
		case size, ok := <-sizes:
			if !ok {
				return
			}
			b, _ := json.Marshal(size)
			if fw.WriteFrame(StreamResize, b) != nil {
				return
			}
		}
	}
}

// RunDetached runs req's command in the background (req.Detach): it
// returns the run once its command runs, and the command goes on without
// the client until it exits or is stopped; its output goes to the app's
// log. A refusal is an *Error, and nothing ran.
func (c *Client) RunDetached(ctx context.Context, app string, req RunRequest) (Run, error) {
	req.Detach = true
	var r Run
	return r, c.call(ctx, http.MethodPost, "/apps/"+seg(app)+"/runs", nil, req, &r)
}

// ListRuns lists app's one-off runs, newest first.
func (c *Client) ListRuns(ctx context.Context, app string, limit int) ([]Run, error) {
	var rs []Run
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return rs, c.call(ctx, http.MethodGet, "/apps/"+seg(app)+"/runs", q, nil, &rs)
}

// StopRun stops run.number of app, attached or detached: it returns the
// run once the stop is recorded, still running; the command is ended
// (SIGTERM, then SIGKILL) wherever it runs, and its end comes to its
// record (ListRuns) with the reason "stopped by <who>". A run that has
// ended is an *Error of status 409, an unknown one of 404.
func (c *Client) StopRun(ctx context.Context, app string, number int) (Run, error) {
	var r Run
	return r, c.call(ctx, http.MethodPost, "/apps/"+seg(app)+"/runs/"+strconv.Itoa(number)+"/stop", nil, nil, &r)
}
