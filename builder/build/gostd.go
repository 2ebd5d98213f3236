package build

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The Go stack's first build of a tenant used to compile the standard
// library into the tenant's empty cache: most of a minute on two cores for
// a hello-world app. The builder compiles it once per toolchain instead,
// in the background when the platform starts (WarmGo), into
// Options.GoStdCacheDir, and copies it into a tenant's Go build cache
// before the tenant's first Go build (seedGoCache).
//
// Copied, not shared: each tenant's build containers write their own
// cache (the go command updates and trims entries in place), and a cache
// two tenants could write is a way for one to plant compiled code in the
// other's builds. A copy costs the tenant's cache disk the standard
// library's outputs once (about 170 MiB for Go 1.26 on amd64); the go
// command's own trimming removes what the tenant's builds do not use
// within five days.

// goStdSeedPrefix names the file a seeded tenant cache keeps, with the
// toolchain key after it, so that a new toolchain seeds again.
const goStdSeedPrefix = ".bex-std-"

// goStdProgressEvery is how often the warm-up reports its progress.
const goStdProgressEvery = 5 * time.Second

// goStd is the warmed standard library cache of one toolchain.
type goStd struct {
	root string // Options.GoStdCacheDir
	path string // the sandbox's PATH, where the go command is found

	mu      sync.Mutex
	started bool
	done    chan struct{}
	dir     string // the warmed cache, once done without error
	err     error
	// compiled and total are the warm-up's progress, in packages.
	compiled, total int
	began           time.Time
}

func newGoStd(root, path string) *goStd {
	return &goStd{root: root, path: path, done: make(chan struct{})}
}

// WarmGo compiles the Go standard library as the Go stack's builds
// compile it (CGO_ENABLED=0, the go command on SandboxPATH) into
// Options.GoStdCacheDir, unless it is there already for this toolchain,
// writing its progress to progress. It returns once the cache is ready or
// the warm-up failed; a second call waits for the first. Go builds that
// start meanwhile wait for it rather than compile the same packages; a
// failed warm-up leaves them compiling on their own, as without it.
func (b *Builder) WarmGo(ctx context.Context, progress io.Writer) error {
	g := b.gostd
	g.mu.Lock()
	if g.started {
		g.mu.Unlock()
		select {
		case <-g.done:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return g.err
	}
	g.started, g.began = true, time.Now()
	g.mu.Unlock()
	dir, err := g.warm(ctx, progress)
	g.mu.Lock()
	g.dir, g.err = dir, err
	g.mu.Unlock()
	close(g.done)
	return err
}

// goCommand finds the go command the sandboxed steps run.
func (g *goStd) goCommand() (string, error) {
	for _, d := range filepath.SplitList(g.path) {
		p := filepath.Join(d, "go")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("no go command on the builds' PATH %s", g.path)
}

// goStdEnv is the environment of the warm-up's go commands: what decides
// the standard library's compiled outputs is as in the Go stack's steps
// (workspace.env and goPlan); the rest is the warm-up's own.
func goStdEnv(path, home, cache string) []string {
	return []string{
		"PATH=" + path, "HOME=" + home, "GOCACHE=" + cache,
		"CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "LANG=C.UTF-8",
	}
}

func (g *goStd) warm(ctx context.Context, progress io.Writer) (string, error) {
	goBin, err := g.goCommand()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(g.root, 0o755); err != nil {
		return "", fmt.Errorf("creating the Go standard library cache: %w", err)
	}
	// Platforms of one machine may share the directory (make run's is in
	// the user's cache directory): one compiles, the others wait for it
	// and find it ready.
	unlock, err := lockDir(ctx, filepath.Join(g.root, ".lock"))
	if err != nil {
		return "", fmt.Errorf("locking the Go standard library cache: %w", err)
	}
	defer unlock()
	tmp, err := os.MkdirTemp(g.root, ".warm-")
	if err != nil {
		return "", fmt.Errorf("creating the Go standard library cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	home := filepath.Join(tmp, "home")
	cache := filepath.Join(tmp, "go-build")
	if err := os.Mkdir(home, 0o700); err != nil {
		return "", err
	}
	env := goStdEnv(filepath.Dir(goBin)+":/usr/bin:/bin", home, cache)
	run := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Env, cmd.Dir = env, home
		// The go command's compilers go with it when ctx ends: none
		// writes into the cache after WarmGo has returned.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		return cmd
	}
	key, err := run("env", "GOVERSION", "GOOS", "GOARCH", "GOAMD64", "GOEXPERIMENT", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("reading the go command's environment: %w", err)
	}
	sum := sha256.Sum256(append([]byte(goBin+"\n"), key...))
	dir := filepath.Join(g.root, "go-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "go-build", "README")); err == nil {
		fmt.Fprintf(progress, "Go standard library cache ready (%s)\n", dir)
		return dir, nil
	}
	pkgs, err := run("list", "std").Output()
	if err != nil {
		return "", fmt.Errorf("listing the Go standard library: %w", err)
	}
	g.mu.Lock()
	g.total = strings.Count(string(pkgs), "\n")
	g.mu.Unlock()
	fmt.Fprintf(progress, "Compiling the Go standard library for the builds' cache (%d packages, once per Go version)\n", g.total)

	// go build -v names each package as it compiles it.
	cmd := run("build", "-v", "std")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	var tail tailBuffer
	tail.max = tailLines
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("compiling the Go standard library: %w", err)
	}
	// Behind the platform's own work: the warm-up is worth having, not
	// worth slowing the control plane's start for.
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, 10)
	ticker := time.NewTicker(goStdProgressEvery)
	defer ticker.Stop()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for lines != nil {
		select {
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			tail.Write([]byte(l + "\n"))
			g.mu.Lock()
			g.compiled++
			g.mu.Unlock()
		case <-ticker.C:
			c, t := g.progress()
			fmt.Fprintf(progress, "Go standard library: %d of %d packages compiled\n", c, t)
		}
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		return "", fmt.Errorf("compiling the Go standard library: %w; last lines:\n%s", err, tail.String())
	}
	if err := os.Rename(cache, filepath.Join(tmp, "ready")); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// A warm-up that another process finished first leaves that one.
	if err := os.Rename(filepath.Join(tmp, "ready"), filepath.Join(dir, "go-build")); err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		return "", fmt.Errorf("keeping the Go standard library cache: %w", err)
	}
	fmt.Fprintf(progress, "Go standard library cache ready: %d packages in %s\n", g.total, time.Since(g.began).Round(time.Second))
	return dir, nil
}

func (g *goStd) progress() (compiled, total int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.compiled, g.total
}

// seedGoCache copies the warmed standard library into the tenant's Go
// build cache before its first Go build with this toolchain, waiting for a
// warm-up that is under way. Nothing is copied without a warm-up, or when
// it failed. The copy goes through an os.Root of the tenant's cache, which
// earlier builds (tenant code) wrote: a link planted there cannot send it
// elsewhere. A copy that fails (the tenant's disk is full) leaves the
// build to compile what is missing.
func (w *workspace) seedGoCache(ctx context.Context, g *goStd) {
	g.mu.Lock()
	started := g.started
	g.mu.Unlock()
	if !started {
		return
	}
	select {
	case <-g.done:
	default:
		c, t := g.progress()
		fmt.Fprintf(w.out, "-----> Waiting for the platform to finish compiling Go's standard library (%d of %d packages)\n", c, t)
		select {
		case <-g.done:
		case <-ctx.Done():
			return
		}
	}
	if g.err != nil || g.dir == "" {
		return
	}
	stamp := filepath.Join("go-build", goStdSeedPrefix+filepath.Base(g.dir))
	root, err := os.OpenRoot(w.cache)
	if err != nil {
		return
	}
	defer root.Close()
	if _, err := root.Lstat(stamp); err == nil {
		return
	}
	start := time.Now()
	n, err := copyInto(root, filepath.Join(g.dir, "go-build"), "go-build")
	if err != nil {
		fmt.Fprintf(w.out, "       Could not copy Go's compiled standard library into the build cache (%v): compiling it\n", err)
		return
	}
	if f, err := root.OpenFile(stamp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err == nil {
		f.Close()
	}
	fmt.Fprintf(w.out, "-----> Go's standard library: %d compiled files copied into the build cache in %s\n", n, time.Since(start).Round(time.Millisecond))
}

// copyInto copies the regular files under src (a directory of the
// platform's) to dst in root, making directories as needed and leaving
// files that exist alone. What root refuses (a link planted in the
// tenant's cache that leads out of it) is skipped; a full disk ends the
// copy. It returns how many files it wrote.
func copyInto(root *os.Root, src, dst string) (int, error) {
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			err := root.Mkdir(target, 0o755)
			if err == nil || errors.Is(err, fs.ErrExist) {
				return nil
			}
			if full(err) {
				return err
			}
			return fs.SkipDir
		case !d.Type().IsRegular():
			return nil
		}
		ok, err := copyFile(root, p, target)
		if ok {
			n++
		}
		if err != nil && full(err) {
			return err
		}
		return nil
	})
	return n, err
}

// full says err is a disk that is full.
func full(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// copyFile copies src to target in root unless target exists.
func copyFile(root *os.Root, src, target string) (bool, error) {
	in, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer in.Close()
	out, err := root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return false, err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		_ = root.Remove(target)
		return false, err
	}
	return true, out.Close()
}

// lockDir takes an exclusive flock on path, polling until it has it or
// ctx ends.
func lockDir(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, context.Cause(ctx)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
