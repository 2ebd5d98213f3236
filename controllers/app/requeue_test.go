package app

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
)

// watchAll is a Releases whose runtime watches every app; noWatch one
// whose runtime watches none. Neither is called but for that.
type (
	watchAll struct{ Releases }
	noWatch  struct{ Releases }
)

func (watchAll) WatchHealth(context.Context, func(tenant, app string)) {}
func (watchAll) WatchesHealth(string, string) bool                     { return true }

// TestRequeueAfter: when an App is looked at again with nothing to bring
// it back.
func TestRequeueAfter(t *testing.T) {
	released := func(suspended bool) *platformv1alpha1.App {
		a := &platformv1alpha1.App{}
		a.Status.CurrentRelease = 3
		a.Spec.Suspended = suspended
		return a
	}
	placed := func(static bool) Placement { return Placement{Placed: true, Cluster: "c", Static: static} }
	serving := func(a *platformv1alpha1.App, pl *Placement) *scope {
		s := &scope{app: a, runtimeObserved: true, runtimeReady: true}
		if pl != nil {
			s.placementObserved, s.placement = true, *pl
		}
		return s
	}
	polled := &Reconciler{Releases: noWatch{}}
	watching := &Reconciler{Releases: watchAll{}}
	// A Placer whose capacity watch is not up (yet), and one whose is.
	watchingPlaced := &Reconciler{Releases: watchAll{}, Placer: SchedulerPlacer{}, capacity: &capacityWatch{synced: func() bool { return false }}}
	capacityWatched := &Reconciler{Releases: watchAll{}, Placer: SchedulerPlacer{}, capacity: &capacityWatch{synced: func() bool { return true }}}
	capacityWatched.capacity.live.Store(true)
	static, capi, nowhere := placed(true), placed(false), Placement{}
	notReady := capi
	notReady.RecheckAfter = time.Minute
	failing := serving(released(false), nil)
	failing.runtimeReady = false
	for _, tc := range []struct {
		name     string
		r        *Reconciler
		s        *scope
		min, max time.Duration
	}{
		{"no release, no placer", watching, serving(&platformv1alpha1.App{}, nil), 0, 0},
		{"a runtime that does not watch", polled, serving(released(false), nil), ResyncPeriod, ResyncPeriod},
		{"watched and serving", watching, serving(released(false), nil), watchedResync, watchedResync * 6 / 5},
		{"watched, in maintenance", watching, serving(released(true), nil), watchedResync, watchedResync * 6 / 5},
		{"watched but failing", watching, failing, ResyncPeriod, ResyncPeriod},
		{"watched, on a static cluster", watchingPlaced, serving(released(false), &static), watchedResync, watchedResync * 6 / 5},
		{"watched, on a Cluster API cluster", watchingPlaced, serving(released(false), &capi), placementResync, placementResync},
		{"placed nowhere", watchingPlaced, serving(released(false), &nowhere), ResyncPeriod, ResyncPeriod},
		{"no release, placed nowhere", watchingPlaced, serving(&platformv1alpha1.App{}, &nowhere), placementResync, placementResync},
		// The capacity watch tells of the clusters' changes: the
		// placement falls back to the safety net.
		{"capacity watched, on a static cluster", capacityWatched, serving(released(false), &static), watchedResync, watchedResync * 6 / 5},
		{"capacity watched, on a Cluster API cluster", capacityWatched, serving(released(false), &capi), watchedResync, watchedResync * 6 / 5},
		{"capacity watched, pool not ready", capacityWatched, serving(released(false), &notReady), time.Minute, time.Minute},
		{"capacity watched, placed nowhere", capacityWatched, serving(released(false), &nowhere), ResyncPeriod, ResyncPeriod},
		{"capacity watched, no release, placed nowhere", capacityWatched, serving(&platformv1alpha1.App{}, &nowhere), watchedResync, watchedResync * 6 / 5},
		{"capacity watched, no release, on a static cluster", capacityWatched, serving(&platformv1alpha1.App{}, &static), 0, 0},
	} {
		if got := tc.r.requeueAfter(tc.s); got < tc.min || got > tc.max {
			t.Errorf("%s: requeue after %s, want %s to %s", tc.name, got, tc.min, tc.max)
		}
	}
}

// TestCapacityConcerns: which changes of a cluster's capacity bring back
// the Apps placed on it, and which those placed nowhere.
func TestCapacityConcerns(t *testing.T) {
	capacity := func(change func(*schedulingv1alpha1.ClusterCapacityStatus)) *schedulingv1alpha1.ClusterCapacity {
		q := resource.MustParse
		cc := &schedulingv1alpha1.ClusterCapacity{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}, Status: schedulingv1alpha1.ClusterCapacityStatus{
			Source: "ClusterAPI", Healthy: true, AcceptsPlacements: true, Region: "eu",
			Pools: []schedulingv1alpha1.PoolCapacity{{
				Name: "workers", Nodes: 2, ReadyNodes: 2,
				Allocatable: schedulingv1alpha1.Capacity{CPU: q("4"), Memory: q("8Gi"), Pods: 110},
				Requested:   schedulingv1alpha1.Capacity{CPU: q("2"), Memory: q("4Gi"), Pods: 2},
			}},
		}}
		if change != nil {
			change(&cc.Status)
		}
		return cc
	}
	requested := func(cpu string) func(*schedulingv1alpha1.ClusterCapacityStatus) {
		return func(s *schedulingv1alpha1.ClusterCapacityStatus) { s.Pools[0].Requested.CPU = resource.MustParse(cpu) }
	}
	base := capacity(nil)
	for _, tc := range []struct {
		name             string
		old, cur         *schedulingv1alpha1.ClusterCapacity
		placed, unplaced bool
	}{
		{"added", nil, base, true, true},
		{"gone", base, nil, true, false},
		{"unchanged", base, capacity(nil), false, false},
		{"cordoned", base, capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Cordoned, s.AcceptsPlacements = true, false
		}), true, false},
		{"uncordoned", capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) { s.Cordoned, s.AcceptsPlacements = true, false }), base, true, true},
		{"being deleted", base, capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) { s.Deleting = true }), true, false},
		{"mid-upgrade", base, capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) { s.MidUpgrade = true }), true, false},
		{"unhealthy", base, capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) { s.Healthy = false }), true, false},
		{"a node less", base, capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Pools[0].ReadyNodes, s.Pools[0].Allocatable.CPU = 1, resource.MustParse("2")
		}), true, false},
		{"a node more", base, capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Pools[0].ReadyNodes, s.Pools[0].Allocatable.CPU = 3, resource.MustParse("6")
		}), true, true},
		{"no ready node", base, capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Pools[0].ReadyNodes, s.Pools[0].NotReadySince = 0, &metav1.Time{Time: time.Now()}
		}), true, false},
		{"a message alone", base, capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) { s.Message = "x" }), false, false},
		// What the Placements request changes with every App placed.
		{"an App placed, room left", base, capacity(requested("3")), false, false},
		{"an App gone", base, capacity(requested("1")), false, true},
		{"over-committed", base, capacity(requested("5")), true, false},
		{"still over-committed, one App left", capacity(requested("6")), capacity(requested("5")), true, true},
		{"back within room", capacity(requested("5")), capacity(requested("4")), true, true},
		{"a new pool", base, capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Pools = append(s.Pools, schedulingv1alpha1.PoolCapacity{Name: "big", ReadyNodes: 1})
		}), true, true},
		{"starts accepting (standby no more)", capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Source, s.Standby, s.AcceptsPlacements = "Static", true, false
		}), capacity(func(s *schedulingv1alpha1.ClusterCapacityStatus) { s.Source, s.Standby = "Static", true }), false, true},
	} {
		placed, unplaced := capacityConcerns(tc.old, tc.cur)
		if placed != tc.placed || unplaced != tc.unplaced {
			t.Errorf("%s: placed %t, unplaced %t; want %t, %t", tc.name, placed, unplaced, tc.placed, tc.unplaced)
		}
	}
}

func TestNotReadyLeft(t *testing.T) {
	now := time.Now()
	cc := func(healthy bool, ready int32, since time.Duration) *schedulingv1alpha1.ClusterCapacity {
		p := schedulingv1alpha1.PoolCapacity{Name: "workers", Nodes: 1, ReadyNodes: ready}
		if since > 0 {
			p.NotReadySince = &metav1.Time{Time: now.Add(-since)}
		}
		return &schedulingv1alpha1.ClusterCapacity{Status: schedulingv1alpha1.ClusterCapacityStatus{Healthy: healthy, Pools: []schedulingv1alpha1.PoolCapacity{p}}}
	}
	for _, tc := range []struct {
		name string
		cc   *schedulingv1alpha1.ClusterCapacity
		want time.Duration
	}{
		{"gone", nil, 0},
		{"ready", cc(true, 1, 0), 0},
		{"not ready for a minute", cc(true, 0, time.Minute), NotReadyGrace - time.Minute + time.Second},
		{"not ready past the grace", cc(true, 0, NotReadyGrace+time.Second), 0},
		{"unhealthy", cc(false, 0, time.Minute), 0},
	} {
		if got := notReadyLeft(tc.cc, "workers", now); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
