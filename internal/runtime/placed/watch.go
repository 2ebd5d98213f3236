package placed

import (
	"context"

	"bex.co/bex/internal/runtime"
)

// Watchers is what Clusters may also do: tell of the changes of the apps
// its clusters' drivers see (runtime.Watcher). A Driver over such Clusters
// is a runtime.Watcher for the apps those clusters serve.
type Watchers interface {
	// Watch calls changed with the tenant and name of an app after each
	// change a cluster's driver sees, until ctx is done, for the clusters
	// connected later too; it returns at once.
	Watch(ctx context.Context, changed func(tenant, app string))
	// Watches reports whether the named cluster's driver sees the app's
	// changes now.
	Watches(cluster, tenant, app string) bool
}

var (
	_ Watchers        = Static(nil)
	_ Watchers        = (*KubeClusters)(nil)
	_ runtime.Watcher = (*Driver)(nil)
)

// Watch implements Watchers through the drivers that are runtime.Watchers.
func (s Static) Watch(ctx context.Context, changed func(tenant, app string)) {
	for _, c := range s {
		if w, ok := c.Driver.(runtime.Watcher); ok {
			w.Watch(ctx, changed)
		}
	}
}

// Watches implements Watchers.
func (s Static) Watches(cluster, tenant, app string) bool {
	w, ok := s[cluster].Driver.(runtime.Watcher)
	return ok && w.Watches(tenant, app)
}

// Watch implements Watchers: the static clusters' drivers that watch, and
// each Cluster API cluster's kube driver (a watch of its Deployments),
// from when it is connected until it is dropped or replaced.
func (k *KubeClusters) Watch(ctx context.Context, changed func(tenant, app string)) {
	k.opts.Static.Watch(ctx, changed)
	call := k.watches.Add(ctx, changed)
	// A cluster connected meanwhile is watched here or by watchNew,
	// whichever comes second finds the other's work done.
	k.clusters.Range(func(_, c any) bool {
		c.(*kubeCluster).watch(call)
		return true
	})
}

// watchNew starts the watches registered so far on a cluster just
// connected.
func (k *KubeClusters) watchNew(c *kubeCluster) {
	for _, call := range k.watches.Calls() {
		c.watch(call)
	}
}

// watch runs call on the cluster's driver while both the cluster's
// watches and call's context last.
func (c *kubeCluster) watch(call *runtime.WatchCall) {
	c.watchMu.Lock()
	seen := c.watched[call]
	if c.watched == nil {
		c.watched = map[*runtime.WatchCall]bool{}
	}
	c.watched[call] = true
	c.watchMu.Unlock()
	if seen || call.Ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(c.watchCtx)
	stop := context.AfterFunc(call.Ctx, cancel)
	context.AfterFunc(ctx, func() { stop() })
	c.driver.Watch(ctx, call.Changed)
}

// Watches implements Watchers, without waiting for a cluster being
// connected: a cluster not connected yet sees nothing.
func (k *KubeClusters) Watches(cluster, tenant, app string) bool {
	if _, ok := k.opts.Static[cluster]; ok {
		return k.opts.Static.Watches(cluster, tenant, app)
	}
	c, ok := k.clusters.Load(cluster)
	return ok && c.(*kubeCluster).driver.Watches(tenant, app)
}

// Watch implements runtime.Watcher through its Clusters, when they are
// Watchers: changed hears of the apps their drivers see.
func (d *Driver) Watch(ctx context.Context, changed func(tenant, app string)) {
	if w, ok := d.opts.Clusters.(Watchers); ok {
		w.Watch(ctx, changed)
	}
}

// Watches implements runtime.Watcher: the app's changes are seen when the
// cluster that serves it has a driver that sees them.
func (d *Driver) Watches(tenant, app string) bool {
	c, ok := d.Serving(tenant, app)
	if !ok {
		return false
	}
	w, ok := d.opts.Clusters.(Watchers)
	return ok && w.Watches(c, tenant, app)
}
