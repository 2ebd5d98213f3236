package node

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"bex.co/bex/internal/sandbox"
)

// An attach session is the kubelet's remotecommand protocol over SPDY, as
// the apiserver proxies pods/attach: the client opens one stream a
// standard stream (the streamType header: error, stdin, stdout, stderr,
// resize), and the error stream carries how the process ended, a
// metav1.Status. v5 is v4 on SPDY (its close signal is WebSocket's).
const (
	// streamsTimeout is how long a client has to open its streams after
	// the upgrade (the kubelet's stream creation timeout).
	streamsTimeout = 30 * time.Second
	// firstSizeWait is how long a terminal's session waits for the
	// client's first size before it lets a held process start on the
	// terminal's default size.
	firstSizeWait = 2 * time.Second
	// idleTimeout closes a session whose streams carried nothing for
	// that long (the kubelet's streaming idle timeout).
	idleTimeout = 4 * time.Hour
	// maxResizeMessage bounds one message of the resize stream, a JSON
	// {"Width":W,"Height":H} and a newline.
	maxResizeMessage = 256
	// defaultCols and defaultRows are a container terminal's size until
	// a client sets one.
	defaultCols, defaultRows = 80, 24
)

// attachProtocols are the remotecommand protocols served, best first.
func attachProtocols() []string {
	return []string{remotecommand.StreamProtocolV5Name, remotecommand.StreamProtocolV4Name}
}

// attachPoint is one run of a container made with stdin: what an attach
// session connects to. Its process's output goes to the session in
// progress (and to the container's log, whatever happens); the session's
// stdin goes to the process. One session at a time; a stdinOnce
// container takes one session in all, and its process waits for it
// (hold).
type attachPoint struct {
	tty, once bool

	mu       sync.Mutex
	session  *attachSession // the session in progress
	sessions int            // sessions so far
	size     *sandbox.TerminalSize
	stdin    io.WriteCloser // the process's input once it started
	console  *sandbox.Console

	first   chan struct{} // closed by the first session
	started chan struct{} // closed once the process runs
	ended   chan struct{} // closed once the process ended and its output is out
	exit    int32         // the process's exit status, once ended
}

func newAttachPoint(c corev1.Container) *attachPoint {
	return &attachPoint{tty: c.TTY, once: c.StdinOnce,
		first: make(chan struct{}), started: make(chan struct{}), ended: make(chan struct{})}
}

// attachSession is one attach: its client's streams.
type attachSession struct {
	stdout, stderr io.Writer
	begun          bool // it has its streams
}

// output is the writer of the process's stdout (stderr false) or stderr
// going to the session in progress; writes never fail, a session gone
// misses them.
func (p *attachPoint) output(stderr bool) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		s := p.session
		p.mu.Unlock()
		if s == nil {
			return len(b), nil
		}
		w := s.stdout
		if stderr && !p.tty {
			w = s.stderr
		}
		if w != nil {
			_, _ = w.Write(b)
		}
		return len(b), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// claim makes s the session in progress, or says why it cannot be.
func (p *attachPoint) claim() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.session != nil:
		return errors.New("another attach is in progress: bex-node takes one at a time")
	case p.once && p.sessions > 0:
		return errors.New("its stdin was for one attach (stdinOnce), which has ended")
	}
	p.session = &attachSession{}
	return nil
}

// begin hands the claimed session its streams and lets a held process
// start.
func (p *attachPoint) begin(stdout, stderr io.Writer) {
	p.mu.Lock()
	p.session.stdout, p.session.stderr, p.session.begun = stdout, stderr, true
	p.sessions++
	first := p.sessions == 1
	p.mu.Unlock()
	if first {
		close(p.first)
	}
}

// release ends the session in progress; a stdinOnce process's input ends
// with the session that began.
func (p *attachPoint) release() {
	p.mu.Lock()
	begun := p.session != nil && p.session.begun
	p.session = nil
	p.mu.Unlock()
	if begun && p.once {
		p.closeStdin()
	}
}

// heldSize is the terminal's size a session set before the process
// started; nil when none did.
func (p *attachPoint) heldSize() *sandbox.TerminalSize {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.size
}

// start records the process's input and terminal once it runs.
func (p *attachPoint) start(stdin io.WriteCloser, console *sandbox.Console) {
	p.mu.Lock()
	p.stdin, p.console = stdin, console
	if console != nil && p.size != nil {
		_ = console.Resize(*p.size)
	}
	p.mu.Unlock()
	close(p.started)
}

// end records the process's exit once its output is out.
func (p *attachPoint) end(exit int32) {
	p.exit = exit
	close(p.ended)
}

// write writes a session's input to the process.
func (p *attachPoint) write(b []byte) (int, error) {
	p.mu.Lock()
	in := p.stdin
	p.mu.Unlock()
	if in == nil {
		return 0, io.ErrClosedPipe
	}
	return in.Write(b)
}

// closeStdin ends the process's input; a terminal stays (closing it would
// hang the process up).
func (p *attachPoint) closeStdin() {
	p.mu.Lock()
	in := p.stdin
	if !p.tty {
		p.stdin = nil
	}
	p.mu.Unlock()
	if in != nil && !p.tty {
		in.Close()
	}
}

func (p *attachPoint) resize(size sandbox.TerminalSize) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.size = &size
	if p.console != nil {
		_ = p.console.Resize(size)
	}
}

func (w *podWorker) setAttach(p *attachPoint) {
	w.mu.Lock()
	w.attach = p
	w.mu.Unlock()
}

func (w *podWorker) attachPoint() *attachPoint {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attach
}

// attachRequest is what an /attach request asks for: the kubelet's query
// parameters input, output, error and tty ("1" or "true"), as the
// apiserver sends them for pods/attach's stdin, stdout, stderr and tty.
type attachRequest struct {
	stdin, stdout, stderr, tty bool
}

func parseAttachRequest(q map[string][]string) (attachRequest, error) {
	flag := func(k string) bool {
		v := q[k]
		return len(v) > 0 && (v[0] == "true" || v[0] == "1")
	}
	r := attachRequest{stdin: flag("input"), stdout: flag("output"), stderr: flag("error"), tty: flag("tty")}
	if r.tty {
		// A terminal has one output.
		r.stderr = false
	}
	if !r.stdin && !r.stdout && !r.stderr {
		return r, errors.New("at least one of input, output and error (stdin, stdout, stderr) must be true")
	}
	return r, nil
}

// serveAttach serves /attach/NS/POD/CONTAINER: the session connects to
// the run of a container made with stdin, and ends with its process,
// saying how it ended, or when the client goes.
func (a *Agent) serveAttach(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	req, err := parseAttachRequest(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	wk := a.servedWorker(w, ns, name)
	if wk == nil {
		return
	}
	pod := wk.pod()
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			c = &pod.Spec.Containers[i]
		}
	}
	switch {
	case c == nil:
		http.Error(w, fmt.Sprintf("container %q is not in pod %s/%s", container, ns, name), http.StatusNotFound)
		return
	case !c.Stdin:
		http.Error(w, fmt.Sprintf("container %q of pod %s/%s was not made with stdin: true; bex-node attaches only to such containers (set stdin, and stdinOnce for a one-off command)", container, ns, name), http.StatusBadRequest)
		return
	case req.tty != c.TTY:
		http.Error(w, fmt.Sprintf("the attach asks tty=%t but container %q of pod %s/%s has tty: %t; ask as it has", req.tty, container, ns, name, c.TTY), http.StatusBadRequest)
		return
	}
	point := wk.attachPoint()
	if point == nil {
		http.Error(w, fmt.Sprintf("container %q of pod %s/%s is not running", container, ns, name), http.StatusBadRequest)
		return
	}
	if err := point.claim(); err != nil {
		http.Error(w, fmt.Sprintf("container %q of pod %s/%s: %v", container, ns, name, err), http.StatusConflict)
		return
	}
	defer point.release()
	if _, err := httpstream.Handshake(r, w, attachProtocols()); err != nil {
		return // Handshake answered
	}
	streams := make(chan httpstream.Stream, 5)
	replies := make(chan (<-chan struct{}), 5)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, replySent <-chan struct{}) error {
		select {
		case streams <- s:
			replies <- replySent
			return nil
		default:
			return errors.New("too many streams")
		}
	})
	if conn == nil {
		return // UpgradeResponse answered
	}
	defer conn.Close()
	conn.SetIdleTimeout(idleTimeout)
	s, err := acceptStreams(conn, req, streams, replies)
	if err != nil {
		if s.errorStream != nil {
			writeStatus(s.errorStream, errorStatus(err.Error()))
		}
		a.opts.Log.Info("Refusing an attach", "pod", ns+"/"+name, "reason", err.Error())
		return
	}
	a.attachSession(conn, point, s)
}

// sessionStreams are a session's streams; nil those not asked for.
type sessionStreams struct {
	errorStream, stdin, stdout, stderr, resize httpstream.Stream
}

// acceptStreams takes the streams the client opens, those req says and
// no others, each once, within streamsTimeout, and waits until the
// replies to them are sent (data before a reply breaks the protocol).
func acceptStreams(conn httpstream.Connection, req attachRequest, streams <-chan httpstream.Stream, replies <-chan (<-chan struct{})) (sessionStreams, error) {
	var s sessionStreams
	want := 1 // error
	for _, b := range []bool{req.stdin, req.stdout, req.stderr, req.tty} {
		if b {
			want++
		}
	}
	timeout := time.NewTimer(streamsTimeout)
	defer timeout.Stop()
	var sent []<-chan struct{}
	for got := 0; got < want; got++ {
		select {
		case st := <-streams:
			sent = append(sent, <-replies)
			var slot *httpstream.Stream
			switch typ := st.Headers().Get(corev1.StreamType); {
			case typ == corev1.StreamTypeError:
				slot = &s.errorStream
			case typ == corev1.StreamTypeStdin && req.stdin:
				slot = &s.stdin
			case typ == corev1.StreamTypeStdout && req.stdout:
				slot = &s.stdout
			case typ == corev1.StreamTypeStderr && req.stderr:
				slot = &s.stderr
			case typ == corev1.StreamTypeResize && req.tty:
				slot = &s.resize
			default:
				st.Reset()
				return s, fmt.Errorf("unexpected stream of type %q", typ)
			}
			if *slot != nil {
				st.Reset()
				return s, fmt.Errorf("a second stream of type %q", st.Headers().Get(corev1.StreamType))
			}
			*slot = st
		case <-timeout.C:
			return s, fmt.Errorf("the client opened %d of its %d streams in %s", got, want, streamsTimeout)
		case <-conn.CloseChan():
			return s, errors.New("the client went away")
		}
	}
	if s.errorStream == nil {
		return s, errors.New("no error stream")
	}
	for _, ch := range sent {
		select {
		case <-ch:
		case <-timeout.C:
			return s, errors.New("the streams' replies were not sent")
		}
	}
	return s, nil
}

// attachSession runs a session until the process ends (then it says how
// on the error stream) or the client goes.
func (a *Agent) attachSession(conn httpstream.Connection, point *attachPoint, s sessionStreams) {
	if s.resize != nil {
		// The process of a held terminal starts on the client's size:
		// its first comes at once.
		sized := make(chan struct{})
		go func() {
			var once sync.Once
			defer once.Do(func() { close(sized) })
			r := bufio.NewReaderSize(s.resize, maxResizeMessage)
			for {
				sz, err := readSize(r)
				if err != nil {
					s.resize.Reset()
					return
				}
				if sz != nil {
					point.resize(*sz)
					once.Do(func() { close(sized) })
				}
			}
		}()
		t := time.NewTimer(firstSizeWait)
		select {
		case <-sized:
		case <-t.C:
		case <-conn.CloseChan():
			t.Stop()
			return
		}
		t.Stop()
	}
	// A stream not asked for is a nil Stream, and so a nil io.Writer.
	point.begin(s.stdout, s.stderr)

	select {
	case <-point.started:
	case <-point.ended:
	case <-conn.CloseChan():
		return
	}
	if s.stdin != nil {
		go func() {
			_, _ = io.Copy(writerFunc(point.write), s.stdin)
			if point.once {
				point.closeStdin()
			}
		}()
	}
	select {
	case <-point.ended:
		// What the process wrote is out: the streams end after it.
		status := metav1.Status{Status: metav1.StatusSuccess}
		if point.exit != 0 {
			status = exitStatus(point.exit)
		}
		writeStatus(s.errorStream, status)
		for _, st := range []httpstream.Stream{s.stdout, s.stderr, s.errorStream} {
			if st != nil {
				st.Close()
			}
		}
	case <-conn.CloseChan():
	}
}

// readSize reads one terminal size from the resize stream: nil for one
// that sizes nothing; an error ends the stream (a message past
// maxResizeMessage among them).
func readSize(r *bufio.Reader) (*sandbox.TerminalSize, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	var sz struct{ Width, Height uint16 }
	if err := json.Unmarshal(line, &sz); err != nil {
		return nil, fmt.Errorf("reading a terminal size: %w", err)
	}
	if sz.Width == 0 || sz.Height == 0 {
		return nil, nil
	}
	return &sandbox.TerminalSize{Cols: sz.Width, Rows: sz.Height}, nil
}

// exitStatus is the status of a process that exited with code, as
// remotecommand v4 reads it.
func exitStatus(code int32) metav1.Status {
	code = min(max(code, 0), 255)
	return metav1.Status{
		Status:  metav1.StatusFailure,
		Reason:  remotecommand.NonZeroExitCodeReason,
		Message: fmt.Sprintf("command terminated with non-zero exit code: %d", code),
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
			{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(int(code))},
		}},
	}
}

func errorStatus(msg string) metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Message: msg}
}

func writeStatus(w io.Writer, st metav1.Status) {
	b, _ := json.Marshal(st)
	_, _ = w.Write(b)
}
