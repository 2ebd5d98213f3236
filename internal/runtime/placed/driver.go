package placed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
)

// ErrNotPlaced is wrapped by Deploy when the release names no cluster: the
// scheduler found none for the app.
var ErrNotPlaced = errors.New("the app is not placed on any cluster")

// ErrNoCluster is wrapped by Clusters.Driver when the fleet has no cluster
// of that name (it was deleted).
var ErrNoCluster = errors.New("no such cluster")

// Apps is a cluster's routing table, as the edge reads it (edge.Apps).
// Both methods are called on every request: they take no lock that a
// deploy holds and do no network round trip.
type Apps interface {
	// Upstreams returns the addresses of the app's ready web instances.
	Upstreams(tenant, app string) []string
	// Runs reports whether the app has a release rolled out.
	Runs(tenant, app string) bool
}

// Clusters gives the runtime of each cluster of the fleet. Its methods are
// safe for concurrent use.
type Clusters interface {
	// Driver returns the runtime driver of the named cluster, making it
	// when needed; the error wraps ErrNoCluster when the fleet has no such
	// cluster.
	Driver(ctx context.Context, cluster string) (runtime.Driver, error)
	// Apps returns the routing table of the named cluster, nil when there
	// is none (yet). It does no network round trip.
	Apps(cluster string) Apps
}

// Ledger records which cluster serves each app, across restarts and
// between the platform's processes. Its methods are safe for concurrent
// use.
type Ledger interface {
	// ServingClusters returns every app's cluster, keyed by Key.
	ServingClusters(ctx context.Context) (map[string]string, error)
	// ServingCluster returns the app's cluster, and whether one serves it.
	ServingCluster(ctx context.Context, tenant, app string) (string, bool, error)
	// SetServingCluster records that cluster serves the app.
	SetServingCluster(ctx context.Context, tenant, app, cluster string) error
	// ClearServingCluster forgets the app; a missing one is fine.
	ClearServingCluster(ctx context.Context, tenant, app string) error

	// AddLeftover records an app a move could not remove from the
	// cluster it left; Leftovers returns them, oldest first; ClearLeftover
	// forgets one (a missing one is fine).
	AddLeftover(ctx context.Context, l store.Leftover) error
	Leftovers(ctx context.Context) ([]store.Leftover, error)
	ClearLeftover(ctx context.Context, l store.Leftover) error
}

// VersionedLedger is a Ledger that tells whether it changed since a version
// it gave (the store's does): Follow reads every app only when it did.
type VersionedLedger interface {
	Ledger
	// ServingClustersSince returns every app's cluster, keyed by Key, and
	// the version they are at; or a nil map when the version is still
	// since. A since of 0 reads every app.
	ServingClustersSince(ctx context.Context, since int64) (map[string]string, int64, error)
}

// Key is the Ledger's key of an app.
func Key(tenant, app string) string { return tenant + "/" + app }

// Options configure a Driver. Zero fields take the defaults in brackets.
type Options struct {
	Clusters Clusters
	Ledger   Ledger
	// RoutedTimeout bounds the wait, after a release is healthy on a
	// cluster it moves to, for that cluster's routing table to list its
	// instances, before the edge switches [1m].
	RoutedTimeout time.Duration
	// DrainDelay is how long the old cluster keeps serving after the edge
	// switched, for requests already on their way to it [2s].
	DrainDelay time.Duration
	// Shared says that other processes deploy through the same Ledger (a
	// cluster install's git receiver, web and controller manager, each
	// with a Driver of its own): every call on an app reads where it runs
	// from the Ledger first, ReadApps reads the whole Ledger, and a
	// process that only routes (the edge) keeps its copy with Follow.
	Shared bool
	Log    logr.Logger
}

// removePatience bounds the removal of a moved app from its old cluster.
const removePatience = time.Minute

// SweepInterval is how often a platform calls SweepLeftovers: every
// minute, as a move that leaves an app behind tells its log.
const SweepInterval = time.Minute

// Driver runs each app on the cluster its release names.
type Driver struct {
	opts Options

	mu    sync.Mutex
	locks map[string]*appLock
	// serving maps Key → cluster; read on every request by the edge.
	serving sync.Map
}

var (
	_ runtime.Driver      = (*Driver)(nil)
	_ runtime.ImageRunner = (*Driver)(nil)
	_ runtime.Runner      = (*Driver)(nil)
	_ Apps                = (*Driver)(nil)
)

// New reads the ledger and returns a Driver over opts.Clusters.
func New(ctx context.Context, opts Options) (*Driver, error) {
	switch {
	case opts.Clusters == nil:
		return nil, errors.New("placed driver: Clusters is nil")
	case opts.Ledger == nil:
		return nil, errors.New("placed driver: Ledger is nil")
	}
	if opts.RoutedTimeout <= 0 {
		opts.RoutedTimeout = time.Minute
	}
	if opts.DrainDelay <= 0 {
		opts.DrainDelay = 2 * time.Second
	}
	d := &Driver{opts: opts, locks: map[string]*appLock{}}
	if err := d.reload(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// Serving returns the cluster that serves the app, and whether one does.
func (d *Driver) Serving(tenant, app string) (string, bool) {
	c, ok := d.serving.Load(Key(tenant, app))
	if !ok {
		return "", false
	}
	return c.(string), true
}

// where returns the cluster that serves the app: the Ledger's, kept in
// the driver's copy, when the Ledger is shared (Options.Shared), the
// copy's otherwise.
func (d *Driver) where(ctx context.Context, tenant, app string) (string, bool, error) {
	if !d.opts.Shared {
		c, ok := d.Serving(tenant, app)
		return c, ok, nil
	}
	c, ok, err := d.opts.Ledger.ServingCluster(ctx, tenant, app)
	if err != nil {
		return "", false, fmt.Errorf("reading where %s runs: %w", Key(tenant, app), err)
	}
	if ok {
		d.serving.Store(Key(tenant, app), c)
	} else {
		d.serving.Delete(Key(tenant, app))
	}
	return c, ok, nil
}

// reload replaces the driver's copy of the Ledger with the Ledger.
func (d *Driver) reload(ctx context.Context) error {
	serving, err := d.opts.Ledger.ServingClusters(ctx)
	if err != nil {
		return fmt.Errorf("reading where apps run: %w", err)
	}
	for k, c := range serving {
		d.serving.Store(k, c)
	}
	d.serving.Range(func(k, _ any) bool {
		if _, ok := serving[k.(string)]; !ok {
			d.serving.Delete(k)
		}
		return true
	})
	return nil
}

// ServingClusters returns the clusters that serve at least one app, so
// that their drivers and routing tables can be made before a request
// needs them (after a restart).
func (d *Driver) ServingClusters() []string {
	seen := map[string]bool{}
	var out []string
	d.serving.Range(func(_, c any) bool {
		if !seen[c.(string)] {
			seen[c.(string)] = true
			out = append(out, c.(string))
		}
		return true
	})
	return out
}

// appLock serialises the calls for one app; users counts the callers that
// hold or wait for it, so that it is dropped once none does.
type appLock struct {
	sync.Mutex
	users int
}

// lock takes the app's lock and returns its release. Locks exist only
// while held or awaited: the map does not grow with every app ever seen.
func (d *Driver) lock(tenant, app string) func() {
	key := Key(tenant, app)
	d.mu.Lock()
	l, ok := d.locks[key]
	if !ok {
		l = &appLock{}
		d.locks[key] = l
	}
	l.users++
	d.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		d.mu.Lock()
		if l.users--; l.users == 0 {
			delete(d.locks, key)
		}
		d.mu.Unlock()
	}
}

// RunsImage implements runtime.ImageRunner: a release runs from its image
// when the driver of its cluster does.
func (d *Driver) RunsImage(rel runtime.Release) bool {
	if rel.Cluster == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv, err := d.opts.Clusters.Driver(ctx, rel.Cluster)
	if err != nil {
		return false
	}
	ir, ok := drv.(runtime.ImageRunner)
	return ok && ir.RunsImage(rel)
}

// Deploy implements runtime.Driver on rel.Cluster. When another cluster
// serves the app, it is a move: the release starts there and passes its
// health check while the old cluster serves, the edge switches once the
// new cluster's routing table has its instances, and then the app is
// removed from the old cluster. A move that fails leaves the old cluster
// serving and removes what it started.
func (d *Driver) Deploy(ctx context.Context, rel runtime.Release, log io.Writer) error {
	if err := rel.Validate(); err != nil {
		return err
	}
	if rel.Cluster == "" {
		return ErrNotPlaced
	}
	defer d.lock(rel.Tenant, rel.App)()
	target, err := d.opts.Clusters.Driver(ctx, rel.Cluster)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", rel.Cluster, err)
	}
	from, serving, err := d.where(ctx, rel.Tenant, rel.App)
	if err != nil {
		return err
	}
	if serving && from == rel.Cluster {
		return target.Deploy(ctx, rel, log)
	}
	if serving {
		fmt.Fprintf(log, "-----> Moving from cluster %s to %s\n", from, rel.Cluster)
	}
	// From here, a failure removes what the deploy started on the new
	// cluster: the old one, if any, keeps serving.
	failed := func(err error) error {
		d.removeQuietly(ctx, target, rel.Cluster, rel.Tenant, rel.App)
		if serving {
			return fmt.Errorf("starting on cluster %s: %w; the app keeps running on %s", rel.Cluster, err, from)
		}
		return err
	}
	if err := target.Deploy(ctx, rel, log); err != nil {
		return failed(err)
	}
	if err := d.waitRouted(ctx, rel); err != nil {
		return failed(err)
	}
	if err := d.opts.Ledger.SetServingCluster(ctx, rel.Tenant, rel.App, rel.Cluster); err != nil {
		return failed(fmt.Errorf("recording that cluster %s serves the app: %w", rel.Cluster, err))
	}
	// The edge switches here.
	d.serving.Store(Key(rel.Tenant, rel.App), rel.Cluster)
	if !serving {
		return nil
	}
	fmt.Fprintf(log, "-----> Serving from cluster %s\n", rel.Cluster)
	select {
	case <-time.After(d.opts.DrainDelay):
	case <-ctx.Done():
	}
	// The old cluster may be on its way out (a deleted cluster): its
	// removal does not hold the app for long.
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removePatience)
	defer cancel()
	old, err := d.opts.Clusters.Driver(rmCtx, from)
	if err == nil {
		err = old.Remove(rmCtx, rel.Tenant, rel.App)
	}
	switch {
	case errors.Is(err, ErrNoCluster):
	case err != nil:
		d.opts.Log.Error(err, "Removing a moved app from its old cluster", "tenant", rel.Tenant, "app", rel.App, "cluster", from)
		fmt.Fprintf(log, " !     The app could not be removed from cluster %s yet (%v): the platform tries again every minute\n", from, err)
		left := store.Leftover{Tenant: rel.Tenant, App: rel.App, Cluster: from}
		if err := d.opts.Ledger.AddLeftover(context.WithoutCancel(ctx), left); err != nil {
			d.opts.Log.Error(err, "Recording an app left on its old cluster", "tenant", rel.Tenant, "app", rel.App, "cluster", from)
		}
	default:
		fmt.Fprintf(log, "-----> Removed from cluster %s\n", from)
	}
	return nil
}

// waitRouted waits until the routing table of rel's cluster lists the
// app's web instances, when it has any, so that the edge never switches to
// a cluster that would answer with no upstream.
func (d *Driver) waitRouted(ctx context.Context, rel runtime.Release) error {
	web, ok := rel.Processes[runtime.WebProcess]
	if !ok || web.Replicas == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.RoutedTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if apps := d.opts.Clusters.Apps(rel.Cluster); apps != nil && len(apps.Upstreams(rel.Tenant, rel.App)) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s does not route to the app's web instances after %s", rel.Cluster, d.opts.RoutedTimeout)
		case <-tick.C:
		}
	}
}

// RemoveLeftovers removes again, from the clusters they left, the apps a
// move could not remove (Ledger.Leftovers). A leftover whose cluster is
// gone, or that serves the app again (it moved back), is forgotten; one
// that still cannot be removed stays for the next call. It returns the
// first error.
func (d *Driver) RemoveLeftovers(ctx context.Context) error {
	leftovers, err := d.opts.Ledger.Leftovers(ctx)
	if err != nil {
		return err
	}
	var first error
	for _, l := range leftovers {
		if err := d.removeLeftover(ctx, l); err != nil {
			d.opts.Log.Error(err, "Removing an app left on a cluster it moved off", "tenant", l.Tenant, "app", l.App, "cluster", l.Cluster)
			first = cmp.Or(first, err)
		}
	}
	return first
}

func (d *Driver) removeLeftover(ctx context.Context, l store.Leftover) error {
	defer d.lock(l.Tenant, l.App)()
	cluster, ok, err := d.where(ctx, l.Tenant, l.App)
	if err != nil {
		return err
	}
	if !ok || cluster != l.Cluster {
		rmCtx, cancel := context.WithTimeout(ctx, removePatience)
		defer cancel()
		drv, err := d.opts.Clusters.Driver(rmCtx, l.Cluster)
		if err == nil {
			err = drv.Remove(rmCtx, l.Tenant, l.App)
		}
		if err != nil && !errors.Is(err, ErrNoCluster) {
			return fmt.Errorf("removing %s from cluster %s: %w", Key(l.Tenant, l.App), l.Cluster, err)
		}
		if err == nil {
			d.opts.Log.Info("Removed an app left on a cluster it moved off", "tenant", l.Tenant, "app", l.App, "cluster", l.Cluster)
		}
	}
	return d.opts.Ledger.ClearLeftover(ctx, l)
}

// SweepLeftovers calls RemoveLeftovers every interval until ctx ends.
func (d *Driver) SweepLeftovers(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_ = d.RemoveLeftovers(ctx) // logged
	}
}

// removeQuietly removes what a failed move started on cluster.
func (d *Driver) removeQuietly(ctx context.Context, drv runtime.Driver, cluster, tenant, app string) {
	if err := drv.Remove(context.WithoutCancel(ctx), tenant, app); err != nil {
		d.opts.Log.Error(err, "Removing what a failed move started", "tenant", tenant, "app", app, "cluster", cluster)
	}
}

// Remove implements runtime.Driver on the cluster that serves the app. An
// app whose cluster is gone is removed with it.
func (d *Driver) Remove(ctx context.Context, tenant, app string) error {
	defer d.lock(tenant, app)()
	cluster, ok, err := d.where(ctx, tenant, app)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	drv, err := d.opts.Clusters.Driver(ctx, cluster)
	if err == nil {
		err = drv.Remove(ctx, tenant, app)
	}
	if err != nil && !errors.Is(err, ErrNoCluster) {
		return fmt.Errorf("cluster %s: %w", cluster, err)
	}
	if err := d.opts.Ledger.ClearServingCluster(ctx, tenant, app); err != nil {
		return err
	}
	d.serving.Delete(Key(tenant, app))
	return nil
}

// driverOf is the driver of the cluster that serves the app.
func (d *Driver) driverOf(ctx context.Context, tenant, app string) (string, runtime.Driver, error) {
	cluster, ok, err := d.where(ctx, tenant, app)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return "", nil, fmt.Errorf("%s/%s: %w", tenant, app, runtime.ErrNotFound)
	}
	drv, err := d.opts.Clusters.Driver(ctx, cluster)
	if err != nil {
		return cluster, nil, fmt.Errorf("cluster %s: %w", cluster, err)
	}
	return cluster, drv, nil
}

// Status implements runtime.Driver: the status on the cluster that serves
// the app, with Cluster set.
func (d *Driver) Status(ctx context.Context, tenant, app string) (runtime.Status, error) {
	cluster, drv, err := d.driverOf(ctx, tenant, app)
	if err != nil {
		return runtime.Status{Cluster: cluster}, err
	}
	st, err := drv.Status(ctx, tenant, app)
	st.Cluster = cluster
	return st, err
}

// Run implements runtime.Runner on rel.Cluster, the cluster the app is
// placed on, when that cluster's driver runs one-off commands; otherwise
// the error wraps runtime.ErrRunNotSupported. It takes no lock of the app:
// a run neither waits for a deploy nor holds one up.
func (d *Driver) Run(ctx context.Context, rel runtime.Release, cmd runtime.Command) (runtime.Exit, error) {
	if rel.Cluster == "" {
		return runtime.Exit{}, ErrNotPlaced
	}
	drv, err := d.opts.Clusters.Driver(ctx, rel.Cluster)
	if err != nil {
		return runtime.Exit{}, fmt.Errorf("cluster %s: %w", rel.Cluster, err)
	}
	r, ok := drv.(runtime.Runner)
	if !ok {
		return runtime.Exit{}, fmt.Errorf("cluster %s: %w", rel.Cluster, runtime.ErrRunNotSupported)
	}
	return r.Run(ctx, rel, cmd)
}

// Logs implements runtime.Driver on the cluster that serves the app.
func (d *Driver) Logs(ctx context.Context, tenant, app string, tail int, follow bool) (<-chan runtime.LogLine, error) {
	_, drv, err := d.driverOf(ctx, tenant, app)
	if err != nil {
		return nil, err
	}
	return drv.Logs(ctx, tenant, app, tail, follow)
}

// Upstreams implements Apps over the routing table of the cluster that
// serves the app.
func (d *Driver) Upstreams(tenant, app string) []string {
	if apps := d.appsOf(tenant, app); apps != nil {
		return apps.Upstreams(tenant, app)
	}
	return nil
}

// Runs implements Apps over the routing table of the cluster that serves
// the app.
func (d *Driver) Runs(tenant, app string) bool {
	apps := d.appsOf(tenant, app)
	return apps != nil && apps.Runs(tenant, app)
}

func (d *Driver) appsOf(tenant, app string) Apps {
	cluster, ok := d.Serving(tenant, app)
	if !ok {
		return nil
	}
	return d.opts.Clusters.Apps(cluster)
}

// Static is a fixed set of clusters, by name: the embedded process runtime
// as "local", or tests' drivers.
type Static map[string]Cluster

// Cluster is one cluster's runtime: its driver and its routing table.
type Cluster struct {
	Driver runtime.Driver
	Apps   Apps
}

var _ Clusters = Static(nil)

// Driver implements Clusters.
func (s Static) Driver(_ context.Context, name string) (runtime.Driver, error) {
	c, ok := s[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrNoCluster, name)
	}
	return c.Driver, nil
}

// Apps implements Clusters.
func (s Static) Apps(name string) Apps {
	c, ok := s[name]
	if !ok || c.Apps == nil {
		return nil
	}
	return c.Apps
}

var _ runtime.UsageReader = (*Driver)(nil)

// Usage implements runtime.UsageReader on the cluster that serves the app,
// when that cluster's driver reads usage (the static cluster's process
// driver, a Cluster API cluster's kube driver); otherwise the error wraps
// runtime.ErrUsageNotSupported.
func (d *Driver) Usage(ctx context.Context, tenant, app string) ([]runtime.Usage, error) {
	cluster, drv, err := d.driverOf(ctx, tenant, app)
	if err != nil {
		return nil, err
	}
	u, ok := drv.(runtime.UsageReader)
	if !ok {
		return nil, fmt.Errorf("cluster %s: %w", cluster, runtime.ErrUsageNotSupported)
	}
	return u.Usage(ctx, tenant, app)
}

var _ runtime.AppsReader = (*Driver)(nil)

// ReadApps implements runtime.AppsReader: the apps that a cluster whose
// driver is an AppsReader serves are read there together, each cluster's
// at once; the others one by one with Status and Usage, as is an app
// whose cluster's ReadApps failed.
func (d *Driver) ReadApps(ctx context.Context, apps []runtime.AppName) (map[runtime.AppName]runtime.AppReading, error) {
	if d.opts.Shared {
		if err := d.reload(ctx); err != nil {
			return nil, err
		}
	}
	out := make(map[runtime.AppName]runtime.AppReading, len(apps))
	byCluster := map[string][]runtime.AppName{}
	for _, a := range apps {
		if cluster, ok := d.Serving(a.Tenant, a.App); ok {
			byCluster[cluster] = append(byCluster[cluster], a)
		}
	}
	for cluster, names := range byCluster {
		drv, err := d.opts.Clusters.Driver(ctx, cluster)
		if err != nil {
			continue
		}
		r, ok := drv.(runtime.AppsReader)
		if !ok {
			continue
		}
		readings, err := r.ReadApps(ctx, names)
		if err != nil {
			continue
		}
		for _, a := range names {
			if rd, ok := readings[a]; ok && d.servedBy(a, cluster) {
				rd.Status.Cluster = cluster
				out[a] = rd
			}
		}
	}
	for _, a := range apps {
		if _, ok := out[a]; ok {
			continue
		}
		var rd runtime.AppReading
		rd.Status, rd.StatusErr = d.Status(ctx, a.Tenant, a.App)
		rd.Usage, rd.UsageErr = d.Usage(ctx, a.Tenant, a.App)
		out[a] = rd
	}
	return out, nil
}

// servedBy reports whether cluster still serves the app (a move may have
// switched it while its old cluster was read).
func (d *Driver) servedBy(a runtime.AppName, cluster string) bool {
	c, ok := d.Serving(a.Tenant, a.App)
	return ok && c == cluster
}

// connectedClusters is implemented by Clusters that tell the drivers they
// have at hand, by cluster name, without connecting any (Static,
// KubeClusters).
type connectedClusters interface {
	Connected() map[string]runtime.Driver
}

// Connected implements connectedClusters: every cluster of s.
func (s Static) Connected() map[string]runtime.Driver {
	out := make(map[string]runtime.Driver, len(s))
	for name, c := range s {
		out[name] = c.Driver
	}
	return out
}

// connected returns the drivers of the clusters at hand, by name; none
// when Clusters cannot tell them.
func (d *Driver) connected() map[string]runtime.Driver {
	if c, ok := d.opts.Clusters.(connectedClusters); ok {
		return c.Connected()
	}
	return map[string]runtime.Driver{}
}

// InstancesReaders returns the drivers of the clusters at hand that read
// all their instances at once (runtime.InstancesReader: the kube
// clusters'), by cluster name, for runtimemetrics.Options.Sources. A
// driver that is not one (the process driver of make run's static
// cluster, which counts its own) is left out. It connects no cluster.
func (d *Driver) InstancesReaders() map[string]runtime.InstancesReader {
	out := map[string]runtime.InstancesReader{}
	for name, drv := range d.connected() {
		if r, ok := drv.(runtime.InstancesReader); ok {
			out[name] = r
		}
	}
	return out
}

var _ runtime.RunReaper = (*Driver)(nil)

// EndRun implements runtime.RunReaper on the cluster that serves the app
// and on every other cluster at hand (the run may have started there
// before the app moved), on each whose driver is a RunReaper. It returns
// the first error and goes on past it; an app served nowhere, or by a
// cluster that is gone, has nothing to end there.
func (d *Driver) EndRun(ctx context.Context, tenant, app, runID string) error {
	drivers := d.connected()
	var first error
	cluster, drv, err := d.driverOf(ctx, tenant, app)
	switch {
	case err == nil:
		drivers[cluster] = drv
	case !errors.Is(err, runtime.ErrNotFound) && !errors.Is(err, ErrNoCluster):
		first = err
	}
	for name, drv := range drivers {
		if r, ok := drv.(runtime.RunReaper); ok {
			if err := r.EndRun(ctx, tenant, app, runID); err != nil {
				first = cmp.Or(first, fmt.Errorf("cluster %s: %w", name, err))
			}
		}
	}
	return first
}

// SweepRuns implements runtime.RunReaper on every cluster at hand whose
// driver is a RunReaper. It returns the first error and goes on past it.
func (d *Driver) SweepRuns(ctx context.Context) error {
	var first error
	for name, drv := range d.connected() {
		if r, ok := drv.(runtime.RunReaper); ok {
			if err := r.SweepRuns(ctx); err != nil {
				first = cmp.Or(first, fmt.Errorf("cluster %s: %w", name, err))
			}
		}
	}
	return first
}
