package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/internal/fleetstate"
)

// countingFleet is a fleet source that counts its reads and, when
// versioned, says when its clusters changed.
type countingFleet struct {
	mu        sync.Mutex
	clusters  []fleetstate.Cluster
	version   uint64
	versioned bool
	reads     int
}

func (f *countingFleet) Clusters(context.Context) ([]fleetstate.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return append([]fleetstate.Cluster(nil), f.clusters...), nil
}

func (f *countingFleet) Version() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version, f.versioned
}

func (f *countingFleet) set(clusters []fleetstate.Cluster) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clusters = clusters
	f.version++
}

// fixedTotals are placement totals that change only through set.
type fixedTotals struct {
	mu      sync.Mutex
	req     Requested
	version uint64
}

func (p *fixedTotals) Requested() (Requested, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := Requested{}
	for k, v := range p.req {
		out[k] = v
	}
	return out, nil
}

func (p *fixedTotals) Version() (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version, true
}

func (p *fixedTotals) add(s *scheduling.PlacementSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.req.Add(s)
	p.version++
}

// TestViewComputesOncePerChange reviews against a versioned fleet: the
// fleet is read once while nothing changes, and a change of the fleet, of
// the placements or the snapshot's age is seen by the next review.
func TestViewComputesOncePerChange(t *testing.T) {
	fleet := &countingFleet{versioned: true, clusters: []fleetstate.Cluster{
		{Name: "a", Healthy: true, Pools: []fleetstate.Pool{pool("p", "4", "8Gi", 10)}},
	}}
	totals := &fixedTotals{req: Requested{}}
	v, err := NewView(fleet, totals, nil, v1alpha1.StrategyBinPack)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	v.now = func() time.Time { return now }
	ctx := context.Background()
	review := func() scheduling.PlacementReviewStatus {
		t.Helper()
		st, err := v.Review(ctx, spec(1, "1", "1Gi", scheduling.PlacementConstraints{}))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	for range 50 {
		if st := review(); st.Cluster != "a" {
			t.Fatalf("placed on %q, want a: %s", st.Cluster, st.Message)
		}
	}
	if fleet.reads != 1 {
		t.Errorf("50 reviews with nothing changed read the fleet %d times, want 1", fleet.reads)
	}

	// A new cluster, fuller than a after placing: bin packing takes it.
	fleet.set(append(fleet.clusters, fleetstate.Cluster{Name: "b", Healthy: true, Pools: []fleetstate.Pool{pool("p", "2", "2Gi", 10)}}))
	if st := review(); st.Cluster != "b" {
		t.Fatalf("after the fleet changed, placed on %q, want b: %s", st.Cluster, st.Message)
	}
	if fleet.reads != 2 {
		t.Errorf("fleet read %d times after one change, want 2", fleet.reads)
	}

	// b is full once a placement takes its CPU.
	totals.add(&scheduling.PlacementSpec{Cluster: "b", Pool: "p", Replicas: 2,
		Resources: scheduling.Resources{CPU: resource.MustParse("1"), Memory: resource.MustParse("512Mi")}})
	if st := review(); st.Cluster != "a" {
		t.Fatalf("after b filled up, placed on %q, want a: %s", st.Cluster, st.Message)
	}

	// Nothing changed but time: the snapshot is read again after its age.
	reads := fleet.reads
	now = now.Add(maxSnapshotAge)
	review()
	if fleet.reads != reads+1 {
		t.Errorf("a snapshot %s old was not computed again (%d reads, want %d)", maxSnapshotAge, fleet.reads, reads+1)
	}

	// Capacities are copies: writing one leaves the next review alone.
	caps, err := v.Capacities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range caps {
		caps[i].Status.AcceptsPlacements = false
		caps[i].Status.Pools = nil
	}
	if st := review(); !st.Schedulable {
		t.Errorf("a caller's write to Capacities reached the view: %s", st.Message)
	}
}

// TestViewUnversionedReadsEachTime: a fleet that cannot tell its changes
// is read for every review.
func TestViewUnversionedReadsEachTime(t *testing.T) {
	fleet := &countingFleet{clusters: []fleetstate.Cluster{{Name: "a", Healthy: true, Pools: []fleetstate.Pool{pool("p", "4", "8Gi", 10)}}}}
	v, err := NewView(fleet, &fixedTotals{req: Requested{}}, nil, v1alpha1.StrategyBinPack)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := v.Review(context.Background(), spec(1, "1", "1Gi", scheduling.PlacementConstraints{})); err != nil {
			t.Fatal(err)
		}
	}
	if fleet.reads != 3 {
		t.Errorf("3 reviews read an unversioned fleet %d times, want 3", fleet.reads)
	}
}
