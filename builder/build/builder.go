package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/loopfs"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/steptime"
)

// AppBuildPrefix starts the log line that reports how long the stack's own
// build steps took, followed by the duration ("App build took 1.234s").
const AppBuildPrefix = "App build took"

// DefaultTimeout is a build's time limit unless Options say otherwise
// (Heroku's is 15 minutes too).
const DefaultTimeout = 15 * time.Minute

// Options configure a Builder.
type Options struct {
	// WorkRoot holds each build's work directory (removed when the build
	// ends) and, unless CacheDir is set, the caches shared between builds.
	WorkRoot string
	// CacheDir holds the Go build and module caches and the npm and pip
	// caches, one set per tenant (CacheDir/tenants/<tenant>), shared by the
	// tenant's builds and no one else's; the default is WorkRoot/cache.
	CacheDir string
	// GoStdCacheDir is where WarmGo keeps Go's standard library compiled
	// as the Go stack compiles it, one directory per toolchain, copied into
	// a tenant's Go build cache before its first Go build (see gostd.go);
	// the default is CacheDir/go-std. Until WarmGo is called Go builds
	// compile the standard library themselves.
	GoStdCacheDir string
	// Registry is the host:port of the platform registry images are pushed
	// to. Loopback and private addresses are spoken to over plain HTTP.
	Registry string
	// RegistryAuth is the credential the builder presents to Registry
	// (the platform registry's token, see internal/registry.Auth); Keychain
	// hands it on to Unpack. Nil: the docker configuration's credentials,
	// as for every other registry.
	RegistryAuth authn.Authenticator
	// Timeout bounds one build; the default is DefaultTimeout.
	Timeout time.Duration
	// MaxCheckoutBytes bounds the size of the files a build checks out of
	// the pushed commit; a tree that expands past it fails the build with
	// a *CheckoutTooLargeError before the stack's steps run. The default
	// is DefaultMaxCheckoutBytes.
	MaxCheckoutBytes int64
	// BuildKitAddr is the address of a buildkitd (as buildctl --addr takes
	// it: unix:///path/buildkitd.sock, tcp://host:port). Without it,
	// repositories with a Dockerfile are refused.
	BuildKitAddr string
	// BuildCtl is the buildctl client Dockerfile builds run; empty means
	// buildctl from PATH.
	BuildCtl string
	// BuildKitLimits says BuildKitAddr's buildkitd runs on this machine
	// as root with the cgroupfs driver (what internal/buildkitd starts):
	// each Dockerfile build's RUN steps then run under a cgroup of their
	// own, with SandboxLimits' memory, CPU and pids on all of them
	// together. Without it they have buildkitd's defaults: none.
	BuildKitLimits bool
	// NoBuildKitReason, without BuildKitAddr, says why the platform has no
	// buildkitd ("buildkitd needs root"); a Dockerfile build is refused
	// with it, so the pusher learns what is missing.
	NoBuildKitReason string
	// RunImage is the image reference built images are laid on: its layers
	// first, then the app's under /app; its environment (PATH in
	// particular) merged with the stack's, its OS and architecture. It is
	// what runs the app in a container, so it must carry /bin/sh and the
	// stacks' runtimes (see docs/builds.md). A multi-platform image gives
	// its linux image of the builder's architecture, which the app's files
	// are built for. It is pulled from its registry with the credentials
	// of the docker configuration (authn.DefaultKeychain); a reference by
	// digest is read once, a tag is checked on every build. Empty: images
	// have no base (one layer on an empty image), which only the process
	// runtime can run. Dockerfile builds ignore it.
	RunImage string
	// Sandbox, when set, runs every step of the stacks' builds (go build,
	// npm ci, pip install, the app's own build scripts: tenant code) in a
	// container of the tenant (internal/sandbox): it sees the build's work
	// directory and the tenant's caches at their own paths, the toolchains
	// read-only, nothing else of this machine; its network reaches package
	// registries only if the Manager lets containers out. Without it steps
	// run as the builder's user.
	Sandbox *sandbox.Manager
	// Remote, when set, runs every step of the stacks' builds (tenant
	// code) away from the builder, in the agent it starts for each build
	// (builder/buildagent): in a cluster install a Pod of the tenant's
	// (internal/runtime/kube's StartBuild), which holds no service-account
	// token and sees no file of the platform's. The checkout goes to the
	// agent before the first step; the tree its steps left comes back,
	// through internal/treetar's limits (WorkDiskSize bytes), before a step
	// of the builder's own and after the last. The steps' caches are the
	// agent's (empty in a new Pod): Go's standard library is not seeded.
	// PATH is SandboxPATH. Not with Sandbox. Dockerfile builds still go
	// to BuildKitAddr.
	Remote RemoteFunc
	// SandboxPATH is the PATH of sandboxed steps [/usr/local/go/bin:
	// /usr/local/bin:/usr/bin:/bin]: the toolchains as the container sees
	// them.
	SandboxPATH string
	// SandboxLimits bound each sandboxed step [2 GiB of memory, 1 CPU
	// (CPUMilli 1000, a CFS quota), 1024 pids, 16384 open files, the
	// sandbox's defaults otherwise].
	SandboxLimits sandbox.Limits
	// WorkDiskSize bounds, with a Sandbox, the disk of each build's work
	// directory: the checkout, HOME, TMPDIR, what the steps write there
	// and the packed layer [DefaultDiskSize, 4 GiB]. CacheDiskSize bounds
	// each tenant's caches [DefaultDiskSize]. Each is an ext4 file system
	// of its own in a sparse image (internal/loopfs): a build's under
	// WorkRoot/builds, removed with it; a tenant's in CacheDir/disks,
	// kept, and mounted at CacheDir/tenants/<tenant> while its builds
	// run. A build that writes past either fails with a *DiskFullError;
	// the caches it filled are emptied before the tenant's next build.
	// Without a Sandbox builds write to WorkRoot's and CacheDir's disk,
	// unbounded.
	WorkDiskSize, CacheDiskSize int64
	// Log receives the builder's own log (not the build's output).
	Log logr.Logger
}

// Builder builds images. It is safe for concurrent use: each build has its
// own work directory; caches are shared.
type Builder struct {
	opts Options
	// keychain resolves the credentials of every registry request.
	keychain authn.Keychain
	// run resolves opts.RunImage; nil without one.
	run *runImage
	// disks bounds the builds' disk; nil without a sandbox.
	disks *disks
	// gostd is the standard library's cache that WarmGo makes.
	gostd *goStd
}

// Request says what to build.
type Request struct {
	Tenant, App string
	// RepoDir is the bare git repository.
	RepoDir string
	// Commit is the full or abbreviated hex name of the commit to build.
	Commit string
	// Stack overrides detection; empty means detect.
	Stack platformv1alpha1.Stack
	// Command replaces the stack's build command; it runs in a shell at the
	// repository root.
	Command string
	// Dockerfile is the path of the Dockerfile relative to the repository
	// root; setting it implies the dockerfile stack.
	Dockerfile string
}

// Result is what a successful build produced.
type Result struct {
	Stack platformv1alpha1.Stack
	// Image is the pullable reference by digest: registry/tenant/app@sha256:….
	Image  string
	Digest string
	// Processes maps process types to start commands, from the Procfile or
	// the stack's defaults; commands run in a shell in the app's directory.
	Processes map[string]string
	Duration  time.Duration
	// AppBuild is the time the stack's own build steps took (go build,
	// npm install, …): the app's compile time, as opposed to the
	// platform's overhead around it.
	AppBuild time.Duration
}

// New checks the options and prepares the work root.
func New(opts Options) (*Builder, error) {
	if opts.WorkRoot == "" {
		return nil, errors.New("build work root is required")
	}
	if opts.Registry == "" {
		return nil, errors.New("registry address is required")
	}
	if _, err := name.NewRegistry(opts.Registry); err != nil {
		return nil, fmt.Errorf("registry address %q: %w", opts.Registry, err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("the builder needs git: %w", err)
	}
	root, err := filepath.Abs(opts.WorkRoot)
	if err != nil {
		return nil, fmt.Errorf("resolving work root: %w", err)
	}
	opts.WorkRoot = root
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(root, "cache")
	}
	if opts.CacheDir, err = filepath.Abs(opts.CacheDir); err != nil {
		return nil, fmt.Errorf("resolving cache dir: %w", err)
	}
	if opts.GoStdCacheDir == "" {
		opts.GoStdCacheDir = filepath.Join(opts.CacheDir, "go-std")
	}
	if opts.GoStdCacheDir, err = filepath.Abs(opts.GoStdCacheDir); err != nil {
		return nil, fmt.Errorf("resolving the Go standard library cache dir: %w", err)
	}
	for _, d := range []string{filepath.Join(root, "builds"), opts.CacheDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("creating build directories: %w", err)
		}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxCheckoutBytes < 0 {
		return nil, fmt.Errorf("the checkout limit %d must not be negative", opts.MaxCheckoutBytes)
	}
	if opts.MaxCheckoutBytes == 0 {
		opts.MaxCheckoutBytes = DefaultMaxCheckoutBytes
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.SandboxPATH == "" {
		opts.SandboxPATH = "/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin"
	}
	if opts.SandboxLimits.CPUMilli == 0 {
		opts.SandboxLimits.CPUMilli = 1000
	}
	if opts.SandboxLimits.Memory == 0 {
		opts.SandboxLimits.Memory = 2 << 30
	}
	if opts.SandboxLimits.Pids == 0 {
		opts.SandboxLimits.Pids = 1024
	}
	if opts.SandboxLimits.Files == 0 {
		opts.SandboxLimits.Files = 16384
	}
	if opts.WorkDiskSize == 0 {
		opts.WorkDiskSize = DefaultDiskSize
	}
	if opts.CacheDiskSize == 0 {
		opts.CacheDiskSize = DefaultDiskSize
	}
	for _, s := range []struct {
		name string
		n    int64
	}{{"work disk", opts.WorkDiskSize}, {"cache disk", opts.CacheDiskSize}} {
		if s.n < loopfs.MinSize {
			return nil, fmt.Errorf("build %s of %d bytes is too small: want at least %d MiB", s.name, s.n, loopfs.MinSize>>20)
		}
	}
	if opts.Remote != nil && opts.Sandbox != nil {
		return nil, errors.New("a builder runs its steps in a sandbox or in a remote agent, not both")
	}
	// The go command of the Go stack's steps: the sandbox's, or the
	// builder's own.
	goPATH := opts.SandboxPATH
	if opts.Sandbox == nil {
		goPATH = os.Getenv("PATH")
	}
	b := &Builder{opts: opts, keychain: authn.DefaultKeychain, gostd: newGoStd(opts.GoStdCacheDir, goPATH)}
	if opts.Sandbox != nil {
		b.disks = &disks{
			builds: filepath.Join(root, "builds"), cacheDir: opts.CacheDir,
			workSize: opts.WorkDiskSize, cacheSize: opts.CacheDiskSize, log: opts.Log,
		}
		// What a builder that died left mounted.
		if err := b.disks.sweep(); err != nil {
			return nil, fmt.Errorf("cleaning the disks of earlier builds: %w", err)
		}
	}
	if opts.RegistryAuth != nil {
		b.keychain = Keychain(opts.Registry, opts.RegistryAuth)
	}
	if opts.RunImage != "" {
		if b.run, err = newRunImage(opts.RunImage); err != nil {
			return nil, err
		}
	}
	return b, nil
}

var (
	labelPattern  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	commitPattern = regexp.MustCompile(`^[0-9a-f]{4,64}$`)
)

func (r Request) validate() error {
	if !labelPattern.MatchString(r.Tenant) {
		return fmt.Errorf("invalid tenant name %q", r.Tenant)
	}
	if !labelPattern.MatchString(r.App) {
		return fmt.Errorf("invalid app name %q", r.App)
	}
	if !commitPattern.MatchString(r.Commit) {
		return fmt.Errorf("invalid commit %q: want a hex object name", r.Commit)
	}
	if r.RepoDir == "" {
		return errors.New("repository directory is required")
	}
	return nil
}

// Build builds req and pushes the image. The build's output (and the
// builder's "----->" step lines) is written to log line by line as it
// happens; on failure the log ends with a " !" line, the error names the
// failing command and carries the last lines of its output, and the Result
// has only the Stack, once it was detected. A nil log discards the output.
func (b *Builder) Build(ctx context.Context, req Request, log io.Writer) (Result, error) {
	start := time.Now()
	if log == nil {
		log = io.Discard
	}
	out := newLineWriter(log)
	defer out.Flush()
	logger := b.opts.Log.WithValues("tenant", req.Tenant, "app", req.App, "commit", req.Commit)

	logger.Info("Build started")
	res, err := b.build(ctx, req, out)
	if err != nil {
		out.Flush()
		fmt.Fprintf(out, " !     Build failed: %s\n", firstLine(err.Error()))
		var ce *CommandError
		if errors.As(err, &ce) && ce.Hint != "" {
			fmt.Fprintf(out, " !     %s\n", ce.Hint)
		}
		logger.Info("Build failed", "err", err.Error())
		return Result{Stack: res.Stack}, err
	}
	res.Duration = time.Since(start)
	fmt.Fprintf(out, "-----> Done in %s: %s\n", res.Duration.Round(100*time.Millisecond), res.Image)
	logger.Info("Build finished", "image", res.Image, "duration", res.Duration)
	return res, nil
}

// Close unmounts the disks of builds that are over. Builds still running
// keep theirs, and unmount them when they end.
func (b *Builder) Close() error {
	if b.disks == nil {
		return nil
	}
	return b.disks.sweep()
}

func (b *Builder) build(parent context.Context, req Request, out io.Writer) (res Result, err error) {
	// A build that fails once its stack is detected still says which.
	var stack platformv1alpha1.Stack
	defer func() {
		if err != nil {
			res = Result{Stack: stack}
		}
	}()
	if err := req.validate(); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeoutCause(parent, b.opts.Timeout, &TimeoutError{Limit: b.opts.Timeout})
	defer cancel()

	work, err := os.MkdirTemp(filepath.Join(b.opts.WorkRoot, "builds"), req.Tenant+"-"+req.App+"-")
	if err != nil {
		return Result{}, fmt.Errorf("creating work directory: %w", err)
	}
	defer func() {
		if err := removeAll(work); err != nil {
			b.opts.Log.Error(err, "Removing build directory", "dir", work)
		}
	}()
	w := &workspace{
		root:      work,
		app:       filepath.Join(work, "app"),
		home:      filepath.Join(work, "home"),
		tmp:       filepath.Join(work, "tmp"),
		cache:     filepath.Join(b.opts.CacheDir, "tenants", req.Tenant),
		tenant:    req.Tenant,
		appName:   req.App,
		remote:    b.opts.Remote,
		treeLimit: b.opts.WorkDiskSize,
		sandbox:   b.opts.Sandbox,
		sbPATH:    b.opts.SandboxPATH,
		sbLimits:  b.opts.SandboxLimits,
		bkLimits:  b.opts.BuildKitLimits,
		out:       out,
		commit:    req.Commit,
		timeout:   b.opts.Timeout,
		keychain:  b.keychain,
		disks:     b.disks,
	}
	if b.disks != nil {
		release, err := b.disks.work(ctx, work)
		if err != nil {
			return Result{}, fmt.Errorf("making the build's disk: %w", err)
		}
		defer release()
	}
	for _, d := range []string{w.app, w.home, w.tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return Result{}, fmt.Errorf("creating work directory: %w", err)
		}
	}
	if err := os.MkdirAll(w.cache, 0o755); err != nil {
		return Result{}, fmt.Errorf("creating the tenant's build cache: %w", err)
	}
	if b.disks != nil {
		release, emptied, err := b.disks.cache(ctx, req.Tenant, w.cache)
		if err != nil {
			return Result{}, fmt.Errorf("mounting the tenant's build caches: %w", err)
		}
		defer release()
		if emptied {
			fmt.Fprintf(out, "-----> The build caches were full: starting with empty ones\n")
		}
	}
	// Before the disks go: a build that failed for want of room says so.
	defer func() {
		if err != nil {
			err = w.diskErr(err)
		}
	}()

	fmt.Fprintf(out, "-----> Building %s/%s at %s\n", req.Tenant, req.App, short(req.Commit))
	stopCheckout := steptime.Start(ctx, "checkout")
	commit, err := w.checkout(ctx, req.RepoDir, req.Commit, b.opts.MaxCheckoutBytes)
	stopCheckout()
	if err != nil {
		return Result{}, w.ctxErr(ctx, err)
	}
	w.commit = commit
	// From here on the builder reads the tenant's files only through the
	// root: no symbolic link leads it outside the checkout.
	if w.tree, err = os.OpenRoot(w.app); err != nil {
		return Result{}, fmt.Errorf("opening the checkout: %w", err)
	}
	defer w.tree.Close()

	p, err := plan(w.tree.FS(), req, b.opts.BuildKitAddr != "")
	if errors.Is(err, ErrNoBuildKit) && b.opts.NoBuildKitReason != "" {
		return Result{}, fmt.Errorf("Dockerfile builds need BuildKit, which this platform does not run: %s", b.opts.NoBuildKitReason)
	}
	if err != nil {
		return Result{}, err
	}
	stack = p.stack
	fmt.Fprintf(out, "-----> %s detected\n", p.title)
	if p.stack != platformv1alpha1.StackDockerfile {
		// The stack's own steps (go build -o bin/app, the venv) write into
		// the tree and its image must be complete on its own: a link that
		// leads outside fails the build before any step follows it. A
		// Dockerfile's context is BuildKit's, which copies links as links.
		if err := checkLinks(w.tree); err != nil {
			return Result{}, err
		}
	}

	ref, err := name.NewTag(fmt.Sprintf("%s/%s/%s:%s", b.opts.Registry, req.Tenant, req.App, commit))
	if err != nil {
		return Result{}, fmt.Errorf("naming the image: %w", err)
	}
	if p.stack == platformv1alpha1.StackDockerfile {
		buildctl := b.opts.BuildCtl
		if buildctl == "" {
			buildctl = "buildctl"
		}
		return w.buildDockerfile(ctx, buildctl, b.opts.BuildKitAddr, p, ref)
	}
	// The run image is resolved before the app's build steps, so that one
	// that cannot be pulled fails the build before minutes of compiling.
	var run *runBase
	if b.run != nil {
		img, pinned, err := b.run.get(ctx, b.keychain)
		if err != nil {
			return Result{}, w.ctxErr(ctx, err)
		}
		run = &runBase{img: img, pinned: pinned}
		fmt.Fprintf(out, "-----> Building on run image %s\n", pinned)
	}

	defer w.endAgent()
	if p.stack == platformv1alpha1.StackGo && w.remote == nil {
		stop := steptime.Start(ctx, "go cache")
		w.seedGoCache(ctx, b.gostd)
		stop()
	}
	if w.remote != nil && slices.ContainsFunc(p.steps, func(s step) bool { return s.fn == nil }) {
		// The agent's start is the platform's time, not the app's build.
		fmt.Fprintf(out, "-----> Starting the build's pod\n")
		if _, err := w.remoteAgent(ctx); err != nil {
			return Result{}, w.ctxErr(ctx, err)
		}
	}
	stepsStart := time.Now()
	for _, s := range p.steps {
		fmt.Fprintf(out, "-----> %s\n", s.title)
		if err := w.runStep(ctx, s); err != nil {
			return Result{}, w.ctxErr(ctx, err)
		}
	}
	appBuild := time.Since(stepsStart)
	if err := w.treeBack(ctx); err != nil {
		return Result{}, w.ctxErr(ctx, err)
	}
	if tl := steptime.From(ctx); tl != nil {
		tl.Add("app build", appBuild)
	}
	if len(p.steps) > 0 {
		fmt.Fprintf(out, "       %s %s\n", AppBuildPrefix, appBuild.Round(time.Millisecond))
	}
	procs, err := processes(w.tree.FS(), p.processes)
	if err != nil {
		return Result{}, err
	}
	fmt.Fprintf(out, "-----> Discovering process types\n       %s\n", describeProcesses(procs))

	fmt.Fprintf(out, "-----> Assembling image\n")
	stopImage := steptime.Start(ctx, "image")
	img, size, err := w.image(p, procs, run)
	stopImage()
	if err != nil {
		return Result{}, w.ctxErr(ctx, err)
	}
	fmt.Fprintf(out, "       Layer of %s\n", humanSize(size))
	fmt.Fprintf(out, "-----> Pushing %s\n", ref)
	stopPush := steptime.Start(ctx, "registry push")
	digest, err := push(ctx, ref, img, b.keychain)
	stopPush()
	if err != nil {
		return Result{}, w.ctxErr(ctx, err)
	}
	return Result{
		Stack:     p.stack,
		Image:     ref.Context().Digest(digest).String(),
		Digest:    digest,
		Processes: procs,
		AppBuild:  appBuild,
	}, nil
}

// TimeoutError is the error of a build that ran out of time.
type TimeoutError struct {
	Limit time.Duration
	// Command is the command that was running, if any.
	Command string
}

func (e *TimeoutError) Error() string {
	if e.Command != "" {
		return fmt.Sprintf("build exceeded %s (while running %s)", e.Limit, e.Command)
	}
	return fmt.Sprintf("build exceeded %s", e.Limit)
}

// Is makes errors.Is(err, context.DeadlineExceeded) true for timeouts.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// ctxErr replaces err by the timeout or cancellation that caused it.
func (w *workspace) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	var te *TimeoutError
	if cause := context.Cause(ctx); errors.As(cause, &te) {
		e := *te
		var ce *CommandError
		if errors.As(err, &ce) {
			e.Command = ce.Command
		}
		return &e
	}
	return fmt.Errorf("build canceled: %w", context.Cause(ctx))
}

func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fK", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%dB", n)
	}
}

// removeAll removes dir even where a build left directories without write
// permission.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
