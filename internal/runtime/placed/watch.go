package placed

import (
	"context"
	"slices"
	"sync"

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

// watchReg is a call of KubeClusters.Watch, kept for the clusters
// connected after it.
type watchReg struct {
	ctx     context.Context
	changed func(tenant, app string)
}

// kubeWatches are the calls of KubeClusters.Watch.
type kubeWatches struct {
	mu   sync.Mutex
	regs []*watchReg
}

// Watch implements Watchers: the static clusters' drivers that watch, and
// each Cluster API cluster's kube driver (a watch of its Deployments),
// from when it is connected until it is dropped or replaced.
func (k *KubeClusters) Watch(ctx context.Context, changed func(tenant, app string)) {
	k.opts.Static.Watch(ctx, changed)
	reg := &watchReg{ctx: ctx, changed: changed}
	k.watches.mu.Lock()
	k.watches.regs = append(k.watches.regs, reg)
	k.watches.mu.Unlock()
	context.AfterFunc(ctx, func() {
		k.watches.mu.Lock()
		defer k.watches.mu.Unlock()
		k.watches.regs = slices.DeleteFunc(k.watches.regs, func(r *watchReg) bool { return r == reg })
	})
	// A cluster connected meanwhile is watched here or by watchNew,
	// whichever comes second finds the other's work done.
	k.clusters.Range(func(_, c any) bool {
		c.(*kubeCluster).watch(reg)
		return true
	})
}

// watchNew starts the watches registered so far on a cluster just
// connected.
func (k *KubeClusters) watchNew(c *kubeCluster) {
	k.watches.mu.Lock()
	regs := slices.Clone(k.watches.regs)
	k.watches.mu.Unlock()
	for _, reg := range regs {
		c.watch(reg)
	}
}

// watch runs reg's watch on the cluster's driver while both the
// cluster's watches and reg's context last.
func (c *kubeCluster) watch(reg *watchReg) {
	c.watchMu.Lock()
	seen := c.watched[reg]
	if c.watched == nil {
		c.watched = map[*watchReg]bool{}
	}
	c.watched[reg] = true
	c.watchMu.Unlock()
	if seen || reg.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(c.watchCtx)
	stop := context.AfterFunc(reg.ctx, cancel)
	context.AfterFunc(ctx, func() { stop() })
	c.driver.Watch(ctx, reg.changed)
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
