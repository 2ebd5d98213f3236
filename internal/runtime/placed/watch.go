package placed

import (
	"context"

	"bex.co/bex/internal/runtime"
)

// Watchers is what Clusters may also do: give the clusters whose drivers
// tell of their apps' changes (runtime.Watcher), by name. A Driver over
// such Clusters is a runtime.Watcher for the apps those clusters serve.
type Watchers interface {
	Watchers() map[string]runtime.Watcher
}

var (
	_ Watchers        = Static(nil)
	_ Watchers        = (*KubeClusters)(nil)
	_ runtime.Watcher = (*Driver)(nil)
)

// Watchers implements Watchers: the clusters whose driver is a
// runtime.Watcher.
func (s Static) Watchers() map[string]runtime.Watcher {
	out := map[string]runtime.Watcher{}
	for name, c := range s {
		if w, ok := c.Driver.(runtime.Watcher); ok {
			out[name] = w
		}
	}
	return out
}

// Watchers implements Watchers: the static clusters' (a kube driver tells
// of no change).
func (k *KubeClusters) Watchers() map[string]runtime.Watcher { return k.opts.Static.Watchers() }

// watchers are the clusters whose drivers watch their apps.
func (d *Driver) watchers() map[string]runtime.Watcher {
	if w, ok := d.opts.Clusters.(Watchers); ok {
		return w.Watchers()
	}
	return nil
}

// Watch implements runtime.Watcher through every cluster whose driver
// watches (Watchers): changed hears of the apps they run.
func (d *Driver) Watch(ctx context.Context, changed func(tenant, app string)) {
	for _, w := range d.watchers() {
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
	w, ok := d.watchers()[c]
	return ok && w.Watches(tenant, app)
}
