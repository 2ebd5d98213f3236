package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/apiserver/scheduler"
	"bex.co/bex/builder/build"
	"bex.co/bex/builder/gitserver"
	appctrl "bex.co/bex/controllers/app"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/steptime"
	"bex.co/bex/internal/store"
)

// Options configure a Releaser.
type Options struct {
	Store   *store.Store
	Kube    client.Client
	Runtime runtime.Driver
	// Keychain is the credentials presented to the registry to read a
	// release's image and delete pruned ones (build.Keychain for the
	// platform registry); nil means the docker configuration's
	// (authn.DefaultKeychain).
	Keychain authn.Keychain
	// ReleasesDir holds unpacked images for the process runtime:
	// <ReleasesDir>/<tenant>/<app>/v<N>.
	ReleasesDir string
	// BinDir is added to every app's PATH (bex-static lives there).
	BinDir string
	// URL returns an app's public URL.
	URL func(tenant, app string) string
	// ReleaseRetention is how many releases of an app keep their artifacts
	// (their directory under ReleasesDir, their image): after a release
	// goes live, those of the app's releases older than the newest
	// ReleaseRetention, except the one that serves, are pruned and cannot
	// be rolled back to. 0 means DefaultReleaseRetention; it may not be
	// negative.
	ReleaseRetention int
	// FollowPlacement says that Runtime runs each app on the cluster the
	// scheduler placed it on (placed.Driver): a release goes out only once
	// the App is placed, onto its status.cluster, and an app that runs on
	// another cluster than that is rolled out there again (a move).
	FollowPlacement bool
	// Fits, when set, is asked before a scale or a change of plan or
	// resources whether the fleet has room for the App at its new size; a
	// size no cluster can hold is refused (store.ErrInvalid) and changes
	// nothing. Nil checks nothing.
	Fits appctrl.Fitter
	// ReleasePhaseTimeout bounds the release phase of a release (the
	// Procfile's release process); 0 means DefaultReleasePhaseTimeout.
	ReleasePhaseTimeout time.Duration
	// Quotas give each tenant's instances, cpu and memory quotas, which a
	// deploy that runs more of an app than it ran is checked against; nil
	// means quota.NewDefaults(). Every process that releases must be given the
	// same (the flags --quota-*).
	Quotas *quota.Defaults
	// Metrics receives bex_releases_total (docs/metrics.md); nil counts
	// releases without serving the count.
	Metrics prometheus.Registerer
	Log     logr.Logger
}

// placementPatience bounds the wait of a release for the App controller to
// place an App it has not placed yet (an App created just before its first
// push).
const placementPatience = 30 * time.Second

// DefaultReleaseRetention is how many releases of an app the platform keeps
// when the operator does not say.
const DefaultReleaseRetention = 20

// Releaser rolls releases out and back, and keeps them running.
type Releaser struct {
	opts     Options
	releases *prometheus.CounterVec
	mu       sync.Mutex
	locks    map[string]*sync.Mutex
}

var (
	_ appctrl.Releases      = (*Releaser)(nil)
	_ appctrl.HealthWatcher = (*Releaser)(nil)
)

// New checks the options.
func New(opts Options) (*Releaser, error) {
	switch {
	case opts.Store == nil:
		return nil, errors.New("releaser: Store is nil")
	case opts.Kube == nil:
		return nil, errors.New("releaser: Kube is nil")
	case opts.Runtime == nil:
		return nil, errors.New("releaser: Runtime is nil")
	case opts.ReleasesDir == "":
		return nil, errors.New("releaser: ReleasesDir is empty")
	case opts.URL == nil:
		return nil, errors.New("releaser: URL is nil")
	}
	if opts.ReleaseRetention < 0 {
		return nil, fmt.Errorf("releaser: ReleaseRetention %d is negative", opts.ReleaseRetention)
	}
	if opts.ReleaseRetention == 0 {
		opts.ReleaseRetention = DefaultReleaseRetention
	}
	if opts.ReleasePhaseTimeout < 0 {
		return nil, fmt.Errorf("releaser: ReleasePhaseTimeout %s is negative", opts.ReleasePhaseTimeout)
	}
	if opts.ReleasePhaseTimeout == 0 {
		opts.ReleasePhaseTimeout = DefaultReleasePhaseTimeout
	}
	if opts.Keychain == nil {
		opts.Keychain = authn.DefaultKeychain
	}
	if opts.Quotas == nil {
		opts.Quotas = quota.NewDefaults()
	}
	releases := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bex_releases_total",
		Help: "Releases recorded, by kind: deploy (a push), config (an environment change), rollback.",
	}, []string{"kind"})
	if opts.Metrics != nil {
		if err := opts.Metrics.Register(releases); err != nil {
			return nil, fmt.Errorf("releaser: registering its metrics: %w", err)
		}
	}
	return &Releaser{opts: opts, releases: releases, locks: map[string]*sync.Mutex{}}, nil
}

// CountRelease counts a release that was recorded, by its kind: the kind
// label of bex_releases_total.
func (r *Releaser) CountRelease(rel store.Release) {
	r.releases.WithLabelValues(string(rel.Kind)).Inc()
}

// Store is the store releases are recorded in.
func (r *Releaser) Store() *store.Store { return r.opts.Store }

// URL is the app's public URL.
func (r *Releaser) URL(tenant, app string) string { return r.opts.URL(tenant, app) }

// Lock serialises work on one app: first among this process's goroutines,
// then, through the store's app lock, among every process on the database
// (a rollback in the web API waits for a push's deploy in the git receiver).
func (p *Releaser) Lock(ctx context.Context, tenant, app string) (unlock func(), err error) {
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

// locked takes the app's lock (Lock) and reads its tenant and App: what
// every change of a release starts with. The caller unlocks.
func (p *Releaser) locked(ctx context.Context, tenantName, appName string) (func(), store.Tenant, *platformv1alpha1.App, error) {
	unlock, err := p.Lock(ctx, tenantName, appName)
	if err != nil {
		return nil, store.Tenant{}, nil, err
	}
	tenant, err := p.opts.Store.GetTenantByName(ctx, tenantName)
	if err != nil {
		unlock()
		return nil, store.Tenant{}, nil, fmt.Errorf("looking up tenant %s: %w", tenantName, err)
	}
	app, err := p.App(ctx, tenantName, appName)
	if err != nil {
		unlock()
		return nil, store.Tenant{}, nil, err
	}
	return unlock, tenant, app, nil
}

// Rollback rolls release `to` out again as a new release. A rollout that
// fails is recorded as a failed release (RecordFailed) and the error is a
// *runtime.NotDeployedError: the current release keeps serving.
func (p *Releaser) Rollback(ctx context.Context, tenantName, appName string, to int, actor string) (int, error) {
	unlock, tenant, app, err := p.locked(ctx, tenantName, appName)
	if err != nil {
		return 0, err
	}
	defer unlock()
	target, err := p.opts.Store.RunnableRelease(ctx, tenant.ID, appName, to)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("release v%d: %w", to, err)
	}
	if err != nil {
		return 0, err
	}
	latest, err := p.LatestNumber(ctx, tenant.ID, appName)
	if err != nil {
		return 0, err
	}
	if err := p.Rollout(ctx, app, latest+1, target.Image, target.Config, io.Discard); err != nil {
		_ = p.RecordFailed(ctx, app, latest+1, store.RollbackRelease(target, actor, err.Error()))
		return 0, &runtime.NotDeployedError{Err: fmt.Errorf("rolling back to v%d failed (release v%d), the current release keeps serving: %w", to, latest+1, err)}
	}
	rel, err := p.opts.Store.CreateRollbackRelease(ctx, tenant.ID, appName, to, actor)
	if err != nil {
		return 0, fmt.Errorf("recording the rollback: %w", err)
	}
	p.CountRelease(rel)
	env := app.Spec.Env
	if err := p.SetCurrent(ctx, app, rel.Number, p.opts.URL(tenantName, appName)); err != nil {
		return 0, err
	}
	p.Prune(ctx, tenant.ID, app, io.Discard)
	if err := p.restoreEnv(ctx, app, env, target.Config); err != nil {
		return rel.Number, fmt.Errorf("v%d runs v%d's image and variables, but the app's environment still holds the variables rolled back from, which the next push would bring back: %w; set them with bex env", rel.Number, to, err)
	}
	return rel.Number, nil
}

// restoreEnv gives the App the variables of config, those of the release
// a rollback went back to, as a Heroku rollback restores config vars: the
// next push or config release then keeps them instead of bringing back
// the values rolled back from. before is spec.env as the rollback read
// it: an App whose env changed since (an env set that waits for the lock
// to release it) keeps that newer change.
func (p *Releaser) restoreEnv(ctx context.Context, app *platformv1alpha1.App, before []platformv1alpha1.EnvVar, config map[string]store.ConfigValue) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var cur platformv1alpha1.App
		if err := p.opts.Kube.Get(ctx, client.ObjectKeyFromObject(app), &cur); err != nil {
			return err
		}
		env := envOf(cur.Spec.Env, config)
		if !equality.Semantic.DeepEqual(cur.Spec.Env, before) || equality.Semantic.DeepEqual(cur.Spec.Env, env) {
			return nil
		}
		cur.Spec.Env = env
		return p.opts.Kube.Update(ctx, &cur)
	})
}

// envOf is the spec.env that holds the variables of config, a release's:
// the variables of env that config has keep their place, the others go,
// and config's variables that env lacks come after, by name.
func envOf(env []platformv1alpha1.EnvVar, config map[string]store.ConfigValue) []platformv1alpha1.EnvVar {
	var out []platformv1alpha1.EnvVar
	seen := map[string]bool{}
	add := func(name string) {
		v, ok := config[name]
		if !ok || seen[name] {
			return
		}
		seen[name] = true
		e := platformv1alpha1.EnvVar{Name: name}
		switch {
		case v.Value != nil:
			e.Value = ptr.To(*v.Value)
		case v.SecretKeyRef != nil:
			e.SecretKeyRef = &platformv1alpha1.SecretKeySelector{Name: v.SecretKeyRef.Name, Key: v.SecretKeyRef.Key}
		default:
			return
		}
		out = append(out, e)
	}
	for _, e := range env {
		add(e.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(config)) {
		add(name)
	}
	return out
}

// ReleaseConfig rolls the image of the app's current release out again as
// a new release with the App's environment as it is now (spec.env, read
// under the app's lock, secrets as references), described description
// ("Set FOO, BAR": names only, never values), and makes it current. It
// returns 0 and changes nothing when the app has no release yet: its first
// push takes the environment. A rollout that fails leaves the current
// release serving and records a failed release (RecordFailed), and the
// error is a *runtime.NotDeployedError that says why.
func (p *Releaser) ReleaseConfig(ctx context.Context, tenantName, appName, description, actor string) (int, error) {
	unlock, tenant, app, err := p.locked(ctx, tenantName, appName)
	if err != nil {
		return 0, err
	}
	defer unlock()
	base, err := p.opts.Store.CurrentRelease(ctx, tenant.ID, appName, int(app.Status.CurrentRelease))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the current release: %w", err)
	}
	if err := base.Runnable(); err != nil {
		return 0, err
	}
	latest, err := p.LatestNumber(ctx, tenant.ID, appName)
	if err != nil {
		return 0, err
	}
	config := ConfigOf(app)
	number := latest + 1
	if err := p.Rollout(ctx, app, number, base.Image, config, io.Discard); err != nil {
		_ = p.RecordFailed(ctx, app, number, store.NewRelease{
			TenantID: tenant.ID, App: appName, Kind: store.ReleaseKindConfig, BuildID: base.BuildID, Image: base.Image,
			Config: config, Description: description, CreatedBy: actor, Failure: err.Error(),
		})
		return 0, &runtime.NotDeployedError{Err: fmt.Errorf("release v%d did not go out, v%d keeps serving: %w", number, base.Number, err)}
	}
	rel, err := p.opts.Store.CreateRelease(ctx, store.NewRelease{
		TenantID: tenant.ID, App: appName, Kind: store.ReleaseKindConfig, BuildID: base.BuildID, Image: base.Image,
		Config: config, Description: description, CreatedBy: actor,
	})
	if err != nil {
		return 0, fmt.Errorf("recording release v%d: %w", number, err)
	}
	p.CountRelease(rel)
	if err := p.SetCurrent(ctx, app, rel.Number, p.opts.URL(tenantName, appName)); err != nil {
		return 0, err
	}
	p.Prune(ctx, tenant.ID, app, io.Discard)
	return rel.Number, nil
}

// Restart replaces the running instances of the app's current release
// with new ones, of process or, when process is "", of every process that
// runs instances: the runtime rolls them as it rolls a release out (a web
// instance gets traffic once healthy, the old one stops after), and leaves
// the other processes' instances alone. No release is recorded; secrets
// are read again. It returns the release and the processes restarted. A
// process the release does not have, or runs no instance of, is an error
// that wraps store.ErrInvalid and changes nothing; a restart whose new
// instances never become healthy leaves the old ones serving and returns
// a *runtime.NotDeployedError.
func (p *Releaser) Restart(ctx context.Context, tenantName, appName, process string) (int, []string, error) {
	unlock, tenant, app, err := p.locked(ctx, tenantName, appName)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	if app.Status.CurrentRelease == 0 {
		return 0, nil, fmt.Errorf("app %s has no release to restart yet: push to its git remote first", appName)
	}
	if app.Spec.Suspended {
		return 0, nil, &runtime.NotDeployedError{Err: fmt.Errorf("app %s is in maintenance mode and runs no instance: turn it off (bex apps set %s --maintenance off) to run its release again", appName, appName)}
	}
	cur, err := p.opts.Store.GetRelease(ctx, tenant.ID, appName, int(app.Status.CurrentRelease))
	if err != nil {
		return 0, nil, fmt.Errorf("release v%d: %w", app.Status.CurrentRelease, err)
	}
	rel, img, err := p.prepare(ctx, app, cur.Number, cur.Image, true)
	if err != nil {
		return 0, nil, &runtime.NotDeployedError{Err: fmt.Errorf("restarting v%d failed, its instances keep running: %w", cur.Number, err)}
	}
	procs, _ := withoutRelease(processes(app, img))
	restart, err := restartable(procs, process, appName, cur.Number)
	if err != nil {
		return 0, nil, err
	}
	token := time.Now().UTC().Format(time.RFC3339Nano)
	for _, name := range restart {
		pr := procs[name]
		pr.Restart = token
		procs[name] = pr
	}
	if err := p.deploy(ctx, app, rel, procs, cur.Config, io.Discard); err != nil {
		return 0, nil, &runtime.NotDeployedError{Err: fmt.Errorf("restarting %s of v%d failed, the old instances keep running: %w", strings.Join(restart, ", "), cur.Number, err)}
	}
	return cur.Number, restart, nil
}

// Scale sets how many instances of each process of counts the App runs
// and, when plan is not empty, its plan, and applies them at once to the
// current release: a process whose count changed gets instances added
// (web ones take traffic once healthy) or its last ones drained and
// stopped, and keeps the others; a new plan, which changes every
// instance's resources, rolls every process as a release does. No release
// is recorded: the App's spec keeps the counts and the plan, so that the
// next push, rollback or restart runs them. It returns the release scaled
// (0 when the app has none yet: then the spec alone changes, and its first
// push takes the counts) and the instance count of each of its processes.
// A process the release does not have, or a size no cluster of the fleet
// can hold (Options.Fits), is an error wrapping store.ErrInvalid, and a
// scale that does not go out a
// *runtime.NotDeployedError; either leaves the App's spec and its
// instances as they were.
func (p *Releaser) Scale(ctx context.Context, tenantName, appName string, counts map[string]int, plan string) (int, map[string]int, error) {
	if _, ok := counts[ReleaseProcess]; ok {
		return 0, nil, fmt.Errorf("%w process %s: the release phase runs once per release, before the release takes traffic; it has no instances to scale", store.ErrInvalid, ReleaseProcess)
	}
	unlock, tenant, app, err := p.locked(ctx, tenantName, appName)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	want := scaled(app, counts, plan)
	if err := p.fits(ctx, want); err != nil {
		return 0, nil, err
	}
	if app.Status.CurrentRelease == 0 {
		if err := p.opts.Kube.Patch(ctx, want, client.MergeFrom(app)); err != nil {
			return 0, nil, fmt.Errorf("storing the scale of %s: %w", appName, err)
		}
		formation := map[string]int{}
		for _, pr := range want.Spec.Processes {
			if pr.Replicas != nil {
				formation[pr.Name] = int(*pr.Replicas)
			}
		}
		return 0, formation, nil
	}
	cur, err := p.opts.Store.GetRelease(ctx, tenant.ID, appName, int(app.Status.CurrentRelease))
	if err != nil {
		return 0, nil, fmt.Errorf("release v%d: %w", app.Status.CurrentRelease, err)
	}
	rel, img, err := p.prepare(ctx, want, cur.Number, cur.Image, true)
	if err != nil {
		return 0, nil, &runtime.NotDeployedError{Err: fmt.Errorf("scaling v%d failed, its instances keep running: %w", cur.Number, err)}
	}
	procs, _ := withoutRelease(processes(want, img))
	known, _ := withoutRelease(processes(app, img))
	if err := knownProcesses(known, procs, cur.Number, appName); err != nil {
		return 0, nil, err
	}
	if err := p.deploy(ctx, want, rel, procs, cur.Config, io.Discard); err != nil {
		return 0, nil, &runtime.NotDeployedError{Err: fmt.Errorf("scaling v%d failed, what ran keeps running: %w", cur.Number, err)}
	}
	if err := p.opts.Kube.Patch(ctx, want, client.MergeFrom(app)); err != nil {
		return 0, nil, fmt.Errorf("storing the scale of %s (it runs already): %w", appName, err)
	}
	formation := map[string]int{}
	for name, pr := range procs {
		formation[name] = pr.Replicas
	}
	return cur.Number, formation, nil
}

// fits returns an error wrapping store.ErrInvalid when the fleet has no
// room for want, the App at the size it is to have (Options.Fits).
func (p *Releaser) fits(ctx context.Context, want *platformv1alpha1.App) error {
	if p.opts.Fits == nil {
		return nil
	}
	why, err := p.opts.Fits.Fits(ctx, want)
	if err != nil {
		return fmt.Errorf("checking the fleet's room for %s: %w", want.Name, err)
	}
	if why != "" {
		return fmt.Errorf("%w size: %s; ask for fewer instances or a smaller plan, or ask the platform's operator for room", store.ErrInvalid, why)
	}
	return nil
}

// knownProcesses returns an error wrapping store.ErrInvalid that names
// the processes of want that known, those of release number of app, lacks;
// nil when it has them all.
func knownProcesses(known, want map[string]runtime.Process, number int, app string) error {
	var unknown []string
	for name := range want {
		if _, ok := known[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("%w process %s: release v%d of %s has %s", store.ErrInvalid, strings.Join(unknown, ", "), number, app, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
}

// scaled returns a copy of app whose spec runs counts instances of its
// processes, and plan when it is not empty.
func scaled(app *platformv1alpha1.App, counts map[string]int, plan string) *platformv1alpha1.App {
	want := app.DeepCopy()
	if plan != "" {
		want.Spec.Plan = platformv1alpha1.Plan(plan)
	}
	names := slices.Sorted(maps.Keys(counts))
	for _, name := range names {
		n := int32(counts[name])
		i := slices.IndexFunc(want.Spec.Processes, func(pr platformv1alpha1.Process) bool { return pr.Name == name })
		if i < 0 {
			want.Spec.Processes = append(want.Spec.Processes, platformv1alpha1.Process{Name: name})
			i = len(want.Spec.Processes) - 1
		}
		want.Spec.Processes[i].Replicas = &n
	}
	return want
}

// restartable returns the processes of procs a restart of process ("" for
// all) restarts: those that run instances.
func restartable(procs map[string]runtime.Process, process, app string, number int) ([]string, error) {
	var names, running []string
	for name, pr := range procs {
		names = append(names, name)
		if pr.Replicas > 0 {
			running = append(running, name)
		}
	}
	slices.Sort(names)
	slices.Sort(running)
	pr, ok := procs[process]
	switch {
	case process == "" && len(running) == 0:
		return nil, fmt.Errorf("%w restart: release v%d of %s runs no instance", store.ErrInvalid, number, app)
	case process == "":
		return running, nil
	case !ok:
		return nil, fmt.Errorf("%w process %q: release v%d of %s has %s", store.ErrInvalid, process, number, app, strings.Join(names, ", "))
	case pr.Replicas == 0:
		return nil, fmt.Errorf("%w process %q: release v%d of %s runs no instance of it", store.ErrInvalid, process, number, app)
	}
	return []string{process}, nil
}

// EnsureRunning makes the runtime run the App's current release, rolling it
// out again when the runtime does not (after a restart of the platform).
//
// app may be stale: a deploy or rollback that held the app's lock may have
// made a newer release current since it was read. So once it holds the lock,
// EnsureRunning reads the App and the runtime again and acts on what it
// finds then, never on the release app names.
//
// An App in maintenance mode (spec.suspended) runs nothing: EnsureRunning
// hands its release to the runtime again with no instance when the
// runtime still runs some (maintenance set on the App by hand), and does
// nothing when it runs none.
func (p *Releaser) EnsureRunning(ctx context.Context, app *platformv1alpha1.App) error {
	if app.Spec.Suspended {
		return p.ensureStopped(ctx, app)
	}
	if app.Status.CurrentRelease == 0 || p.running(ctx, app) {
		return nil
	}
	unlock, err := p.Lock(ctx, app.Namespace, app.Name)
	if err != nil {
		return err
	}
	defer unlock()
	app, err = p.App(ctx, app.Namespace, app.Name)
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
	// The release phase ran when the release went out, and its instances
	// passed the quota then; neither again.
	return p.rollout(ctx, app, rel.Number, rel.Image, rel.Config, io.Discard, false)
}

// ensureStopped stops the instances the runtime still runs of an App in
// maintenance mode, keeping its release there.
func (p *Releaser) ensureStopped(ctx context.Context, app *platformv1alpha1.App) error {
	if st, err := p.opts.Runtime.Status(ctx, app.Namespace, app.Name); err != nil || len(st.Instances) == 0 {
		return nil
	}
	unlock, tenant, app, err := p.locked(ctx, app.Namespace, app.Name)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := p.opts.Runtime.Status(ctx, app.Namespace, app.Name)
	if !app.Spec.Suspended || err != nil || len(st.Instances) == 0 || st.Release == 0 {
		return nil
	}
	rel, err := p.opts.Store.GetRelease(ctx, tenant.ID, app.Name, st.Release)
	if err != nil {
		return fmt.Errorf("release v%d: %w", st.Release, err)
	}
	r, img, err := p.prepare(ctx, app, rel.Number, rel.Image, true)
	if err != nil {
		return err
	}
	procs, _ := withoutRelease(processes(app, img))
	return p.deploy(ctx, app, r, procs, rel.Config, io.Discard)
}

// running reports whether the runtime serves the App's current release.
func (p *Releaser) running(ctx context.Context, app *platformv1alpha1.App) bool {
	st, err := p.opts.Runtime.Status(ctx, app.Namespace, app.Name)
	if err != nil || st.Release != int(app.Status.CurrentRelease) || len(st.Instances) == 0 {
		return false
	}
	return !p.opts.FollowPlacement || app.Status.Cluster == "" || st.Cluster == app.Status.Cluster
}

// placement returns the cluster the App is placed on, waiting a little
// for the App controller to place a new App; an App that fits no cluster
// gets the scheduler's explanation.
func (p *Releaser) placement(ctx context.Context, app *platformv1alpha1.App) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, placementPatience)
	defer cancel()
	for {
		cond := meta.FindStatusCondition(app.Status.Conditions, platformv1alpha1.AppPlacedCondition)
		switch {
		case cond != nil && cond.Status == metav1.ConditionTrue && app.Status.Cluster != "":
			return app.Status.Cluster, nil
		case cond != nil && cond.Status == metav1.ConditionFalse:
			return "", fmt.Errorf("app %s fits no cluster of the fleet: %s", app.Name, cond.Message)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("app %s is not placed on a cluster yet; push again in a minute", app.Name)
		case <-time.After(200 * time.Millisecond):
		}
		fresh, err := p.App(ctx, app.Namespace, app.Name)
		if err != nil {
			return "", err
		}
		app = fresh
	}
}

// Remove stops everything the runtime runs for the app.
func (p *Releaser) Remove(ctx context.Context, tenant, app string) error {
	unlock, err := p.Lock(ctx, tenant, app)
	if err != nil {
		return err
	}
	defer unlock()
	if err := p.opts.Runtime.Remove(ctx, tenant, app); err != nil {
		return err
	}
	if err := p.opts.Store.ClearAppInstances(ctx, tenant, app); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(p.opts.ReleasesDir, tenant, app))
}

// releaseDir is where release number of app is unpacked.
func (p *Releaser) releaseDir(app *platformv1alpha1.App, number int) string {
	return filepath.Join(p.opts.ReleasesDir, app.Namespace, app.Name, fmt.Sprintf("v%d", number))
}

// prunePatience bounds the deletion of pruned releases' artifacts.
const prunePatience = 2 * time.Minute

// Prune marks the app's releases past the retention pruned (the newest
// ReleaseRetention and the one app says serves are kept) and deletes what
// the app has to delete: the pruned releases' directories, the images no
// kept release runs, and the images of builds that were never released
// (a deploy records each build's image before its release), these and those
// of earlier prunes whose deletion failed. It runs once a release is live and under the app's
// lock; the release stays live whatever happens here. A release is marked
// pruned first, so that nothing rolls back to a half-deleted one; a
// failed deletion is logged, kept with its error, and tried again at the
// next prune.
func (p *Releaser) Prune(ctx context.Context, tenantID string, app *platformv1alpha1.App, out io.Writer) {
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
		// A failed release goes at the first prune, not by the retention:
		// the push says which rule took each.
		var numbers, past, failed []string
		for _, r := range pruned.Releases {
			v := fmt.Sprintf("v%d", r.Number)
			numbers = append(numbers, v)
			if r.Status == store.ReleaseFailed {
				failed = append(failed, v)
			} else {
				past = append(past, v)
			}
		}
		log.Info("Pruned releases", "releases", numbers, "images", len(pruned.Images), "retention", p.opts.ReleaseRetention)
		if len(past) > 0 {
			fmt.Fprintf(out, "-----> Pruned %s: %s\n", strings.Join(past, ", "), store.RetentionRule(p.opts.ReleaseRetention))
		}
		if len(failed) > 0 {
			fmt.Fprintf(out, "-----> Pruned %s: a failed release never runs, so the platform keeps only its record\n", strings.Join(failed, ", "))
		}
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
			err = deleteImage(ctx, d.Target, p.opts.Keychain)
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

// Rollout unpacks image (unless the runtime runs it from the registry),
// runs its release phase when it has one (the release process, in a
// fresh instance of the new release, its output to out) and hands the
// release to the runtime, on the cluster the App is placed on. A release
// phase that fails, or does not end within ReleasePhaseTimeout, stops the
// rollout: what serves keeps serving, and the error says why.
func (p *Releaser) Rollout(ctx context.Context, app *platformv1alpha1.App, number int, image string, config map[string]store.ConfigValue, out io.Writer) error {
	return p.rollout(ctx, app, number, image, config, out, true)
}

// rollout is Rollout, with the release phase and the instances quota only
// when fresh is set: without, the release runs again as it ran.
func (p *Releaser) rollout(ctx context.Context, app *platformv1alpha1.App, number int, image string, config map[string]store.ConfigValue, out io.Writer, fresh bool) error {
	rel, img, err := p.prepare(ctx, app, number, image, false)
	if err != nil {
		return err
	}
	procs, command := withoutRelease(processes(app, img))
	rel, err = p.complete(ctx, app, rel, procs, config)
	if err != nil {
		return err
	}
	if fresh && command != "" {
		stop := steptime.Start(ctx, "release phase")
		err := p.releasePhase(ctx, rel, command, out)
		stop()
		if err != nil {
			return err
		}
	}
	return p.counted(ctx, rel, out, fresh)
}

// prepare returns release number of the App, on the cluster the App is
// placed on, with its image unpacked unless the runtime runs it from the
// registry, and the image's configuration. With again, a release directory
// that is there already is taken as it is: its release runs from it.
func (p *Releaser) prepare(ctx context.Context, app *platformv1alpha1.App, number int, image string, again bool) (runtime.Release, build.ImageConfig, error) {
	rel := runtime.Release{Tenant: app.Namespace, App: app.Name, Number: number, Image: image}
	if p.opts.FollowPlacement {
		stop := steptime.Start(ctx, "placement")
		cluster, err := p.placement(ctx, app)
		stop()
		if err != nil {
			return rel, build.ImageConfig{}, err
		}
		rel.Cluster = cluster
	}
	if ir, ok := p.opts.Runtime.(runtime.ImageRunner); ok && ir.RunsImage(rel) {
		// The runtime pulls the image itself: only its config is read.
		stop := steptime.Start(ctx, "image config")
		img, err := build.Inspect(ctx, image, p.opts.Keychain)
		stop()
		if err != nil {
			return rel, img, fmt.Errorf("reading %s: %w", image, err)
		}
		return p.withImage(rel, img), img, nil
	}
	defer steptime.Start(ctx, "unpack")()
	dir := p.releaseDir(app, number)
	if entries, err := os.ReadDir(dir); again && err == nil && len(entries) > 0 {
		img, err := build.InspectUnpacked(ctx, image, dir, p.opts.Keychain)
		if err != nil {
			return rel, img, fmt.Errorf("reading %s: %w", image, err)
		}
		rel.Dir = dir
		return p.withImage(rel, img), img, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return rel, build.ImageConfig{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return rel, build.ImageConfig{}, err
	}
	img, err := build.Unpack(ctx, image, dir, p.opts.Keychain)
	if err != nil {
		// What was unpacked goes: on a full disk it holds the room the
		// next release, or the serving one's restart, needs.
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			p.opts.Log.Error(rmErr, "Removing a release directory left half unpacked", "dir", dir)
		}
		if gitserver.DiskFull(err) {
			p.opts.Log.Error(err, "Disk full: release not unpacked", "app", klog.KObj(app), "release", number, "dir", filepath.Dir(dir))
			return rel, img, fmt.Errorf("the platform's disk is full: release v%d could not be unpacked; push again once the platform's operator has freed space", number)
		}
		return rel, img, fmt.Errorf("unpacking %s: %w", image, err)
	}
	rel.Dir = dir
	return p.withImage(rel, img), img, nil
}

// withImage completes rel, whose Dir is the directory img was unpacked
// into (none when the runtime runs the image), from img.
func (p *Releaser) withImage(rel runtime.Release, img build.ImageConfig) runtime.Release {
	switch {
	case rel.Dir == "":
	case img.RootFS:
		// An image with its own root filesystem (a Dockerfile build) runs
		// as it is, with its own paths and environment.
		rel.RootFS, rel.WorkDir, rel.ImageEnv, rel.Dir = rel.Dir, img.WorkingDir, envMap(img.Env), ""
	default:
		rel.Dir, rel.ImageEnv = img.WorkingDir, p.imageEnv(img)
	}
	return rel
}

// deploy completes rel with procs and what the App says, and hands it to
// the runtime.
func (p *Releaser) deploy(ctx context.Context, app *platformv1alpha1.App, rel runtime.Release, procs map[string]runtime.Process, config map[string]store.ConfigValue, out io.Writer) error {
	rel, err := p.complete(ctx, app, rel, procs, config)
	if err != nil {
		return err
	}
	return p.counted(ctx, rel, out, true)
}

// counted hands rel to the runtime, keeping the tenant's count of
// instances and of the CPU and memory they request: a release that runs
// more of an app than it ran (instances, or a bigger plan) is checked
// against the tenant's instances, cpu and memory quotas first when check
// is set, and counted before it goes out; one that runs less is counted
// once it went out. Without check (an app brought back as it ran) nothing
// is refused. A release refused by a quota does not reach the runtime:
// the error is a *store.QuotaError.
func (p *Releaser) counted(ctx context.Context, rel runtime.Release, out io.Writer, check bool) error {
	size, err := sizeOf(rel)
	if err != nil {
		return err
	}
	var limit *store.Quotas
	if check && size.Instances > 0 {
		tenant, err := p.opts.Store.GetTenantByName(ctx, rel.Tenant)
		if err != nil {
			return fmt.Errorf("looking up tenant %s: %w", rel.Tenant, err)
		}
		q, err := p.opts.Quotas.For(ctx, p.opts.Store, tenant.ID)
		if err != nil {
			return fmt.Errorf("reading the quotas of tenant %s: %w", rel.Tenant, err)
		}
		limit = &q
	}
	prev, err := p.opts.Store.ReserveInstances(ctx, rel.Tenant, rel.App, size, limit)
	if err != nil {
		return err
	}
	reserved := prev
	if !size.Within(prev) {
		reserved = prev.Max(size)
	}
	deployErr := p.opts.Runtime.Deploy(ctx, rel, out)
	count := size
	switch {
	case deployErr != nil && reserved != prev:
		// What ran keeps running.
		count = prev
	case deployErr != nil || reserved == size:
		return deployErr
	}
	if err := p.opts.Store.SetAppInstances(context.WithoutCancel(ctx), rel.Tenant, rel.App, count); err != nil {
		p.opts.Log.Error(err, "Recording the instances of an app", "tenant", rel.Tenant, "app", rel.App, "instances", count.Instances)
	}
	return deployErr
}

// sizeOf is what rel's instances take together: their count, and each
// one's CPU and memory (rel.Resources, none when empty) times it.
func sizeOf(rel runtime.Release) (store.AppSize, error) {
	var size store.AppSize
	for _, pr := range rel.Processes {
		size.Instances += pr.Replicas
	}
	n := int64(size.Instances)
	if rel.Resources.CPU != "" {
		q, err := resource.ParseQuantity(rel.Resources.CPU)
		if err != nil {
			return size, fmt.Errorf("the CPU of %s/%s's instances: %w", rel.Tenant, rel.App, err)
		}
		size.MilliCPU = n * q.MilliValue()
	}
	if rel.Resources.Memory != "" {
		q, err := resource.ParseQuantity(rel.Resources.Memory)
		if err != nil {
			return size, fmt.Errorf("the memory of %s/%s's instances: %w", rel.Tenant, rel.App, err)
		}
		size.MemoryBytes = n * q.Value()
	}
	return size, nil
}

// complete returns rel with procs, the environment of config (secrets
// read) and what the App says of its health check and resources.
func (p *Releaser) complete(ctx context.Context, app *platformv1alpha1.App, rel runtime.Release, procs map[string]runtime.Process, config map[string]store.ConfigValue) (runtime.Release, error) {
	env, err := p.environment(ctx, app.Namespace, config)
	if err != nil {
		return rel, err
	}
	if app.Spec.Suspended {
		// Maintenance mode: the release goes out with no instance, and
		// runs the App's counts once it ends.
		stopped := make(map[string]runtime.Process, len(procs))
		for name, pr := range procs {
			pr.Replicas = 0
			stopped[name] = pr
		}
		procs = stopped
	}
	rel.Env, rel.Processes, rel.HealthCheck = env, procs, healthCheck(app)
	rel.Resources = resourcesOf(app)
	return rel, nil
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
func (p *Releaser) imageEnv(img build.ImageConfig) map[string]string {
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
func (p *Releaser) environment(ctx context.Context, namespace string, config map[string]store.ConfigValue) (map[string]string, error) {
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

// App reads the tenant's App name; one that does not exist is an error
// that says how to create it.
func (p *Releaser) App(ctx context.Context, tenant, name string) (*platformv1alpha1.App, error) {
	app := &platformv1alpha1.App{}
	if err := p.opts.Kube.Get(ctx, types.NamespacedName{Namespace: tenant, Name: name}, app); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("app %s does not exist: create it with `bex apps create %s`", name, name)
		}
		return nil, fmt.Errorf("reading app %s: %w", name, err)
	}
	return app, nil
}

// recordFailedPatience is how long RecordFailed may take, even when the
// rollout's context is cancelled.
const recordFailedPatience = 10 * time.Second

// RecordFailed records nr, whose Failure says why its rollout failed, as
// failed release number of app: the number the rollout used, which the
// store gives it as long as the caller holds the app's lock. It logs what
// goes wrong and returns it, for the caller to say whether the release was
// recorded: the rollout's error stays what the caller answers.
func (p *Releaser) RecordFailed(ctx context.Context, app *platformv1alpha1.App, number int, nr store.NewRelease) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordFailedPatience)
	defer cancel()
	log := p.opts.Log.WithValues("app", klog.KObj(app), "release", number)
	rel, err := p.opts.Store.CreateRelease(ctx, nr)
	if err != nil {
		log.Error(err, "Recording a failed release")
		return err
	}
	if rel.Number != number {
		log.Info("Failed release recorded under another number than its rollout used", "recorded", rel.Number)
	}
	return nil
}

// LatestNumber is the number of the app's newest release, failed or not;
// 0 when it has none. The next release takes the number after it.
func (p *Releaser) LatestNumber(ctx context.Context, tenantID, app string) (int, error) {
	rel, err := p.opts.Store.GetRelease(ctx, tenantID, app, 0)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the latest release: %w", err)
	}
	return rel.Number, nil
}

// SetCurrent records release number as the App's current one, and url as
// its URL, in the App's status.
func (p *Releaser) SetCurrent(ctx context.Context, app *platformv1alpha1.App, number int, url string) error {
	return p.SetBuiltCurrent(ctx, app, 0, number, url)
}

// SetBuiltCurrent is SetCurrent for a release that build made: build is
// recorded as the App's newest build that ended (status.latestBuild) in
// the same write; 0 records none.
func (p *Releaser) SetBuiltCurrent(ctx context.Context, app *platformv1alpha1.App, build, number int, url string) error {
	base := app.DeepCopy()
	app.Status.CurrentRelease = int64(number)
	app.Status.URL = url
	if build > 0 {
		app.Status.LatestBuild = int64(build)
	}
	if err := p.opts.Kube.Status().Patch(ctx, app, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("recording release v%d on the app: %w", number, err)
	}
	return nil
}

// RecordBuild records build as the App's newest build that ended
// (status.latestBuild), for a build that made no release: the App
// controller, which watches the App, reads its outcome at once.
func (p *Releaser) RecordBuild(ctx context.Context, app *platformv1alpha1.App, build int) error {
	base := app.DeepCopy()
	app.Status.LatestBuild = int64(build)
	if err := p.opts.Kube.Status().Patch(ctx, app, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("recording build %d on the app: %w", build, err)
	}
	return nil
}

// ConfigOf snapshots the App's env as release config.
func ConfigOf(app *platformv1alpha1.App) map[string]store.ConfigValue {
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

// rolloutFailedPrefix starts the error of a build whose release never
// became healthy.
const rolloutFailedPrefix = "release failed: "

// RolloutFailed is the error recorded on a build whose release never became
// healthy: LastBuild tells it from a failed build.
func RolloutFailed(err error) string { return rolloutFailedPrefix + err.Error() }

// LastBuild reports the outcome of the app's newest build.
func (p *Releaser) LastBuild(ctx context.Context, tenantName, appName string) (appctrl.LastBuild, error) {
	b, err := p.opts.Store.LatestBuildOf(ctx, tenantName, appName)
	if errors.Is(err, store.ErrNotFound) {
		return appctrl.LastBuild{}, nil
	}
	if err != nil {
		return appctrl.LastBuild{}, err
	}
	lb := appctrl.LastBuild{Number: b.Number, Failed: b.Status == store.BuildFailed}
	if lb.Failed {
		lb.Message, lb.Rollout = strings.CutPrefix(b.Error, rolloutFailedPrefix)
	}
	return lb, nil
}

// Health reports whether the runtime serves the app's current release.
func (p *Releaser) Health(ctx context.Context, tenant, app string) (bool, string, error) {
	st, err := p.opts.Runtime.Status(ctx, tenant, app)
	if err != nil {
		return false, "", err
	}
	return st.Ready, st.Message, nil
}

// WatchHealth implements appctrl.HealthWatcher when the runtime tells of
// its apps' changes (runtime.Watcher); otherwise changed is never called.
func (p *Releaser) WatchHealth(ctx context.Context, changed func(tenant, app string)) {
	if w, ok := p.opts.Runtime.(runtime.Watcher); ok {
		w.Watch(ctx, changed)
	}
}

// WatchesHealth implements appctrl.HealthWatcher: whether the runtime
// tells of the app's changes.
func (p *Releaser) WatchesHealth(tenant, app string) bool {
	w, ok := p.opts.Runtime.(runtime.Watcher)
	return ok && w.Watches(tenant, app)
}
