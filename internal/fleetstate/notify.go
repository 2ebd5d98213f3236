package fleetstate

import (
	"context"
	"sync"
)

// Notifier is implemented by a Versioned source that also tells when its
// Version moves, so that a reader need not poll it.
//
// Notify calls changed after each change, until ctx ends; it returns at
// once. Several changes may come as one call, and a call may come with no
// change (a reader compares Versions or states). changed must not block:
// it runs on the goroutine that saw the change.
type Notifier interface {
	Notify(ctx context.Context, changed func())
}

// Signal is what a Notifier keeps: the functions registered with Notify,
// each called by Broadcast until its context ends. The zero value is ready;
// it is safe for concurrent use.
type Signal struct {
	mu   sync.Mutex
	next uint64
	fns  map[uint64]func()
}

// Notify registers changed until ctx ends.
func (s *Signal) Notify(ctx context.Context, changed func()) {
	s.mu.Lock()
	if s.fns == nil {
		s.fns = map[uint64]func(){}
	}
	id := s.next
	s.next++
	s.fns[id] = changed
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	})
}

// Broadcast calls every registered function.
func (s *Signal) Broadcast() {
	s.mu.Lock()
	fns := make([]func(), 0, len(s.fns))
	for _, f := range s.fns {
		fns = append(fns, f)
	}
	s.mu.Unlock()
	for _, f := range fns {
		f()
	}
}
