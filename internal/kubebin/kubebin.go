package kubebin

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

//go:embed recipes
var recipes embed.FS

// EtcdVersion is the etcd release every control plane runs.
const EtcdVersion = "3.6.16"

// DefaultKubeVersion is the Kubernetes version used when a caller names none.
const DefaultKubeVersion = "1.37.2"

// versionPkg is the package whose variables carry the version stamp.
const versionPkg = "k8s.io/component-base/version"

// buildDate is stamped into every kube-apiserver so that builds are reproducible.
const buildDate = "2026-01-01T00:00:00Z"

// KubeVersions returns the pinned Kubernetes versions kube-apiserver can be
// built at, oldest first.
func KubeVersions() []string {
	entries, err := fs.ReadDir(recipes, "recipes")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if v, ok := strings.CutPrefix(e.Name(), "kube-apiserver-v"); ok {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, compareVersions)
	return out
}

// Options configures a Builder.
type Options struct {
	// CacheDir holds the builds. Empty means $BEX_CACHE_DIR, else
	// <user cache dir>/bex.
	CacheDir string
	// Progress receives a line now and then while a build runs. Nil discards.
	Progress io.Writer
	// Go is the go command to build with. Empty means "go" from PATH, else
	// $GOROOT/bin/go.
	Go string
}

// Builder builds and caches pinned binaries. It is safe for concurrent use,
// also across processes: builds of one binary are serialised by a file lock in
// the cache directory.
type Builder struct {
	cacheDir string
	progress io.Writer
	goCmd    string
}

// NewBuilder returns a Builder, resolving the cache directory and the go command.
func NewBuilder(opts Options) (*Builder, error) {
	dir := opts.CacheDir
	if dir == "" {
		dir = os.Getenv("BEX_CACHE_DIR")
	}
	if dir == "" {
		ucd, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("finding the user cache directory (set BEX_CACHE_DIR): %w", err)
		}
		dir = filepath.Join(ucd, "bex")
	}
	goCmd := opts.Go
	if goCmd == "" {
		if p, err := exec.LookPath("go"); err == nil {
			goCmd = p
		} else {
			goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
	}
	w := opts.Progress
	if w == nil {
		w = io.Discard
	}
	return &Builder{cacheDir: dir, progress: w, goCmd: goCmd}, nil
}

// CacheDir returns the directory the builds are kept in.
func (b *Builder) CacheDir() string { return b.cacheDir }

// KubeAPIServer returns the path of kube-apiserver at version (for example
// "1.37.2"), building it first when the cache lacks it.
func (b *Builder) KubeAPIServer(ctx context.Context, version string) (string, error) {
	return b.KubeComponent(ctx, "kube-apiserver", version)
}

// KubeComponents are the Kubernetes components KubeComponent builds besides
// kube-apiserver, from the same pinned sources: what a kubeadm
// control-plane node runs beside it.
func KubeComponents() []string { return []string{"kube-controller-manager", "kube-scheduler"} }

// KubeComponent returns the path of a Kubernetes component (kube-apiserver
// or one of KubeComponents) at version, building it first when the cache
// lacks it.
func (b *Builder) KubeComponent(ctx context.Context, component, version string) (string, error) {
	estimate := map[string]string{
		"kube-apiserver":          "about 8 minutes",
		"kube-controller-manager": "about 8 minutes, less after kube-apiserver",
		"kube-scheduler":          "about 5 minutes, less after kube-apiserver",
	}[component]
	if estimate == "" {
		return "", fmt.Errorf("%q is not a Kubernetes component bex builds (kube-apiserver, %s)", component, strings.Join(KubeComponents(), ", "))
	}
	version = strings.TrimPrefix(version, "v")
	r, err := loadRecipe("kube-apiserver-v" + version)
	if err != nil {
		return "", fmt.Errorf("%s %s is not pinned (pinned: %s): %w", component, version, strings.Join(KubeVersions(), ", "), err)
	}
	r.name = component
	r.version = "v" + version
	r.pkg = "k8s.io/kubernetes/cmd/" + component
	r.estimate = estimate
	r.ldflags = "-s -w " + versionFlags(versionPkg, r.version)
	return b.build(ctx, r)
}

// versionFlags stamps version ("v1.37.2") into the variables gitVersion,
// gitMajor, gitMinor, gitTreeState and buildDate of pkg, as Kubernetes'
// builds do; Cluster API's version package names them alike.
func versionFlags(pkg, version string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	return strings.Join([]string{
		"-X", pkg + ".gitVersion=" + version,
		"-X", pkg + ".gitMajor=" + major,
		"-X", pkg + ".gitMinor=" + minor,
		"-X", pkg + ".gitTreeState=clean",
		"-X", pkg + ".buildDate=" + buildDate,
	}, " ")
}

// Etcd returns the path of the pinned etcd, building it first when the cache
// lacks it.
func (b *Builder) Etcd(ctx context.Context) (string, error) {
	r, err := loadRecipe("etcd-v" + EtcdVersion)
	if err != nil {
		return "", err
	}
	r.name = "etcd"
	r.version = "v" + EtcdVersion
	r.pkg = "."
	r.estimate = "about 3 minutes"
	r.ldflags = "-s -w"
	return b.build(ctx, r)
}

type recipe struct {
	name, version, pkg, ldflags string
	estimate                    string            // how long a first build takes on 2 cores
	files                       map[string][]byte // file name in the build module → content
}

func loadRecipe(dir string) (*recipe, error) {
	entries, err := fs.ReadDir(recipes, "recipes/"+dir)
	if err != nil {
		return nil, err
	}
	r := &recipe{files: map[string][]byte{}}
	for _, e := range entries {
		data, err := fs.ReadFile(recipes, "recipes/"+dir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		r.files[strings.TrimSuffix(e.Name(), ".txt")] = data
	}
	return r, nil
}

// writeTo writes the recipe's build module into dir.
func (r *recipe) writeTo(dir string) error {
	for n, data := range r.files {
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			return fmt.Errorf("writing build module: %w", err)
		}
	}
	return nil
}

// key identifies what a build produced: the recipe, the flags and the Go
// toolchain's target.
func (r *recipe) key() string {
	h := sha256.New()
	names := make([]string, 0, len(r.files))
	for n := range r.files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(r.files[n]))
		h.Write(r.files[n])
	}
	fmt.Fprintf(h, "%s\x00%s\x00%s/%s\x00", r.pkg, r.ldflags, runtime.GOOS, runtime.GOARCH)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (b *Builder) build(ctx context.Context, r *recipe) (string, error) {
	dir := filepath.Join(b.cacheDir, r.name, r.version)
	bin := filepath.Join(dir, r.name)
	stamp := filepath.Join(dir, "recipe")
	key := r.key()
	if fresh(bin, stamp, key) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating cache directory: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, "lock"), func() {
		fmt.Fprintf(b.progress, "waiting for another process building %s %s\n", r.name, r.version)
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	if fresh(bin, stamp, key) { // built by whoever held the lock
		return bin, nil
	}

	src := filepath.Join(dir, "src")
	if err := os.RemoveAll(src); err != nil {
		return "", fmt.Errorf("clearing build directory: %w", err)
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", fmt.Errorf("creating build directory: %w", err)
	}
	if err := r.writeTo(src); err != nil {
		return "", err
	}

	start := time.Now()
	fmt.Fprintf(b.progress, "building %s %s from the Go module proxy into %s (once per version; %s on 2 cores)\n", r.name, r.version, dir, r.estimate)
	total := b.countPackages(ctx, src, r.pkg)
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, b.goCmd, "build", "-v", "-trimpath", "-ldflags", r.ldflags, "-o", tmp, r.pkg)
	cmd.Dir = src
	cmd.Env = b.env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	var tail ring
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting go build: %w", err)
	}
	var compiled atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			if isPackageLine(line) {
				compiled.Add(1)
			} else {
				tail.add(line)
			}
		}
	}()
	ticker := time.NewTicker(15 * time.Second)
	defer ticker.Stop()
	waitErr := make(chan error, 1)
	go func() { <-done; waitErr <- cmd.Wait() }()
	for {
		select {
		case err := <-waitErr:
			if err != nil {
				return "", fmt.Errorf("building %s %s: %w\n%s", r.name, r.version, err, tail.String())
			}
			if err := os.Rename(tmp, bin); err != nil {
				return "", fmt.Errorf("installing %s: %w", r.name, err)
			}
			if err := os.WriteFile(stamp, []byte(key+"\n"), 0o644); err != nil {
				return "", fmt.Errorf("writing build stamp: %w", err)
			}
			fmt.Fprintf(b.progress, "built %s %s in %s\n", r.name, r.version, time.Since(start).Round(time.Second))
			return bin, nil
		case <-ticker.C:
			n := compiled.Load()
			if total > 0 {
				fmt.Fprintf(b.progress, "building %s %s: %d/%d packages compiled (%d%%), %s\n", r.name, r.version, n, total, n*100/int64(total), time.Since(start).Round(time.Second))
			} else {
				fmt.Fprintf(b.progress, "building %s %s: %d packages compiled, %s\n", r.name, r.version, n, time.Since(start).Round(time.Second))
			}
		}
	}
}

// countPackages returns how many packages the build compiles at most, or 0
// when go list fails (progress then shows a plain count).
func (b *Builder) countPackages(ctx context.Context, dir, pkg string) int {
	cmd := exec.CommandContext(ctx, b.goCmd, "list", "-deps", pkg)
	cmd.Dir = dir
	cmd.Env = b.env()
	out, err := cmd.Output()
	if err != nil {
		return 0
	}
	return strings.Count(string(out), "\n")
}

func (b *Builder) env() []string {
	env := os.Environ()
	env = append(env, "GOWORK=off", "GOFLAGS=-mod=mod")
	return env
}

// isPackageLine reports whether a line of go build -v output names a package.
func isPackageLine(line string) bool {
	return line != "" && !strings.ContainsAny(line, " \t:")
}

func fresh(bin, stamp, key string) bool {
	if _, err := os.Stat(bin); err != nil {
		return false
	}
	data, err := os.ReadFile(stamp)
	return err == nil && strings.TrimSpace(string(data)) == key
}

// lockFile takes an exclusive flock on path, calling waiting once if another
// process holds it. The returned func releases it.
func lockFile(ctx context.Context, path string, waiting func()) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening build lock: %w", err)
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !told {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ring keeps the last lines of a build's output for its error message.
type ring struct{ lines []string }

func (r *ring) add(s string) {
	r.lines = append(r.lines, s)
	if len(r.lines) > 40 {
		r.lines = r.lines[1:]
	}
}

func (r *ring) String() string { return strings.Join(r.lines, "\n") }

// compareVersions orders dotted numeric versions.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		var x, y int
		fmt.Sscan(as[i], &x)
		fmt.Sscan(bs[i], &y)
		if x != y {
			return x - y
		}
	}
	return len(as) - len(bs)
}
