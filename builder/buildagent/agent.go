package buildagent

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"bex.co/bex/internal/treetar"
)

// ExitTrailer is the trailer of a /run answer that carries the command's
// exit status: "0", or what ended it ("exit status 2", "signal: killed",
// "start: …").
const ExitTrailer = "Bex-Exit"

// Paths are the directories of a build as its steps see them.
type Paths struct {
	// App is the checkout, the steps' working directory.
	App string
	// Home and Tmp are the steps' $HOME and $TMPDIR.
	Home, Tmp string
	// Cache holds the caches of the stacks' tools (Go's build cache, npm's,
	// pip's); in a Pod it starts empty.
	Cache string
}

// PathsOf are the directories under an agent's work directory dir.
func PathsOf(dir string) Paths {
	return Paths{
		App:   filepath.Join(dir, "app"),
		Home:  filepath.Join(dir, "home"),
		Tmp:   filepath.Join(dir, "tmp"),
		Cache: filepath.Join(dir, "cache"),
	}
}

// Command is one step to run.
type Command struct {
	Argv []string `json:"argv"`
	// Env is the whole environment of the command.
	Env []string `json:"env"`
}

// Options configure the agent's Handler.
type Options struct {
	// Dir is the build's work directory: PathsOf(Dir) are made under it.
	Dir string
	// Token is the bearer token every call but /healthz presents.
	Token string
	// MaxTree bounds the tree PUT /tree takes.
	MaxTree treetar.Limits
	Log     logr.Logger
}

// ErrBuilderGone is what WaitIdle returns: no call came from the builder
// for the idle limit.
var ErrBuilderGone = errors.New("the builder is gone")

// Agent serves one build's calls.
type Agent struct {
	opts  Options
	paths Paths
	// mu lets one call at a time change or read the tree.
	mu sync.Mutex

	// calls guards inFlight, the builder's calls being served, and
	// lastCall, when the last one ended (or the agent started).
	calls    sync.Mutex
	inFlight int
	lastCall time.Time
}

// New makes the build's directories and returns the agent.
func New(opts Options) (*Agent, error) {
	if opts.Dir == "" {
		return nil, errors.New("buildagent: Dir is empty")
	}
	if opts.Token == "" {
		return nil, errors.New("buildagent: Token is empty")
	}
	p := PathsOf(opts.Dir)
	for _, d := range []string{p.App, p.Home, p.Tmp, p.Cache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("making the build's directories: %w", err)
		}
	}
	return &Agent{opts: opts, paths: p, lastCall: time.Now()}, nil
}

// Handler serves the agent's calls.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.Handle("PUT /tree", a.auth(http.HandlerFunc(a.putTree)))
	mux.Handle("GET /tree", a.auth(http.HandlerFunc(a.getTree)))
	mux.Handle("POST /run", a.auth(http.HandlerFunc(a.run)))
	return mux
}

func (a *Agent) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(a.opts.Token)) != 1 {
			http.Error(w, "this build's token is required", http.StatusUnauthorized)
			return
		}
		a.callBegins()
		defer a.callEnds()
		next.ServeHTTP(w, r)
	})
}

func (a *Agent) callBegins() {
	a.calls.Lock()
	a.inFlight++
	a.calls.Unlock()
}

func (a *Agent) callEnds() {
	a.calls.Lock()
	a.inFlight--
	a.lastCall = time.Now()
	a.calls.Unlock()
}

// idleFor returns how long no call of the builder's has been in flight:
// zero while one is.
func (a *Agent) idleFor() time.Duration {
	a.calls.Lock()
	defer a.calls.Unlock()
	if a.inFlight > 0 {
		return 0
	}
	return time.Since(a.lastCall)
}

// WaitIdle returns an error wrapping ErrBuilderGone once no call with the
// build's token has been in flight for limit (counted from the agent's
// start before the first), or ctx's error when ctx ends first. /healthz
// does not count: the kubelet's probe says nothing of the builder. A step
// in flight counts however long it runs; its call ends, and its process
// with it, when the builder's connection does.
func (a *Agent) WaitIdle(ctx context.Context, limit time.Duration) error {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		idle := a.idleFor()
		if idle >= limit {
			return fmt.Errorf("no call from the builder for %s: %w", limit, ErrBuilderGone)
		}
		t.Reset(limit - idle)
	}
}

func (a *Agent) putTree(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	root, ok := a.openApp(w)
	if !ok {
		return
	}
	defer root.Close()
	if err := treetar.Extract(r.Body, root, a.opts.MaxTree); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *Agent) getTree(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	root, ok := a.openApp(w)
	if !ok {
		return
	}
	defer root.Close()
	w.Header().Set("Content-Type", "application/x-tar")
	if err := treetar.Write(w, root); err != nil {
		// The answer has begun: a cut stream is all the client sees.
		a.opts.Log.Error(err, "Sending the tree")
		panic(http.ErrAbortHandler)
	}
}

// openApp opens the checkout as a root; it answers 500 when it cannot.
func (a *Agent) openApp(w http.ResponseWriter) (*os.Root, bool) {
	root, err := os.OpenRoot(a.paths.App)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return nil, false
	}
	return root, true
}

// run runs the command in the checkout, in a process group of its own,
// killed whole when the call ends (the builder went, or the build's time
// ran out).
func (a *Agent) run(w http.ResponseWriter, r *http.Request) {
	var c Command
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&c); err != nil || len(c.Argv) == 0 {
		http.Error(w, fmt.Sprintf("the command is not a JSON {argv, env}: %v", err), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Trailer", ExitTrailer)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	out := &flushWriter{w: w, rc: http.NewResponseController(w)}
	cmd := exec.CommandContext(r.Context(), c.Argv[0], c.Argv[1:]...)
	cmd.Dir = a.paths.App
	cmd.Env = c.Env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	status := "0"
	if err := cmd.Start(); err != nil {
		status = "start: " + err.Error()
	} else {
		err := cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if err != nil {
			status = err.Error()
		}
	}
	w.Header().Set(ExitTrailer, status)
}

// flushWriter sends each write at once: the builder streams the output to
// the pusher line by line.
type flushWriter struct {
	mu sync.Mutex
	w  io.Writer
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}
