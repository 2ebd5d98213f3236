package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/apiserver/scheduler"
	"bex.co/bex/builder/build"
	"bex.co/bex/builder/gitserver"
	appctrl "bex.co/bex/controllers/app"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
)

// Options configure a Pipeline.
type Options struct {
	Store   *store.Store
	Kube    client.Client
	Builder *build.Builder
	Runtime runtime.Driver
	// ReleasesDir holds unpacked images for the process runtime:
	// <ReleasesDir>/<tenant>/<app>/v<N>.
	ReleasesDir string
	// BinDir is added to every app's PATH (bex-static lives there).
	BinDir string
	// URL returns an app's public URL.
	URL func(tenant, app string) string
	// Quotas are the tenants' default quotas; a push beyond a tenant's
	// concurrent builds or build minutes is refused before its build is
	// recorded. nil means quota.NewDefaults().
	Quotas *quota.Defaults
	// ReleaseRetention is how many releases of an app keep their artifacts
	// (their directory under ReleasesDir, their image): after a release
	// goes live, those of the app's releases older than the newest
	// ReleaseRetention, except the one that serves, are pruned and cannot
	// be rolled back to. 0 means DefaultReleaseRetention; it may not be
	// negative.
	ReleaseRetention int
	Log              logr.Logger
}

// DefaultReleaseRetention is how many releases of an app the platform keeps
// when the operator does not say.
const DefaultReleaseRetention = 20

// Pipeline builds, releases and rolls back apps.
type Pipeline struct {
	opts  Options
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

var (
	_ gitserver.Deployer = (*Pipeline)(nil)
	_ appctrl.Releases   = (*Pipeline)(nil)
)

// New checks the options.
func New(opts Options) (*Pipeline, error) {
	switch {
	case opts.Store == nil:
		return nil, errors.New("pipeline: Store is nil")
	case opts.Kube == nil:
		return nil, errors.New("pipeline: Kube is nil")
	case opts.Builder == nil:
		return nil, errors.New("pipeline: Builder is nil")
	case opts.Runtime == nil:
		return nil, errors.New("pipeline: Runtime is nil")
	case opts.ReleasesDir == "":
		return nil, errors.New("pipeline: ReleasesDir is empty")
	case opts.URL == nil:
		return nil, errors.New("pipeline: URL is nil")
	}
	if opts.ReleaseRetention < 0 {
		return nil, fmt.Errorf("pipeline: ReleaseRetention %d is negative", opts.ReleaseRetention)
	}
	if opts.ReleaseRetention == 0 {
		opts.ReleaseRetention = DefaultReleaseRetention
	}
	if opts.Quotas == nil {
		opts.Quotas = quota.NewDefaults()
	} else if err := opts.Quotas.Validate(); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	return &Pipeline{opts: opts, locks: map[string]*sync.Mutex{}}, nil
}

// lock serialises work on one app: first among this process's goroutines,
// then, through the store's app lock, among every process on the database
// (a rollback in the web API waits for a push's deploy in the git receiver).
func (p *Pipeline) lock(ctx context.Context, tenant, app string) (unlock func(), err error) {
	p.mu.Lock()
	l, ok := p.locks[tenant+"/"+app]
	if !ok {
		l = &sync.Mutex{}
		p.locks[tenant+"/"+app] = l
	}
	p.mu.Unlock()
	l.Lock()
	unlockApp, err := p.opts.Store.LockApp(ctx, tenant, app)
	if err != nil {
		l.Unlock()
		return nil, err
	}
	return func() {
		unlockApp()
		l.Unlock()
	}, nil
}

// Deploy builds push.New, rolls it out and records the release.
func (p *Pipeline) Deploy(ctx context.Context, push gitserver.Push, log io.Writer) (gitserver.DeployResult, error) {
	unlock, err := p.lock(ctx, push.Tenant, push.App)
	if err != nil {
		return gitserver.DeployResult{}, err
	}
	defer unlock()
	tenant, err := p.opts.Store.GetTenantByName(ctx, push.Tenant)
	if err != nil {
		return gitserver.DeployResult{}, fmt.Errorf("looking up tenant %s: %w", push.Tenant, err)
	}
	app, err := p.app(ctx, push.Tenant, push.App)
	if err != nil {
		return gitserver.DeployResult{}, err
	}
	bq, err := p.opts.Quotas.BuildQuota(ctx, p.opts.Store, tenant.ID, time.Now())
	if err != nil {
		return gitserver.DeployResult{}, fmt.Errorf("reading the quotas of tenant %s: %w", push.Tenant, err)
	}
	b, err := p.opts.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: push.App, Commit: push.New, Stack: string(app.Spec.Build.Stack), Quota: bq})
	if errors.Is(err, store.ErrQuotaExceeded) {
		return gitserver.DeployResult{}, &gitserver.RefusedError{Reason: err}
	}
	if err != nil {
		return gitserver.DeployResult{}, fmt.Errorf("recording the build: %w", err)
	}
	logs := newLogWriter(ctx, p.opts.Store, b.ID)
	out := io.MultiWriter(log, logs)
	fmt.Fprintf(out, "-----> Build %d of %s (%s)\n", b.Number, push.App, short(push.New))
	res, buildErr := p.opts.Builder.Build(ctx, build.Request{
		Tenant: push.Tenant, App: push.App, RepoDir: push.RepoDir, Commit: push.New,
		Stack: app.Spec.Build.Stack, Command: app.Spec.Build.Command, Dockerfile: app.Spec.Build.Dockerfile,
	}, out)
	if buildErr != nil {
		logs.Close()
		p.finish(b.ID, store.BuildResult{Status: store.BuildFailed, Error: buildErr.Error()})
		return gitserver.DeployResult{}, buildErr
	}

	// Deleted at the next prune unless a release runs it by then: the
	// image of a release that fails, or that a kill cuts short, does not
	// stay in the registry for ever.
	if err := p.opts.Store.QueueDeletion(ctx, tenant.ID, push.App, store.DeleteImage, res.Image, fmt.Sprintf("build %d was not released", b.Number)); err != nil {
		p.opts.Log.Error(err, "Recording a build's image for deletion unless released", "app", klog.KObj(app), "image", res.Image)
	}
	latest, err := p.latestNumber(ctx, tenant.ID, push.App)
	if err != nil {
		logs.Close()
		p.finish(b.ID, store.BuildResult{Status: store.BuildFailed, Stack: string(res.Stack), Error: err.Error()})
		return gitserver.DeployResult{}, err
	}
	config := configOf(app)
	number := latest + 1
	fmt.Fprintf(out, "-----> Releasing v%d\n", number)
	if err := p.rollout(ctx, app, number, res.Image, config, out); err != nil {
		fmt.Fprintf(out, " !     Release v%d failed: %v\n", number, err)
		logs.Close()
		p.finish(b.ID, store.BuildResult{Status: store.BuildFailed, Stack: string(res.Stack), Error: rolloutFailedPrefix + err.Error()})
		return gitserver.DeployResult{}, fmt.Errorf("release v%d failed, the previous release keeps serving: %w", number, err)
	}
	logs.Close()
	p.finish(b.ID, store.BuildResult{Status: store.BuildSucceeded, Stack: string(res.Stack), Image: res.Image})
	rel, err := p.opts.Store.CreateRelease(ctx, store.NewRelease{
		TenantID: tenant.ID, App: push.App, BuildID: b.ID, Image: res.Image, Config: config,
		Description: "Deploy " + short(push.New), CreatedBy: push.Actor,
	})
	if err != nil {
		return gitserver.DeployResult{}, fmt.Errorf("recording release v%d: %w", number, err)
	}
	url := p.opts.URL(push.Tenant, push.App)
	if err := p.setCurrent(ctx, app, rel.Number, url); err != nil {
		return gitserver.DeployResult{}, err
	}
	p.prune(ctx, tenant.ID, app, log)
	return gitserver.DeployResult{Release: rel.Number, URL: url}, nil
}

// Rollback rolls release `to` out again as a new release.
func (p *Pipeline) Rollback(ctx context.Context, tenantName, appName string, to int, actor string) (int, error) {
	unlock, err := p.lock(ctx, tenantName, appName)
	if err != nil {
		return 0, err
	}
	defer unlock()
	tenant, err := p.opts.Store.GetTenantByName(ctx, tenantName)
	if err != nil {
		return 0, fmt.Errorf("looking up tenant %s: %w", tenantName, err)
	}
	app, err := p.app(ctx, tenantName, appName)
	if err != nil {
		return 0, err
	}
	target, err := p.opts.Store.GetRelease(ctx, tenant.ID, appName, to)
	if err != nil {
		return 0, fmt.Errorf("release v%d: %w", to, err)
	}
	if err := target.Runnable(); err != nil {
		return 0, err
	}
	latest, err := p.latestNumber(ctx, tenant.ID, appName)
	if err != nil {
		return 0, err
	}
	if err := p.rollout(ctx, app, latest+1, target.Image, target.Config, io.Discard); err != nil {
		return 0, fmt.Errorf("rolling back to v%d failed, the current release keeps serving: %w", to, err)
	}
	rel, err := p.opts.Store.CreateRollbackRelease(ctx, tenant.ID, appName, to, actor)
	if err != nil {
		return 0, fmt.Errorf("recording the rollback: %w", err)
	}
	if err := p.setCurrent(ctx, app, rel.Number, p.opts.URL(tenantName, appName)); err != nil {
		return 0, err
	}
	p.prune(ctx, tenant.ID, app, io.Discard)
	return rel.Number, nil
}

// EnsureRunning makes the runtime run the App's current release, rolling it
// out again when the runtime does not (after a restart of the platform).
//
// app may be stale: a deploy or rollback that held the app's lock may have
// made a newer release current since it was read. So once it holds the lock,
// EnsureRunning reads the App and the runtime again and acts on what it
// finds then, never on the release app names.
func (p *Pipeline) EnsureRunning(ctx context.Context, app *platformv1alpha1.App) error {
	if app.Status.CurrentRelease == 0 || p.running(ctx, app) {
		return nil
	}
	unlock, err := p.lock(ctx, app.Namespace, app.Name)
	if err != nil {
		return err
	}
	defer unlock()
	app, err = p.app(ctx, app.Namespace, app.Name)
	if err != nil {
		return err
	}
	if app.Status.CurrentRelease == 0 || p.running(ctx, app) {
		return nil
	}
	tenant, err := p.opts.Store.GetTenantByName(ctx, app.Namespace)
	if err != nil {
		return fmt.Errorf("looking up tenant %s: %w", app.Namespace, err)
	}
	rel, err := p.opts.Store.GetRelease(ctx, tenant.ID, app.Name, int(app.Status.CurrentRelease))
	if err != nil {
		return fmt.Errorf("release v%d: %w", app.Status.CurrentRelease, err)
	}
	return p.rollout(ctx, app, rel.Number, rel.Image, rel.Config, io.Discard)
}

// running reports whether the runtime serves the App's current release.
func (p *Pipeline) running(ctx context.Context, app *platformv1alpha1.App) bool {
	st, err := p.opts.Runtime.Status(ctx, app.Namespace, app.Name)
	return err == nil && st.Release == int(app.Status.CurrentRelease) && len(st.Instances) > 0
}

// Remove stops everything the runtime runs for the app.
func (p *Pipeline) Remove(ctx context.Context, tenant, app string) error {
	unlock, err := p.lock(ctx, tenant, app)
	if err != nil {
		return err
	}
	defer unlock()
	if err := p.opts.Runtime.Remove(ctx, tenant, app); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(p.opts.ReleasesDir, tenant, app))
}

// releaseDir is where release number of app is unpacked.
func (p *Pipeline) releaseDir(app *platformv1alpha1.App, number int) string {
	return filepath.Join(p.opts.ReleasesDir, app.Namespace, app.Name, fmt.Sprintf("v%d", number))
}

// prunePatience bounds the deletion of pruned releases' artifacts.
const prunePatience = 2 * time.Minute

// prune marks the app's releases past the retention pruned (the newest
// ReleaseRetention and the one app says serves are kept) and deletes what
// the app has to delete: the pruned releases' directories, the images no
// kept release runs, and the images of builds that were never released
// (Deploy records each build's image before its release), these and those
// of earlier prunes whose deletion failed. It runs once a release is live and under the app's
// lock; the release stays live whatever happens here. A release is marked
// pruned first, so that nothing rolls back to a half-deleted one; a
// failed deletion is logged, kept with its error, and tried again at the
// next prune.
func (p *Pipeline) prune(ctx context.Context, tenantID string, app *platformv1alpha1.App, out io.Writer) {
	// The push may end now that its release is live; the pruning goes on.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), prunePatience)
	defer cancel()
	log := p.opts.Log.WithValues("app", klog.KObj(app))
	pruned, err := p.opts.Store.PruneReleases(ctx, tenantID, app.Name, p.opts.ReleaseRetention, int(app.Status.CurrentRelease))
	if err != nil {
		log.Error(err, "Pruning releases")
		return
	}
	if len(pruned.Releases) > 0 {
		numbers := make([]string, 0, len(pruned.Releases))
		for _, r := range pruned.Releases {
			numbers = append(numbers, fmt.Sprintf("v%d", r.Number))
		}
		log.Info("Pruned releases", "releases", numbers, "images", len(pruned.Images), "retention", p.opts.ReleaseRetention)
		fmt.Fprintf(out, "-----> Pruned %s: %s\n", strings.Join(numbers, ", "), store.RetentionRule(p.opts.ReleaseRetention))
	}
	pending, err := p.opts.Store.PendingDeletions(ctx, tenantID, app.Name)
	if err != nil {
		log.Error(err, "Listing what to delete")
		return
	}
	for _, d := range pending {
		var err error
		switch d.Kind {
		case store.DeleteReleaseDirectory:
			n, convErr := strconv.Atoi(d.Target)
			if convErr != nil {
				err = fmt.Errorf("release number %q: %w", d.Target, convErr)
				break
			}
			err = os.RemoveAll(p.releaseDir(app, n))
		case store.DeleteImage:
			err = deleteImage(ctx, d.Target, p.opts.Builder.Keychain())
		default:
			err = fmt.Errorf("unknown kind of deletion %q", d.Kind)
		}
		if err != nil {
			log.Error(err, "Deleting an artifact; trying again at the next prune", "kind", d.Kind, "target", d.Target, "reason", d.Reason, "attempts", d.Attempts+1)
		}
		if recErr := p.opts.Store.FinishDeletion(ctx, d.ID, err); recErr != nil {
			log.Error(recErr, "Recording a deletion", "kind", d.Kind, "target", d.Target)
		}
	}
}

// deleteImage deletes image (by digest) from its registry; one that is gone
// already is no error.
func deleteImage(ctx context.Context, image string, kc authn.Keychain) error {
	ref, err := name.NewDigest(image)
	if err != nil {
		return fmt.Errorf("reading image reference %s: %w", image, err)
	}
	err = remote.Delete(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc))
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return nil
	}
	return err
}

// rollout unpacks image and hands the release to the runtime.
func (p *Pipeline) rollout(ctx context.Context, app *platformv1alpha1.App, number int, image string, config map[string]store.ConfigValue, out io.Writer) error {
	dir := p.releaseDir(app, number)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	img, err := build.Unpack(ctx, image, dir, p.opts.Builder.Keychain())
	if err != nil {
		// What was unpacked goes: on a full disk it holds the room the
		// next release, or the serving one's restart, needs.
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			p.opts.Log.Error(rmErr, "Removing a release directory left half unpacked", "dir", dir)
		}
		if gitserver.DiskFull(err) {
			p.opts.Log.Error(err, "Disk full: release not unpacked", "app", klog.KObj(app), "release", number, "dir", filepath.Dir(dir))
			return fmt.Errorf("the platform's disk is full: release v%d could not be unpacked; push again once the platform's operator has freed space", number)
		}
		return fmt.Errorf("unpacking %s: %w", image, err)
	}
	env, err := p.environment(ctx, app.Namespace, config)
	if err != nil {
		return err
	}
	rel := runtime.Release{
		Tenant: app.Namespace, App: app.Name, Number: number, Image: image,
		Env: env, Processes: processes(app, img), HealthCheck: healthCheck(app),
	}
	if img.RootFS {
		// An image with its own root filesystem (a Dockerfile build) runs
		// as it is, with its own paths and environment.
		rel.RootFS, rel.WorkDir, rel.ImageEnv = dir, img.WorkingDir, envMap(img.Env)
	} else {
		rel.Dir, rel.ImageEnv = img.WorkingDir, p.imageEnv(img)
	}
	rel.Resources = resourcesOf(app)
	return p.opts.Runtime.Deploy(ctx, rel, out)
}

// resourcesOf is what each instance of the app gets: spec.resources, and
// the plan's (starter when none is named) where they say nothing. A
// sandboxing runtime enforces them as limits.
func resourcesOf(app *platformv1alpha1.App) runtime.Resources {
	plan := string(app.Spec.Plan)
	if plan == "" {
		plan = string(platformv1alpha1.PlanStarter)
	}
	var r runtime.Resources
	if pr, ok := scheduler.PlanResources(plan); ok {
		r.CPU, r.Memory = pr.CPU.String(), pr.Memory.String()
	}
	if app.Spec.Resources != nil {
		if app.Spec.Resources.CPU != nil {
			r.CPU = app.Spec.Resources.CPU.String()
		}
		if app.Spec.Resources.Memory != nil {
			r.Memory = app.Spec.Resources.Memory.String()
		}
	}
	return r
}

// imageEnv is the unpacked image's environment, with the platform's binary
// directory (bex-static) on PATH: what a driver that runs the unpacked
// directory starts from.
func (p *Pipeline) imageEnv(img build.ImageConfig) map[string]string {
	env := envMap(img.Env)
	if p.opts.BinDir != "" {
		if env["PATH"] == "" {
			env["PATH"] = os.Getenv("PATH")
		}
		env["PATH"] = env["PATH"] + string(os.PathListSeparator) + p.opts.BinDir
	}
	return env
}

// envMap turns KEY=value pairs into a map; a later pair wins.
func envMap(kvs []string) map[string]string {
	env := map[string]string{}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// environment is the release config, with secrets read from the tenant's
// namespace: what the platform sets on top of the image.
func (p *Pipeline) environment(ctx context.Context, namespace string, config map[string]store.ConfigValue) (map[string]string, error) {
	env := map[string]string{}
	for name, v := range config {
		switch {
		case v.Value != nil:
			env[name] = *v.Value
		case v.SecretKeyRef != nil:
			var sec corev1.Secret
			if err := p.opts.Kube.Get(ctx, types.NamespacedName{Namespace: namespace, Name: v.SecretKeyRef.Name}, &sec); err != nil {
				return nil, fmt.Errorf("reading secret %s for %s: %w", v.SecretKeyRef.Name, name, err)
			}
			val, ok := sec.Data[v.SecretKeyRef.Key]
			if !ok {
				return nil, fmt.Errorf("secret %s has no key %s (for %s)", v.SecretKeyRef.Name, v.SecretKeyRef.Key, name)
			}
			env[name] = string(val)
		}
	}
	return env, nil
}

func (p *Pipeline) app(ctx context.Context, tenant, name string) (*platformv1alpha1.App, error) {
	app := &platformv1alpha1.App{}
	if err := p.opts.Kube.Get(ctx, types.NamespacedName{Namespace: tenant, Name: name}, app); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("app %s does not exist: create it with `bex apps create %s`", name, name)
		}
		return nil, fmt.Errorf("reading app %s: %w", name, err)
	}
	return app, nil
}

func (p *Pipeline) latestNumber(ctx context.Context, tenantID, app string) (int, error) {
	rel, err := p.opts.Store.LatestRelease(ctx, tenantID, app)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the latest release: %w", err)
	}
	return rel.Number, nil
}

func (p *Pipeline) setCurrent(ctx context.Context, app *platformv1alpha1.App, number int, url string) error {
	base := app.DeepCopy()
	app.Status.CurrentRelease = int64(number)
	app.Status.URL = url
	if err := p.opts.Kube.Status().Patch(ctx, app, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("recording release v%d on the app: %w", number, err)
	}
	return nil
}

// finishPatience is how long finish waits for a database that is out of
// reach (restarting) before it leaves the build running.
const finishPatience = 2 * time.Minute

func (p *Pipeline) finish(buildID string, res store.BuildResult) {
	// The build's outcome is recorded even when the push was cancelled, and
	// through a database restart: a build left running would say so
	// forever.
	deadline := time.Now().Add(finishPatience)
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.opts.Store.FinishBuild(ctx, buildID, res)
		cancel()
		if err == nil {
			return
		}
		if !store.Unavailable(err) || time.Now().Add(wait).After(deadline) {
			p.opts.Log.Error(err, "Recording build result", "build", buildID)
			return
		}
		p.opts.Log.Info("Database unavailable; recording the build result again", "build", buildID, "in", wait)
		time.Sleep(wait)
	}
}

// configOf snapshots the App's env as release config.
func configOf(app *platformv1alpha1.App) map[string]store.ConfigValue {
	config := map[string]store.ConfigValue{}
	for _, e := range app.Spec.Env {
		switch {
		case e.Value != nil:
			v := *e.Value
			config[e.Name] = store.ConfigValue{Value: &v}
		case e.SecretKeyRef != nil:
			config[e.Name] = store.ConfigValue{SecretKeyRef: &store.SecretRef{Name: e.SecretKeyRef.Name, Key: e.SecretKeyRef.Key}}
		}
	}
	return config
}

// processes combines the image's commands with the App's overrides. As on
// Heroku, web runs one instance unless told otherwise and other types none.
// An image with its own root filesystem and no process labels (a Dockerfile
// build without a Procfile) runs its ENTRYPOINT and CMD as the web process,
// as they are, with no shell: the image may have none.
func processes(app *platformv1alpha1.App, img build.ImageConfig) map[string]runtime.Process {
	out := map[string]runtime.Process{}
	for name, cmd := range img.Processes {
		out[name] = runtime.Process{Command: cmd}
	}
	if args := img.Args(); img.RootFS && len(out) == 0 && len(args) > 0 {
		out[runtime.WebProcess] = runtime.Process{Args: args}
	}
	for name, p := range out {
		if name == runtime.WebProcess {
			p.Replicas = 1
			out[name] = p
		}
	}
	for _, pr := range app.Spec.Processes {
		p := out[pr.Name]
		if pr.Command != "" {
			p.Command, p.Args = pr.Command, nil
		}
		if pr.Replicas != nil {
			p.Replicas = int(*pr.Replicas)
		}
		out[pr.Name] = p
	}
	return out
}

func healthCheck(app *platformv1alpha1.App) runtime.HealthCheck {
	hc := app.Spec.HealthCheck
	if hc == nil {
		return runtime.HealthCheck{}
	}
	out := runtime.HealthCheck{
		Path:             hc.Path,
		Timeout:          time.Duration(hc.TimeoutSeconds) * time.Second,
		Interval:         time.Duration(hc.IntervalSeconds) * time.Second,
		SuccessThreshold: int(hc.SuccessThreshold),
		FailureThreshold: int(hc.FailureThreshold),
	}
	if hc.Port != nil {
		out.Port = int(*hc.Port)
	}
	return out
}

func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}

// logWriter appends a build's output to the store line by line.
type logWriter struct {
	ctx     context.Context
	store   *store.Store
	buildID string
	pw      *io.PipeWriter
	done    chan struct{}
}

func newLogWriter(ctx context.Context, st *store.Store, buildID string) *logWriter {
	pr, pw := io.Pipe()
	w := &logWriter{ctx: context.WithoutCancel(ctx), store: st, buildID: buildID, pw: pw, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		// A line longer than the store keeps is cut there (the store says
		// so on the line) and the rest of it skipped, so that one long line
		// does not end the log.
		br := bufio.NewReaderSize(pr, 64<<10)
		for {
			line, err := readLine(br, store.MaxBuildLogLineBytes+1)
			if line != "" || err == nil {
				_ = st.AppendBuildLog(w.ctx, buildID, line)
			}
			if err != nil {
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return w
}

// readLine reads one line from br, keeping at most max bytes of it and
// skipping the rest. The error is br's (io.EOF after a last line without a
// newline).
func readLine(br *bufio.Reader, max int) (string, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if room := max - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return strings.TrimRight(string(line), "\r\n"), err
	}
}

func (w *logWriter) Write(b []byte) (int, error) { return w.pw.Write(b) }

// Close flushes the lines written so far into the store.
func (w *logWriter) Close() {
	w.pw.Close()
	<-w.done
}

// rolloutFailedPrefix starts the error of a build whose release never
// became healthy.
const rolloutFailedPrefix = "release failed: "

// LastBuild reports the outcome of the app's newest build.
func (p *Pipeline) LastBuild(ctx context.Context, tenantName, appName string) (appctrl.LastBuild, error) {
	tenant, err := p.opts.Store.GetTenantByName(ctx, tenantName)
	if errors.Is(err, store.ErrNotFound) {
		return appctrl.LastBuild{}, nil
	}
	if err != nil {
		return appctrl.LastBuild{}, fmt.Errorf("looking up tenant %s: %w", tenantName, err)
	}
	builds, err := p.opts.Store.ListBuilds(ctx, tenant.ID, appName, 1)
	if err != nil || len(builds) == 0 {
		return appctrl.LastBuild{}, err
	}
	b := builds[0]
	lb := appctrl.LastBuild{Number: b.Number, Failed: b.Status == store.BuildFailed}
	if lb.Failed {
		lb.Message, lb.Rollout = strings.CutPrefix(b.Error, rolloutFailedPrefix)
	}
	return lb, nil
}

// Health reports whether the runtime serves the app's current release.
func (p *Pipeline) Health(ctx context.Context, tenant, app string) (bool, string, error) {
	st, err := p.opts.Runtime.Status(ctx, tenant, app)
	if err != nil {
		return false, "", err
	}
	return st.Ready, st.Message, nil
}
