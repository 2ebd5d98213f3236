package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"bex.co/bex/internal/sandbox"
)

// workspace is one build's directories and output.
type workspace struct {
	root string // the build's own directory, removed afterwards
	app  string // the checkout, which becomes /app
	// tree is the checkout opened as an os.Root, set once it is checked
	// out: what the builder reads or writes of it goes through tree.
	tree    *os.Root
	home    string // $HOME of build commands
	tmp     string // $TMPDIR of build commands
	cache   string // the tenant's caches
	tenant  string
	appName string // the app's name
	// stepApp is the checkout as the steps see it: app, or the agent's.
	stepApp string
	// sandbox, when set, runs the steps in containers of the tenant.
	sandbox  *sandbox.Manager
	sbPATH   string
	sbLimits sandbox.Limits
	// bkLimits puts the limits of sbLimits on Dockerfile builds too,
	// through a cgroup of the build's (Options.BuildKitLimits).
	bkLimits bool
	// cacheGiven says the tenant's caches were given to the container's
	// user in this build: only its containers write there afterwards.
	cacheGiven bool
	out        io.Writer
	commit     string
	timeout    time.Duration
	// keychain resolves the registries' credentials.
	keychain authn.Keychain
	// disks, when set, bounds root and cache: diskErr reads them.
	disks *disks
	// remote, when set, starts the agent that runs the steps
	// (Options.Remote); agent is the one started, until the tree came
	// back. treeLimit bounds the tree it sends back.
	remote    RemoteFunc
	agent     RemoteAgent
	treeLimit int64
}

// step is one build command, or a Go function run in its place.
type step struct {
	title string
	argv  []string
	// display is how the command is named in errors; default argv joined.
	display string
	// env is added to the clean environment.
	env []string
	// fn runs instead of argv when set.
	fn func(w *workspace) error
	// hint explains a failure whose output matches; it may return "".
	hint func(tail string) string
	// onHost runs the step on the builder's host even with a sandbox: a
	// platform tool (buildctl), not tenant code.
	onHost bool
}

// tailLines is how many lines of a failed command's output its error keeps.
const tailLines = 20

// CommandError is the error of a build command that failed.
type CommandError struct {
	// Command is the command as the log shows it.
	Command string
	// Tail is the end of its output.
	Tail string
	// Hint says what probably went wrong, when the builder recognised it.
	Hint string
	Err  error
}

func (e *CommandError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s failed: %v", e.Command, e.Err)
	if e.Hint != "" {
		fmt.Fprintf(&b, "\n%s", e.Hint)
	}
	if e.Tail != "" {
		fmt.Fprintf(&b, "\nlast lines of its output:\n%s", e.Tail)
	}
	return b.String()
}

func (e *CommandError) Unwrap() error { return e.Err }

// passEnv are the variables of the builder's own environment that reach
// build commands: proxies, certificates, and package-index settings an
// operator configures for the whole builder.
var passEnv = []string{
	"GOPROXY", "GONOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GOINSECURE", "GOTOOLCHAIN",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "PYENV_ROOT", "PYENV_VERSION", "LANG",
}

// passEnvPrefixes pass whole families: npm and pip configuration.
var passEnvPrefixes = []string{"NPM_CONFIG_", "npm_config_", "PIP_"}

// env is the clean environment of build commands.
func (w *workspace) env(extra []string) []string {
	return w.envAt(w.home, w.tmp, w.cache, extra)
}

// envAt is the clean environment of build commands that see the build's
// HOME, TMPDIR and the caches at home, tmp and cache.
func (w *workspace) envAt(home, tmp, cache string, extra []string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"CI=true",
		"SOURCE_VERSION=" + w.commit,
		"GOCACHE=" + filepath.Join(cache, "go-build"),
		"GOPATH=" + filepath.Join(cache, "gopath"),
		"GOMODCACHE=" + filepath.Join(cache, "gopath", "pkg", "mod"),
		"GOFLAGS=-mod=mod",
		"npm_config_cache=" + filepath.Join(cache, "npm"),
		"npm_config_update_notifier=false",
		"npm_config_fund=false",
		"npm_config_audit=false",
		"PIP_CACHE_DIR=" + filepath.Join(cache, "pip"),
		"PIP_DISABLE_PIP_VERSION_CHECK=1",
		"PIP_NO_INPUT=1",
	}
	if os.Getenv("LANG") == "" {
		env = append(env, "LANG=C.UTF-8")
	}
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range os.Environ() {
		for _, p := range passEnvPrefixes {
			if strings.HasPrefix(kv, p) && !strings.HasPrefix(kv, "npm_config_cache=") && !strings.HasPrefix(kv, "PIP_CACHE_DIR=") {
				env = append(env, kv)
			}
		}
	}
	// Later entries win in os/exec; the step's own come last.
	return append(env, extra...)
}

func (s step) String() string {
	if s.display != "" {
		return s.display
	}
	return strings.Join(s.argv, " ")
}

// runStep runs s in the app directory, streaming its output.
func (w *workspace) runStep(ctx context.Context, s step) error {
	if s.fn != nil {
		// The builder's own steps work on the tree the agent's left.
		if err := w.treeBack(ctx); err != nil {
			return err
		}
		if err := s.fn(w); err != nil {
			return fmt.Errorf("%s: %w", strings.ToLower(s.title[:1])+s.title[1:], err)
		}
		return nil
	}
	return w.run(ctx, w.app, s)
}

// run runs s.argv in dir with the clean environment, its stdout and stderr
// merged and streamed to the log as they come: in a container of the tenant
// when the builder has a sandbox (unless s runs on the host), else in a
// process group of its own. Everything it started is killed when it ends
// or ctx does.
func (w *workspace) run(ctx context.Context, dir string, s step) error {
	remote := w.remote != nil && !s.onHost
	if !strings.Contains(s.argv[0], "/") && !remote {
		if _, err := exec.LookPath(s.argv[0]); err != nil {
			return &CommandError{Command: s.String(), Err: fmt.Errorf("%s is not installed on the builder", s.argv[0])}
		}
	}
	tail := &tailBuffer{max: tailLines}
	sink := &syncWriter{w: io.MultiWriter(w.out, tail)}
	var err error
	switch {
	case remote:
		err = w.runRemote(ctx, s, sink)
	case w.sandbox != nil && !s.onHost:
		err = w.runSandboxed(ctx, dir, s, sink)
	default:
		err = w.runOnHost(ctx, dir, s, sink)
	}
	if lw, ok := w.out.(interface{ Flush() }); ok {
		lw.Flush()
	}
	if err == nil {
		return nil
	}
	ce := &CommandError{Command: s.String(), Tail: tail.String(), Err: err}
	if s.hint != nil {
		ce.Hint = s.hint(ce.Tail)
	}
	return ce
}

// runOnHost runs s as a process of the builder's user, in its own process
// group, which is killed whole when ctx ends.
func (w *workspace) runOnHost(ctx context.Context, dir string, s step, out io.Writer) error {
	cmd := exec.CommandContext(ctx, s.argv[0], s.argv[1:]...)
	cmd.Dir = dir
	cmd.Env = w.env(s.env)
	cmd.Stdin = nil
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The negative pid names the process group: the shell and
		// everything it started.
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	// A background child that keeps the output pipe open must not hold
	// the build past its end.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	// Kill whatever the command left running in its group, even on success.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return err
}

// runSandboxed runs s in a container of the tenant that sees the build's
// work directory and the tenant's caches, both given to the container's
// user first, and is removed with everything it started when s ends or
// ctx does.
func (w *workspace) runSandboxed(ctx context.Context, dir string, s step, out io.Writer) error {
	// The work directory again before each step: the builder writes there
	// between steps (the checkout, rewritten scripts).
	dirs := []string{w.root}
	if !w.cacheGiven {
		dirs = append(dirs, w.cache)
	}
	for _, d := range dirs {
		if err := w.sandbox.ChownTree(w.tenant, d); err != nil {
			return fmt.Errorf("preparing the build's sandbox: %w", err)
		}
	}
	w.cacheGiven = true
	c, err := w.sandbox.Create(sandbox.Spec{
		Tenant: w.tenant, Hostname: "build", Args: s.argv, Env: w.containerEnv(w.env(s.env), s), WorkDir: dir,
		Binds:  []sandbox.Bind{{Path: w.root}, {Path: w.cache}},
		Limits: w.sbLimits,
	})
	if err != nil {
		return fmt.Errorf("creating the build's sandbox: %w", err)
	}
	defer c.Destroy()
	cmd, err := c.Command()
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = c.Signal(syscall.SIGKILL)
		case <-done:
		}
	}()
	err = cmd.Wait()
	if err != nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil && c.OOMKilled() {
		return fmt.Errorf("killed for going past the build's memory limit (%d MiB)", c.MemoryLimit()>>20)
	}
	return err
}

// containerEnv is env, each name once, with the PATH of the toolchains as
// a container sees them (SandboxPATH) unless s sets its own.
func (w *workspace) containerEnv(env []string, s step) []string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	m["PATH"] = w.sbPATH
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			m["PATH"] = v
		}
	}
	list := make([]string, 0, len(m))
	for k, v := range m {
		list = append(list, k+"="+v)
	}
	return list
}

// syncWriter serialises writes from the stdout and stderr copiers.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// tailBuffer keeps the last max lines written to it.
type tailBuffer struct {
	max     int
	lines   []string
	partial []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			t.partial = append(t.partial, p...)
			if len(t.partial) > 4096 {
				t.partial = t.partial[len(t.partial)-4096:]
			}
			break
		}
		t.partial = append(t.partial, p[:i]...)
		if p[i] == '\n' || len(t.partial) > 0 {
			t.push(string(t.partial))
		}
		t.partial = t.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (t *tailBuffer) push(line string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

func (t *tailBuffer) String() string {
	lines := t.lines
	if len(t.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(t.partial))
	}
	return strings.Join(lines, "\n")
}

// lineWriter passes whole lines to w, one Write per line, so that a reader
// of the log (the git receiver, which prefixes "remote: ") never sees half a
// line. A carriage return ends a line too; overlong lines are split.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	cr  bool // the last byte seen was a "\r"
}

const maxLine = 16 << 10

func newLineWriter(w io.Writer) *lineWriter { return &lineWriter{w: w} }

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			l.buf = append(l.buf, p...)
			l.cr = false
			for len(l.buf) >= maxLine {
				l.emit(l.buf[:maxLine])
				l.buf = append(l.buf[:0], l.buf[maxLine:]...)
			}
			break
		}
		l.buf = append(l.buf, p[:i]...)
		// "\r\n" and progress bars' bare "\r" end one line each.
		if !(i == 0 && p[0] == '\n' && l.cr && len(l.buf) == 0) {
			l.emit(l.buf)
		}
		l.cr = p[i] == '\r'
		l.buf = l.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineWriter) emit(line []byte) {
	b := make([]byte, 0, len(line)+1)
	b = append(append(b, line...), '\n')
	_, _ = l.w.Write(b)
}

// Flush writes a pending partial line.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = l.buf[:0]
	}
}
