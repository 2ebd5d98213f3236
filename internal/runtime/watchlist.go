package runtime

import (
	"context"
	"slices"
	"sync"
)

// WatchCall is one call of a Watcher's Watch: what to tell, for as long
// as Ctx lasts.
type WatchCall struct {
	Ctx     context.Context
	Changed func(tenant, app string)
}

// WatchList keeps the calls of a Watcher's Watch until their contexts
// end. The zero value is ready; it is safe for concurrent use.
type WatchList struct {
	mu sync.Mutex
	// calls is copied on write, so that Calls and Tell use it without
	// holding the lock while they call out.
	calls []*WatchCall
}

// Add keeps the call of Watch(ctx, changed) until ctx ends, and returns it.
func (l *WatchList) Add(ctx context.Context, changed func(tenant, app string)) *WatchCall {
	c := &WatchCall{Ctx: ctx, Changed: changed}
	l.mu.Lock()
	l.calls = append(slices.Clip(l.calls), c)
	l.mu.Unlock()
	context.AfterFunc(ctx, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.calls = slices.DeleteFunc(slices.Clone(l.calls), func(o *WatchCall) bool { return o == c })
	})
	return c
}

// Calls returns the calls kept now.
func (l *WatchList) Calls() []*WatchCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// Tell calls Changed of every call whose context has not ended.
func (l *WatchList) Tell(tenant, app string) {
	for _, c := range l.Calls() {
		if c.Ctx.Err() == nil {
			c.Changed(tenant, app)
		}
	}
}
