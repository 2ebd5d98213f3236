package fleetstate

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// notifying is a source of no cluster that tells of its changes through
// a Signal.
type notifying struct{ Signal }

func (*notifying) Clusters(context.Context) ([]Cluster, error) { return nil, nil }

// TestFleetNotify: a fleet tells of the changes of each source that
// tells of its own, until the caller's context ends.
func TestFleetNotify(t *testing.T) {
	a, b := &notifying{}, &notifying{}
	fleet := Fleet{Static(nil), a, b}
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	fleet.Notify(ctx, func() { calls.Add(1) })
	a.Broadcast()
	b.Broadcast()
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls after two changes, want 2", n)
	}
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		before := calls.Load()
		a.Broadcast()
		if calls.Load() == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still told of changes 10 s after the context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
