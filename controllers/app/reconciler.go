package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// ControllerName names the App controller in logs and metrics.
const ControllerName = "app"

// secretRefIndex indexes Apps by the Secrets their env refers to.
const secretRefIndex = "spec.env.secretKeyRef.name"

// ResyncPeriod is how often a running App's runtime state is observed
// again when its runtime does not tell of its changes (HealthWatcher), or
// when the App does not serve.
const ResyncPeriod = 15 * time.Second

// watchedResync is how often an App whose runtime tells of its changes
// (HealthWatcher) is looked at again, when nothing else brings it back,
// while it serves or rests in maintenance: a safety net. Each App's wait
// is spread by up to a fifth more, so that Apps reconciled together (at a
// start) do not all come back together. A watched App that does not serve
// is looked at every ResyncPeriod, as its status may change with time
// alone (a crash loop ends once a process ran long enough).
const watchedResync = 5 * time.Minute

// placementResync is how often the placement of an App is looked at again
// when nothing else brings the App back and the controller does not watch
// the fleet's ClusterCapacities (capacityWatch: not established yet, or
// the scheduling API cannot be watched): the fleet's changes (a cordon, a
// deletion, a pool that shrank, room freed for an unschedulable App) then
// come with no event, and an App must move within about a minute. While
// the watch runs, a placement is looked at when its cluster changes, and
// every watchedResync as a safety net.
const placementResync = 30 * time.Second

// DefaultMaxConcurrentReconciles is how many Apps are reconciled at once
// when the Reconciler does not say. A reconcile mostly waits (on the
// apiserver, the store, the runtime): with one at a time, 10,000 Apps
// took minutes to converge from cold, and their 15 s resyncs alone needed
// more reconciles per second than one worker does.
const DefaultMaxConcurrentReconciles = 8

// HealthWatcher is what a Releases may also do: tell when the runtime
// state of an app changes (an instance starts, becomes ready, crashes or
// stops; a release takes over), so that an App is reconciled when that
// happens rather than found changed at its next resync.
type HealthWatcher interface {
	// WatchHealth calls changed with the app's tenant and name after each
	// such change, until ctx is done; it returns at once. changed does not
	// block.
	WatchHealth(ctx context.Context, changed func(tenant, app string))
	// WatchesHealth reports whether WatchHealth tells of the app's changes
	// now (the app runs where they are seen).
	WatchesHealth(tenant, app string) bool
}

// NamespacePreparer is what a Releases may also do: make the tenant's
// namespace in the runtime ready for apps (confined: Pod Security labels,
// NetworkPolicy, the deploying processes' rights there). The App controller
// calls it for every App it reconciles, so that a tenant's first push finds
// its namespace ready and a label or policy changed by hand is put back.
type NamespacePreparer interface {
	PrepareNamespace(ctx context.Context, tenant string) error
}

// Releases is what the App controller asks of the release pipeline. Calls
// for one App may block while a push to it is being deployed.
type Releases interface {
	// EnsureRunning makes the runtime run app.Status.CurrentRelease; it
	// returns nil at once when it already does. For an App in maintenance
	// mode (spec.suspended) it makes the runtime run no instance of it,
	// keeping its release.
	EnsureRunning(ctx context.Context, app *platformv1alpha1.App) error
	// Health reports whether the app's current release serves, and if not,
	// why in words a tenant can act on.
	Health(ctx context.Context, tenant, app string) (ready bool, message string, err error)
	// Remove stops everything that runs for the app and forgets its files.
	Remove(ctx context.Context, tenant, app string) error
	// LastBuild reports the outcome of the app's newest build; the zero
	// value when it has none.
	LastBuild(ctx context.Context, tenant, app string) (LastBuild, error)
}

// LastBuild is the outcome of an App's newest build, so that a build or a
// release that failed shows on the App while the previous release serves.
type LastBuild struct {
	// Number is the build's number; 0 when the app has no build.
	Number int
	// Failed is true when the build failed, or built but its release never
	// became healthy (Rollout).
	Failed, Rollout bool
	// Message is the failure, in the pipeline's words.
	Message string
}

// Reconciler reconciles Apps.
type Reconciler struct {
	// Client reads and writes Apps (cached); it reads no Secret.
	Client client.Client
	// Reader reads the Secrets Apps' env refers to (secretKeyRef), to
	// check that each exists and holds its key: the manager's APIReader,
	// uncached, so that the manager holds no Secret's data (it watches
	// Secrets' metadata only). One GET per secretKeyRef per reconcile.
	Reader client.Reader
	// Releases, when set, keeps each App's current release running and
	// cleans up after a deleted App; without it (tests of the API alone)
	// the controller only reports conditions.
	Releases Releases
	// Placer, when set, places each App on a workload cluster through the
	// scheduler API before anything runs, and places it again when its
	// cluster can no longer hold it (status.cluster follows).
	Placer Placer
	// Events records on an App that it was placed again elsewhere (a
	// Moved event); nil records none.
	Events events.EventRecorder
	// MaxConcurrentReconciles is how many Apps are reconciled at once (one
	// App is never reconciled twice at once); 0 means
	// DefaultMaxConcurrentReconciles. Releases and Placer must be safe for
	// concurrent use.
	MaxConcurrentReconciles int
	// WatchClusters, with a Placer, looks at the Apps a Cluster API
	// Cluster runs again as soon as the Cluster changes (is cordoned or
	// being deleted) rather than at the next resync; the management
	// cluster must serve Cluster API's Cluster kind.
	WatchClusters bool
	// PlacementResync is how often a placement off a static cluster is
	// looked at again while the ClusterCapacities cannot be watched; 0
	// means 30 s (placementResync).
	PlacementResync time.Duration
	// PollPlacements, with a Placer, follows no ClusterCapacities: every
	// placement is looked at every PlacementResync, as while the
	// scheduling API cannot be watched. For comparisons (make
	// bench-placement); the platform leaves it false.
	PollPlacements bool
	// Resync is how often a released App that its runtime does not watch,
	// or that does not serve, is looked at again; 0 means ResyncPeriod.
	Resync time.Duration
	// RuntimeSecret, when set, is the Secret the platform's processes
	// read the fleet's clusters' runtime kubeconfigs from
	// (placed.KubeOptions.RuntimeSecret, written by
	// controllers/runtimecreds): when a cluster's key is written or
	// changes, the Apps placed on that cluster are looked at at once, so
	// that one waiting for that key runs then, not at its next resync.
	// The Secret is watched in a cache of the reconciler's own that holds
	// it alone (runtimeKeySource).
	RuntimeSecret types.NamespacedName

	// capacity, with a Placer, follows the ClusterCapacities.
	capacity *capacityWatch
}

// SetupWithManager registers the reconciler; it watches Apps and the
// metadata of the Secrets they refer to (a change of a Secret's data
// changes its resourceVersion, so it is seen too) and, with a Placer, the ClusterCapacities of the
// scheduling API (capacityWatch).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Reader == nil {
		return errors.New("app reconciler: Client and Reader are required")
	}
	if r.RuntimeSecret.Name != "" && r.RuntimeSecret.Namespace == "" {
		return fmt.Errorf("app reconciler: RuntimeSecret %q has no namespace", r.RuntimeSecret.Name)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &platformv1alpha1.App{}, secretRefIndex, secretNames); err != nil {
		return fmt.Errorf("indexing apps by secret: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)}).
		For(&platformv1alpha1.App{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.appsForSecret), builder.OnlyMetadata)
	if r.Placer != nil || r.RuntimeSecret.Name != "" {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &platformv1alpha1.App{}, clusterIndex, clusterOf); err != nil {
			return fmt.Errorf("indexing apps by cluster: %w", err)
		}
	}
	if r.RuntimeSecret.Name != "" {
		src, err := r.runtimeKeySource(mgr)
		if err != nil {
			return err
		}
		b = b.WatchesRawSource(src)
	}
	if r.Placer != nil {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &platformv1alpha1.App{}, unplacedIndex, unplacedOf); err != nil {
			return fmt.Errorf("indexing apps by placed condition: %w", err)
		}
	}
	if r.Placer != nil && !r.PollPlacements {
		c, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return fmt.Errorf("creating the capacity watch client: %w", err)
		}
		r.capacity = newCapacityWatch(c)
		b = b.WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			return r.capacity.start(ctx, r, q)
		}))
	}
	if r.WatchClusters && r.Placer != nil {
		b = b.Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.appsOnCluster))
	}
	if hw, ok := r.Releases.(HealthWatcher); ok {
		b = b.WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			hw.WatchHealth(ctx, func(tenant, app string) {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: tenant, Name: app}})
			})
			return nil
		}))
	}
	return b.Complete(r)
}

// clusterIndex indexes Apps by status.cluster.
const clusterIndex = "status.cluster"

func clusterOf(obj client.Object) []string {
	if c := obj.(*platformv1alpha1.App).Status.Cluster; c != "" {
		return []string{c}
	}
	return nil
}

// appsOnCluster returns the Apps placed on a Cluster, in every namespace.
func (r *Reconciler) appsOnCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.appsOn(ctx, obj.GetName())
}

// appsOn returns the Apps whose status.cluster is cluster, in every
// namespace.
func (r *Reconciler) appsOn(ctx context.Context, cluster string) []reconcile.Request {
	var apps platformv1alpha1.AppList
	if err := r.Client.List(ctx, &apps, client.MatchingFields{clusterIndex: cluster}); err != nil {
		logf.FromContext(ctx).Error(err, "Listing apps on cluster", "cluster", cluster)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(apps.Items))
	for _, a := range apps.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Name}})
	}
	return reqs
}

func secretNames(obj client.Object) []string {
	app := obj.(*platformv1alpha1.App)
	var names []string
	for _, e := range app.Spec.Env {
		if e.SecretKeyRef != nil {
			names = append(names, e.SecretKeyRef.Name)
		}
	}
	return names
}

func (r *Reconciler) appsForSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	var apps platformv1alpha1.AppList
	if err := r.Client.List(ctx, &apps, client.InNamespace(obj.GetNamespace()), client.MatchingFields{secretRefIndex: obj.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "Listing apps for secret", "secret", klog.KObj(obj))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(apps.Items))
	for _, a := range apps.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Name}})
	}
	return reqs
}

// scope is what one reconcile observed and decided.
type scope struct {
	app *platformv1alpha1.App
	// missingSecrets names env entries whose Secret or key does not exist,
	// as "spec.env[i].secretKeyRef: ..." messages.
	missingSecrets []string
	// runtimeObserved is set when the runtime reported on the current
	// release: runtimeReady and runtimeMessage are its answer.
	runtimeObserved bool
	runtimeReady    bool
	runtimeMessage  string
	// placementObserved is set when a Placer ran: placement is its answer.
	placementObserved bool
	placement         Placement
	// lastBuild is the newest build's outcome, when Releases reported it.
	lastBuild LastBuild
}

// Reconcile observes the App and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	app := &platformv1alpha1.App{}
	if err := r.Client.Get(ctx, req.NamespacedName, app); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log := logf.FromContext(ctx).WithValues("app", klog.KObj(app))
	ctx = logf.IntoContext(ctx, log)
	if !app.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, r.reconcileDelete(ctx, app)
	}
	if (r.Releases != nil || r.Placer != nil) && controllerutil.AddFinalizer(app, platformv1alpha1.AppFinalizer) {
		if err := r.Client.Update(ctx, app); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	base := app.DeepCopy()
	s := &scope{app: app}
	defer func() {
		if retErr == nil {
			app.Status.ObservedGeneration = app.Generation
		}
		if equality.Semantic.DeepEqual(base.Status, app.Status) {
			// Nothing to write: most resyncs of a running App.
			return
		}
		if err := r.Client.Status().Patch(ctx, app, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, fmt.Errorf("patching status: %w", err))
		}
	}()

	if err := r.observeSecrets(ctx, s); err != nil {
		return reconcile.Result{}, err
	}
	if r.Placer != nil {
		pl, err := r.Placer.Place(ctx, app)
		if err != nil {
			return reconcile.Result{}, err
		}
		s.placementObserved, s.placement = true, pl
		app.Status.Cluster = pl.Cluster
		if pl.MovedFrom != "" && r.Events != nil {
			r.Events.Eventf(app, nil, corev1.EventTypeNormal, "Moved", "Place",
				"Placed again on %s/%s, away from %s: %s", pl.Cluster, pl.Pool, pl.MovedFrom, pl.Message)
		}
	}
	if p, ok := r.Releases.(NamespacePreparer); ok {
		if err := p.PrepareNamespace(ctx, app.Namespace); err != nil {
			return reconcile.Result{}, fmt.Errorf("preparing the runtime namespace: %w", err)
		}
	}
	if r.Releases != nil && app.Status.CurrentRelease > 0 && app.Spec.Suspended {
		// Maintenance mode: nothing runs, and Ready says so.
		if err := r.Releases.EnsureRunning(ctx, app); err != nil {
			return reconcile.Result{}, fmt.Errorf("stopping the instances of a suspended app: %w", err)
		}
	}
	if r.Releases != nil && app.Status.CurrentRelease > 0 && !app.Spec.Suspended {
		if err := r.Releases.EnsureRunning(ctx, app); err != nil {
			s.runtimeMessage = "release v" + strconv.FormatInt(app.Status.CurrentRelease, 10) + " is not running: " + err.Error()
		} else {
			ready, msg, err := r.Releases.Health(ctx, app.Namespace, app.Name)
			if err != nil {
				return reconcile.Result{}, fmt.Errorf("reading runtime status: %w", err)
			}
			s.runtimeObserved, s.runtimeReady, s.runtimeMessage = true, ready, msg
		}
	}
	if r.Releases != nil {
		lb, err := r.Releases.LastBuild(ctx, app.Namespace, app.Name)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("reading the last build: %w", err)
		}
		s.lastBuild = lb
	}
	setConditions(s)
	return reconcile.Result{RequeueAfter: r.requeueAfter(s)}, nil
}

// requeueAfter is when the App, as s observed it, is looked at again if
// nothing brings it back before: every ResyncPeriod while it has a release
// its runtime does not watch or that does not serve; for a placed App off
// a static cluster, or one not placed yet, every placementResync while
// the ClusterCapacities are not watched (its cluster's capacity may change
// with no event), else every watchedResync, spread, as for a watched App
// that serves; sooner when its placement may change with the clock alone
// (Placement.RecheckAfter).
func (r *Reconciler) requeueAfter(s *scope) time.Duration {
	released := r.Releases != nil && s.app.Status.CurrentRelease > 0
	var after time.Duration
	switch {
	case released && !r.watched(s):
		return cmp.Or(r.Resync, ResyncPeriod)
	case r.Placer != nil && !(s.placementObserved && s.placement.Static):
		if !r.capacity.watching() {
			// No watch runs: poll, as before the scheduling API could
			// be watched.
			return cmp.Or(r.PlacementResync, placementResync)
		}
		after = wait.Jitter(watchedResync, 0.2)
	case released:
		after = wait.Jitter(watchedResync, 0.2)
	default:
		return 0
	}
	if ra := s.placement.RecheckAfter; s.placementObserved && ra > 0 {
		after = min(after, ra)
	}
	return after
}

// watched reports whether the App, as s observed it, need only be looked
// at again when its runtime tells of a change (HealthWatcher): it has a
// release, its runtime watches it, and it serves (or rests in maintenance)
// where it is placed. Builds that end bring it back by the status the
// pipeline records (status.latestBuild), Secrets, Clusters and
// ClusterCapacities by their watches; its placement is still looked at
// every placementResync while no capacity watch runs, unless it stays on a
// static cluster (Placement.Static).
func (r *Reconciler) watched(s *scope) bool {
	hw, ok := r.Releases.(HealthWatcher)
	app := s.app
	switch {
	case !ok || app.Status.CurrentRelease == 0 || !hw.WatchesHealth(app.Namespace, app.Name):
		return false
	case s.placementObserved && !s.placement.Placed:
		return false
	case len(s.missingSecrets) > 0:
		return false
	}
	return app.Spec.Suspended || (s.runtimeObserved && s.runtimeReady)
}

func (r *Reconciler) reconcileDelete(ctx context.Context, app *platformv1alpha1.App) error {
	if !controllerutil.ContainsFinalizer(app, platformv1alpha1.AppFinalizer) {
		return nil
	}
	if r.Releases != nil {
		if err := r.Releases.Remove(ctx, app.Namespace, app.Name); err != nil {
			return fmt.Errorf("stopping the app: %w", err)
		}
	}
	if r.Placer != nil {
		if err := r.Placer.Unplace(ctx, app); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(app, platformv1alpha1.AppFinalizer)
	if err := r.Client.Update(ctx, app); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	logf.FromContext(ctx).Info("App removed from the runtime")
	return nil
}

// observeSecrets checks that each Secret the env refers to exists and holds
// its key, read with Reader: a Secret's metadata does not tell its keys.
func (r *Reconciler) observeSecrets(ctx context.Context, s *scope) error {
	for i, e := range s.app.Spec.Env {
		if e.SecretKeyRef == nil {
			continue
		}
		var sec corev1.Secret
		err := r.Reader.Get(ctx, types.NamespacedName{Namespace: s.app.Namespace, Name: e.SecretKeyRef.Name}, &sec)
		switch {
		case apierrors.IsNotFound(err):
			s.missingSecrets = append(s.missingSecrets, fmt.Sprintf("spec.env[%d].secretKeyRef: Secret %q not found", i, e.SecretKeyRef.Name))
		case err != nil:
			return fmt.Errorf("reading secret %s: %w", e.SecretKeyRef.Name, err)
		default:
			if _, ok := sec.Data[e.SecretKeyRef.Key]; !ok {
				s.missingSecrets = append(s.missingSecrets, fmt.Sprintf("spec.env[%d].secretKeyRef: Secret %q has no key %q", i, e.SecretKeyRef.Name, e.SecretKeyRef.Key))
			}
		}
	}
	return nil
}
