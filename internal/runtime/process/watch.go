package process

import (
	"context"

	"bex.co/bex/internal/runtime"
)

var _ runtime.Watcher = (*Driver)(nil)

// Watch implements runtime.Watcher: changed is called after an instance
// of an app starts, becomes healthy or unhealthy, crashes or is stopped,
// and after a release takes over or the app is removed.
func (d *Driver) Watch(ctx context.Context, changed func(tenant, app string)) {
	d.watchers.Add(ctx, changed)
}

// Watches implements runtime.Watcher: the driver sees every change of the
// apps it runs.
func (d *Driver) Watches(tenant, app string) bool { return true }

// changed tells the watchers that an instance of the app changed state.
func (d *Driver) changed(k appKey) { d.watchers.Tell(k.tenant, k.app) }
