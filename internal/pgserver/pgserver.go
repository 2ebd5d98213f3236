package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/secretfile"
)

const (
	// superuser is the role initdb creates and URL connects as.
	superuser = "postgres"
	// startTimeout bounds the wait for a new server when ctx has no deadline.
	startTimeout = time.Minute
	// stopTimeout bounds a fast shutdown before the server is killed.
	stopTimeout = 30 * time.Second
	// bindAttempts is how often Start picks another free port when the one it
	// picked was taken in the meantime.
	bindAttempts = 3
)

// Options says where and how to run the server.
type Options struct {
	// DataDir is the cluster's data directory. It is created (mode 0700)
	// when missing and initialised only when empty; a directory that holds a
	// cluster is started as it is. Required.
	DataDir string
	// Port is the TCP port on 127.0.0.1. Zero picks a free one each Start.
	Port int
	// SocketDir, when set, is a directory where the server also listens on a
	// Unix socket. Empty means TCP only.
	SocketDir string
	// Log receives the output of initdb and of the server. Nil discards it;
	// the last lines are quoted in errors either way.
	Log io.Writer
	// BinDir holds initdb and postgres. Empty means the highest version under
	// /usr/lib/postgresql/*/bin (the cluster's own version when DataDir
	// holds one), then $PATH.
	BinDir string
	// Ephemeral turns durability off (fsync, synchronous_commit,
	// full_page_writes) for speed: only for data that may be lost, as in
	// tests.
	Ephemeral bool
	// PasswordFile keeps the password of the superuser role, which every
	// connection presents (SCRAM-SHA-256). It is created with a random
	// password (mode 0600, owned by the caller) when missing. Empty means
	// DataDir + ".password", beside the data directory.
	PasswordFile string
	// Settings are server parameters given on the command line (-c
	// name=value), such as max_connections for a test that must run out of
	// them. They come after the ones Start sets, and win over them.
	Settings map[string]string
}

// Server is a running postgres process. Its methods are safe for concurrent
// use.
type Server struct {
	port     int
	password string
	dataDir  string
	cmd      *exec.Cmd
	out      *tail
	done     chan struct{} // closed once the process has exited
	waitErr  error         // valid once done is closed

	stopOnce sync.Once
	stopErr  error
}

// Start initialises opts.DataDir when it is empty, starts postgres on it and
// returns once the server accepts connections, or when ctx ends (within a
// minute when ctx has no deadline). When the caller is root, initdb and the
// server run as the "postgres" system user and the directories Start creates
// are given to that user. The error names the package to install when no
// server binaries are found.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, errors.New("pgserver: data directory is not set")
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolving data directory: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}

	clusterVersion, err := prepareDataDir(dataDir, cred)
	if err != nil {
		return nil, err
	}
	if err := WaitStopped(ctx, dataDir); err != nil {
		return nil, err
	}
	socketDir := ""
	if opts.SocketDir != "" {
		if socketDir, err = filepath.Abs(opts.SocketDir); err != nil {
			return nil, fmt.Errorf("resolving socket directory: %w", err)
		}
		if err := prepareDir(socketDir, cred); err != nil {
			return nil, err
		}
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = findBinDir(ctx, debianRoot, clusterVersion); err != nil {
			return nil, err
		}
	} else if !hasServerBinaries(binDir) {
		return nil, fmt.Errorf("no initdb and postgres in %s: %s", binDir, installHint)
	}

	passwordFile := opts.PasswordFile
	if passwordFile == "" {
		passwordFile = dataDir + ".password"
	}
	password, created, err := secretfile.LoadOrCreate(passwordFile)
	if err != nil {
		return nil, fmt.Errorf("the superuser's password: %w", err)
	}

	out := &tail{w: opts.Log}
	if clusterVersion == "" {
		// No connection is accepted until secure has set the password.
		if err := initdb(ctx, binDir, dataDir, "reject", opts.Ephemeral, cred, out); err != nil {
			return nil, err
		}
	}
	if err := secure(ctx, binDir, dataDir, password, created, cred, out); err != nil {
		return nil, err
	}

	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = childproc.FreePort("127.0.0.1"); err != nil {
				return nil, err
			}
		}
		s, err := start(ctx, binDir, dataDir, socketDir, port, password, opts.Ephemeral, opts.Settings, cred, out)
		if err == nil {
			return s, nil
		}
		if opts.Port != 0 || attempt == bindAttempts || !strings.Contains(out.String(), "could not bind") {
			return nil, err
		}
	}
}

// URL returns the URL of database db on the server, as the superuser
// "postgres" over TCP, with its password.
func (s *Server) URL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, s.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port returns the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// DataDir returns the absolute path of the server's data directory.
func (s *Server) DataDir() string { return s.dataDir }

// Done is closed when the server process has exited, whether by Stop or not.
func (s *Server) Done() <-chan struct{} { return s.done }

// Stop shuts the server down (a fast shutdown: sessions are ended, data is
// kept) and waits for it to exit, killing it after 30 seconds. Calling Stop
// again returns the first result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.done:
			if s.waitErr != nil {
				s.stopErr = fmt.Errorf("postgres had already exited: %w%s", s.waitErr, s.out.quote())
			}
			return
		default:
		}
		if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.stopErr = fmt.Errorf("signalling postgres: %w", err)
		}
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-s.done:
			if s.waitErr != nil && s.stopErr == nil {
				s.stopErr = fmt.Errorf("stopping postgres: %w%s", s.waitErr, s.out.quote())
			}
		case <-timer.C:
			_ = s.cmd.Process.Kill()
			<-s.done
			s.stopErr = fmt.Errorf("postgres did not stop within %s and was killed%s", stopTimeout, s.out.quote())
		}
	})
	return s.stopErr
}

// start runs postgres and waits until it accepts connections.
func start(ctx context.Context, binDir, dataDir, socketDir string, port int, password string, ephemeral bool, settings map[string]string,
	cred *syscall.Credential, out *tail) (*Server, error) {
	args := []string{
		"-D", dataDir,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + socketDir,
	}
	if ephemeral {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		args = append(args, "-c", name+"="+settings[name])
	}
	// Not CommandContext: the server outlives ctx, which only bounds Start.
	cmd := exec.Command(filepath.Join(binDir, "postgres"), args...)
	cmd.Dir = dataDir
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = out, out
	// SIGINT is a fast shutdown: the server stops when bex dies.
	cmd.SysProcAttr = sysProcAttr(cred, syscall.SIGINT)
	cmd.WaitDelay = 5 * time.Second

	s := &Server{port: port, password: password, dataDir: dataDir, cmd: cmd, out: out, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal follows the thread that started the
		// child, so that thread stays with the child for its whole life.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}

	if err := s.waitReady(ctx); err != nil {
		_ = s.cmd.Process.Kill()
		<-s.done
		return nil, err
	}
	return s, nil
}

// waitReady polls the server until it accepts a connection, it exits, or ctx
// ends.
func (s *Server) waitReady(ctx context.Context) error {
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	var lastErr error
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgconn.Connect(attemptCtx, s.URL("postgres")+"&connect_timeout=2")
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited while starting: %v%s", s.waitErr, s.out.quote())
		case <-ctx.Done():
			return fmt.Errorf("waiting for postgres on port %d: %w (last attempt: %v)%s", s.port, ctx.Err(), lastErr, s.out.quote())
		case <-ticker.C:
		}
	}
}

// initdb creates a cluster in the empty directory dataDir, with auth as the
// method of every line of its pg_hba.conf.
func initdb(ctx context.Context, binDir, dataDir, auth string, ephemeral bool, cred *syscall.Credential, out *tail) error {
	args := []string{
		"-D", dataDir,
		"--username=" + superuser,
		"--auth=" + auth,
		"--encoding=UTF8",
		"--locale=C",
	}
	if ephemeral {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), args...)
	cmd.Dir = dataDir
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr(cred, 0)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("initialising %s with initdb: %w%s", dataDir, err, out.quote())
	}
	return nil
}

// credential returns whom to run the server as: nil for the caller, the
// "postgres" system user when the caller is root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(superuser)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no %q system user to run it as (%w): %s, or run as another user",
			superuser, err, installHint)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing uid of user %s: %w", superuser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing gid of user %s: %w", superuser, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// prepareDataDir makes sure dir exists and can hold a cluster, and returns
// the major version of the cluster it already holds ("" when it is empty).
func prepareDataDir(dir string, cred *syscall.Credential) (string, error) {
	if err := prepareDir(dir, cred); err != nil {
		return "", err
	}
	version, err := os.ReadFile(filepath.Join(dir, "PG_VERSION"))
	if err == nil {
		return strings.TrimSpace(string(version)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading cluster version: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("reading data directory: %w", err)
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("data directory %s is not empty and holds no PostgreSQL cluster (no PG_VERSION): empty it or choose another", dir)
	}
	return "", nil
}

// WaitStopped waits for a server that still runs on dataDir to exit, as
// the one of a process that was killed does once it notices (on Linux it
// gets a fast shutdown then): starting beside it would fail on its lock
// file, and removing dataDir would race with its last writes.
func WaitStopped(ctx context.Context, dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return nil
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return nil
	}
	alive := func() bool {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return err == nil && strings.Contains(string(cmdline), "postgres")
	}
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for alive() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres (pid %d) still runs on %s: stop it first: %w", pid, dataDir, ctx.Err())
		case <-ticker.C:
		}
	}
	return nil
}

// prepareDir creates dir (mode 0700) when missing. When cred is set it gives
// an empty dir to that user and checks that the user can reach it.
func prepareDir(dir string, cred *syscall.Credential) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if cred == nil {
		return nil
	}
	if err := checkReachable(dir, cred); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	if len(entries) == 0 {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("giving %s to user %s: %w", dir, superuser, err)
		}
	}
	return nil
}

// checkReachable returns an error naming the first directory above dir that
// cred's user may not enter. It reads mode bits only (no ACLs), with the
// primary group only, as the child runs without supplementary groups.
func checkReachable(dir string, cred *syscall.Credential) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("checking %s: %w", d, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		perm := fi.Mode().Perm()
		var search bool
		switch {
		case st.Uid == cred.Uid:
			search = perm&0o100 != 0
		case st.Gid == cred.Gid:
			search = perm&0o010 != 0
		default:
			search = perm&0o001 != 0
		}
		if !search {
			return fmt.Errorf("the %s user, which runs the server because the caller is root, cannot enter %s (mode %v, owner uid %d): make it searchable (chmod o+x) or choose a data directory elsewhere",
				superuser, d, perm, st.Uid)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// childEnv is the caller's environment without libpq variables (PGPORT,
// PGDATA, ...), which would override what Start chose.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// tailSize is how much recent output tail keeps for error messages.
const tailSize = 4 << 10

// tail forwards output to w (when set) and keeps its last tailSize bytes.
type tail struct {
	w io.Writer

	mu        sync.Mutex
	buf       []byte
	truncated bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.truncated = true
	}
	if t.w != nil {
		// A failing log must not stall the server on a full pipe.
		_, _ = t.w.Write(p)
	}
	return len(p), nil
}

// String returns the kept output, without a first line cut in half.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	if i := strings.IndexByte(s, '\n'); t.truncated && i >= 0 {
		s = s[i+1:]
	}
	return s
}

// quote returns the kept output as a suffix for an error message.
func (t *tail) quote() string {
	s := strings.TrimSpace(t.String())
	if s == "" {
		return ""
	}
	return "\noutput:\n" + s
}
