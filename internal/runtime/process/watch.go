package process

import (
	"context"
	"sync"

	"bex.co/bex/internal/runtime"
)

var _ runtime.Watcher = (*Driver)(nil)

// watchers are the functions Watch registered, called after each change
// of an instance's state.
type watchers struct {
	mu sync.Mutex
	// fns is copied on write: changed reads it without the lock.
	fns []*watcher
}

// watcher is one call of Watch.
type watcher struct {
	ctx     context.Context
	changed func(tenant, app string)
}

// Watch implements runtime.Watcher: changed is called after an instance
// of an app starts, becomes healthy or unhealthy, crashes or is stopped,
// and after a release takes over or the app is removed.
func (d *Driver) Watch(ctx context.Context, changed func(tenant, app string)) {
	w := &d.watchers
	fn := &watcher{ctx: ctx, changed: changed}
	w.mu.Lock()
	w.fns = append(append([]*watcher{}, w.fns...), fn)
	w.mu.Unlock()
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		var kept []*watcher
		for _, f := range w.fns {
			if f != fn {
				kept = append(kept, f)
			}
		}
		w.fns = kept
	})
}

// Watches implements runtime.Watcher: the driver sees every change of the
// apps it runs.
func (d *Driver) Watches(tenant, app string) bool { return true }

// changed tells the watchers that an instance of the app changed state.
func (d *Driver) changed(k appKey) {
	d.watchers.mu.Lock()
	fns := d.watchers.fns
	d.watchers.mu.Unlock()
	for _, f := range fns {
		if f.ctx.Err() == nil {
			f.changed(k.tenant, k.app)
		}
	}
}
