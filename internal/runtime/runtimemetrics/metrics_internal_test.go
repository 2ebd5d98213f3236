package runtimemetrics

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"bex.co/bex/internal/runtime"
)

// held answers its instances once released, counting its reads.
type held struct {
	reads   atomic.Int32
	entered chan struct{}
	release chan struct{}
	insts   []runtime.AppInstance
}

func (h *held) ReadInstances(ctx context.Context) ([]runtime.AppInstance, error) {
	if h.reads.Add(1) == 1 {
		close(h.entered)
	}
	select {
	case <-h.release:
		return h.insts, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestScrapesShareTheReadUnderWay: a scrape that comes while another's
// read is under way (two Prometheus servers, or a slow cluster) waits for
// that read and reports what it found, instead of reading again behind
// it: the cluster is read once, and its restarts are counted once.
func TestScrapesShareTheReadUnderWay(t *testing.T) {
	h := &held{entered: make(chan struct{}), release: make(chan struct{}),
		insts: []runtime.AppInstance{{
			App:      runtime.AppName{Tenant: "acme", App: "shop"},
			Instance: runtime.Instance{Process: "web", ID: "shop-1", State: runtime.Running, Restarts: 3},
		}}}
	c, err := New(Options{Driver: "kube",
		Sources: func() map[string]runtime.InstancesReader { return map[string]runtime.InstancesReader{"a": h} }})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan *scrapeRead)
	go func() { first <- c.read() }()
	<-h.entered
	second := make(chan *scrapeRead)
	go func() { second <- c.read() }()
	deadline := time.Now().Add(30 * time.Second)
	for joined := 0; joined == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a second scrape during a read did not join it in 30 s")
		}
		c.mu.Lock()
		joined = c.joined
		c.mu.Unlock()
	}
	close(h.release)
	a, b := <-first, <-second
	if n := h.reads.Load(); n != 1 {
		t.Errorf("the cluster was read %d times for two scrapes at once, want 1", n)
	}
	if a != b || a.counts[runtime.Running] != 1 || a.restarts != 0 {
		t.Errorf("the scrapes got %+v and %+v, want the one read's: 1 Running, no restart (its first read)", a, b)
	}
}
