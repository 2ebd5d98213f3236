package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/internal/fleetstate"
)

// reservingView is a view over clusters a (pool p of aCPU cpu) and b (pool
// q of 16 cpu), with no Placement yet, with reservations.
func reservingView(t *testing.T, aCPU string) (*View, *fixedTotals, *Reservations) {
	t.Helper()
	fleet := &countingFleet{versioned: true, clusters: []fleetstate.Cluster{
		{Name: "a", Healthy: true, Pools: []fleetstate.Pool{pool("p", aCPU, "64Gi", 110)}},
		{Name: "b", Healthy: true, Pools: []fleetstate.Pool{pool("q", "16", "64Gi", 110)}},
	}}
	totals := &fixedTotals{req: Requested{}}
	res, err := NewReservations(ReservationTTL)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewView(fleet, totals, res, v1alpha1.StrategyBinPack)
	if err != nil {
		t.Fatal(err)
	}
	return v, totals, res
}

// reviewOf is a review of one replica of 1 cpu, 1Gi, reserving for the
// Placement tenant/name when name is not "".
func reviewOf(name string) *scheduling.PlacementReviewSpec {
	s := spec(1, "1", "1Gi", scheduling.PlacementConstraints{})
	if name != "" {
		s.Reserve = &scheduling.PlacementRef{Namespace: "tenant", Name: name}
	}
	return s
}

// TestConcurrentReviewsDoNotOverCommit: twelve Apps of one cpu are
// reviewed at once, none of their Placements written yet, and bin packing
// prefers a, which holds four. Each review that will be recorded holds its
// room, so a takes four and b the rest; without the reservations every
// review saw a empty and chose it, twelve cpu on four.
func TestConcurrentReviewsDoNotOverCommit(t *testing.T) {
	v, _, _ := reservingView(t, "4")
	const apps = 12
	var wg sync.WaitGroup
	chosen := make([]scheduling.PlacementReviewStatus, apps)
	errs := make([]error, apps)
	for i := range apps {
		wg.Go(func() {
			chosen[i], errs[i] = v.Review(context.Background(), reviewOf(fmt.Sprintf("app-%d", i)))
		})
	}
	wg.Wait()
	perCluster := map[string]int{}
	for i, st := range chosen {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !st.Schedulable {
			t.Fatalf("app-%d placed nowhere: %s", i, st.Message)
		}
		perCluster[st.Cluster]++
	}
	if perCluster["a"] != 4 || perCluster["b"] != apps-4 {
		t.Errorf("%d Apps of 1 cpu went to a (4 cpu) and %d to b, want 4 and %d", perCluster["a"], perCluster["b"], apps-4)
	}
}

// TestReservationEnds follows the reservations of a pool of two cpu: a
// dry review holds nothing, a reservation ends once its Placement is
// counted (not twice meanwhile, nor by a change the review already
// counted) or after its time to live, and a reserving review of the same
// Placement replaces it.
func TestReservationEnds(t *testing.T) {
	v, totals, res := reservingView(t, "2")
	now := time.Unix(1000, 0)
	v.now = func() time.Time { return now }
	ctx := context.Background()
	review := func(name, want string) scheduling.PlacementReviewStatus {
		t.Helper()
		st, err := v.Review(ctx, reviewOf(name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Cluster != want {
			t.Fatalf("review for %q placed on %q, want %q: %s", name, st.Cluster, want, st.Message)
		}
		return st
	}

	// Reviews that only ask hold nothing: both see a empty.
	review("", "a")
	review("", "a")
	if n := res.Len(); n != 0 {
		t.Fatalf("dry reviews left %d reservations", n)
	}

	// k and l take a's two cpu; the next review goes to b.
	review("k", "a")
	review("l", "a")
	review("", "b")
	// k reviewed again (its write failed, say) replaces its own
	// reservation: a still holds it.
	review("k", "a")
	if n := res.Len(); n != 2 {
		t.Fatalf("%d reservations, want k's and l's", n)
	}

	// A change of k counted before its review ends nothing.
	_, pv, _ := v.capacities(ctx)
	res.Seen(PlacementKey{Namespace: "tenant", Name: "k"}, pv)
	review("", "b")

	// k's Placement is written on a and counted: its reservation ends, and
	// a counts k once, l's reservation still held.
	totals.add(&scheduling.PlacementSpec{Cluster: "a", Pool: "p", Replicas: 1,
		Resources: scheduling.Resources{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}})
	v2, _ := totals.Version()
	res.Seen(PlacementKey{Namespace: "tenant", Name: "k"}, v2)
	review("", "b")
	if n := res.Len(); n != 1 {
		t.Errorf("%d reservations once k's Placement was counted, want l's alone", n)
	}

	// l's Placement never comes: after the time to live a is free again
	// for what k leaves.
	now = now.Add(ReservationTTL + time.Second)
	review("", "a")
	if n := res.Len(); n != 0 {
		t.Errorf("%d reservations after their time to live, want none", n)
	}

	// A reserving review nothing can take ends the Placement's
	// reservation.
	review("m", "a")
	huge := reviewOf("m")
	huge.Resources.CPU = resource.MustParse("64")
	if st, err := v.Review(ctx, huge); err != nil || st.Schedulable {
		t.Fatalf("64 cpu placed (%v): %s", err, st.Message)
	}
	if n := res.Len(); n != 0 {
		t.Errorf("an unschedulable review left %d reservations, want none", n)
	}
}

// TestReviewSaysRoomIsHeld: a review refused only for the room held for
// Placements being written says so, and how long that lasts at most.
func TestReviewSaysRoomIsHeld(t *testing.T) {
	v, _, _ := reservingView(t, "2")
	ctx := context.Background()
	for _, name := range []string{"k", "l"} {
		if st, err := v.Review(ctx, reviewOf(name)); err != nil || st.Cluster != "a" {
			t.Fatalf("%s placed on %q (%v), want a", name, st.Cluster, err)
		}
	}
	onA := reviewOf("")
	onA.Constraints.Pool = "p"
	st, err := v.Review(ctx, onA)
	if err != nil {
		t.Fatal(err)
	}
	if st.Schedulable || !strings.Contains(st.Message, "counting the room held for Placements being written, for at most 30s") {
		t.Errorf("a review refused for the room held says %q", st.Message)
	}
}
