package app

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
)

func capacity(cpu, mem string, pods int64) schedulingv1alpha1.Capacity {
	return schedulingv1alpha1.Capacity{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem), Pods: pods}
}

func sized(replicas int32, cpu, mem string) size {
	return size{Replicas: replicas, Plan: "standard", Resources: schedulingv1alpha1.Resources{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem)}}
}

func TestLeaveReason(t *testing.T) {
	// The App is placed on alpha/workers at 2 × (1, 2Gi); the pool holds
	// 4 cpu, 8Gi and 10 pods, and requests 3 cpu, 6Gi, 3 pods with it.
	spec := &schedulingv1alpha1.PlacementSpec{App: "shop", Cluster: "alpha", Pool: "workers", Plan: "standard", Replicas: 2,
		Resources: schedulingv1alpha1.Resources{CPU: resource.MustParse("1"), Memory: resource.MustParse("2Gi")}}
	has := sizeOf(spec)
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	cluster := func(mod func(*schedulingv1alpha1.ClusterCapacityStatus)) *schedulingv1alpha1.ClusterCapacity {
		cc := &schedulingv1alpha1.ClusterCapacity{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}, Status: schedulingv1alpha1.ClusterCapacityStatus{
			Healthy: true, AcceptsPlacements: true, Reason: schedulingv1alpha1.ReasonAccepting,
			Pools: []schedulingv1alpha1.PoolCapacity{
				{Name: "big", Nodes: 1, ReadyNodes: 1, Allocatable: capacity("64", "256Gi", 110), Requested: capacity("0", "0", 0)},
				{Name: "workers", Nodes: 1, ReadyNodes: 1, Allocatable: capacity("4", "8Gi", 10), Requested: capacity("3", "6Gi", 3)},
			},
		}}
		if mod != nil {
			mod(&cc.Status)
		}
		return cc
	}
	workers := func(alloc, req schedulingv1alpha1.Capacity) func(*schedulingv1alpha1.ClusterCapacityStatus) {
		return func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Pools[1].Allocatable, s.Pools[1].Requested = alloc, req
		}
	}
	for _, tc := range []struct {
		name    string
		cc      *schedulingv1alpha1.ClusterCapacity
		want    size
		reason  string
		message string
	}{
		{name: "room left: stays", cc: cluster(nil), want: has},
		{name: "gone from the fleet", cc: nil, want: has, reason: schedulingv1alpha1.ReasonClusterGone, message: "cluster alpha is gone from the fleet"},
		{name: "being deleted", cc: cluster(func(s *schedulingv1alpha1.ClusterCapacityStatus) { s.Deleting, s.Cordoned = true, true }), want: has,
			reason: schedulingv1alpha1.ReasonDeleting, message: "alpha is being deleted"},
		{name: "cordoned", cc: cluster(func(s *schedulingv1alpha1.ClusterCapacityStatus) { s.Cordoned, s.MidUpgrade = true, true }), want: has,
			reason: schedulingv1alpha1.ReasonCordoned, message: "alpha is cordoned (annotation scheduling.bex.co/cordoned=true)"},
		{name: "mid-upgrade", cc: cluster(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.MidUpgrade, s.Reason, s.Message = true, schedulingv1alpha1.ReasonMidUpgrade, "control plane runs v1.36.3 ×2, v1.37.2 ×1"
		}), want: has, reason: schedulingv1alpha1.ReasonMidUpgrade, message: "alpha is mid-upgrade (control plane runs v1.36.3 ×2, v1.37.2 ×1)"},
		{name: "unhealthy and cordoned: the cordon counts", cc: cluster(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Healthy, s.Cordoned, s.Reason = false, true, schedulingv1alpha1.ReasonUnhealthy
		}), want: has, reason: schedulingv1alpha1.ReasonCordoned, message: "alpha is cordoned"},
		{name: "unhealthy is no reason to move, even with its pools unread", cc: cluster(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Healthy, s.Reason, s.Pools = false, schedulingv1alpha1.ReasonUnhealthy, nil
		}), want: has},
		{name: "over-committed on cpu", cc: cluster(workers(capacity("4", "8Gi", 10), capacity("5", "6Gi", 3))), want: has,
			reason: schedulingv1alpha1.ReasonOverCommitted, message: "alpha/workers is over-committed (cpu: 5 requested, 4 allocatable)"},
		{name: "over-committed on memory and pods", cc: cluster(workers(capacity("4", "4Gi", 2), capacity("3", "6Gi", 3))), want: has,
			reason: schedulingv1alpha1.ReasonOverCommitted, message: "alpha/workers is over-committed (memory: 6Gi requested, 4Gi allocatable; pods: 3 requested, 2 allocatable)"},
		{name: "the pool lost its ready nodes", cc: cluster(workers(capacity("0", "0", 0), capacity("3", "6Gi", 3))), want: has,
			reason: schedulingv1alpha1.ReasonOverCommitted, message: "alpha/workers is over-committed (cpu: 3 requested, 0 allocatable"},
		{name: "the pool's nodes all not ready: stays, as when unhealthy", cc: cluster(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Pools[1].ReadyNodes, s.Pools[1].Allocatable = 0, capacity("0", "0", 0)
		}), want: has},
		{name: "the pool's nodes not ready for less than the grace: stays", cc: cluster(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Pools[1].ReadyNodes, s.Pools[1].Allocatable = 0, capacity("0", "0", 0)
			s.Pools[1].NotReadySince = &metav1.Time{Time: now.Add(-NotReadyGrace + time.Second)}
		}), want: has},
		{name: "the pool's nodes not ready past the grace: leaves", cc: cluster(func(s *schedulingv1alpha1.ClusterCapacityStatus) {
			s.Pools[1].ReadyNodes, s.Pools[1].Allocatable = 0, capacity("0", "0", 0)
			s.Pools[1].NotReadySince = &metav1.Time{Time: now.Add(-NotReadyGrace)}
		}), want: has, reason: schedulingv1alpha1.ReasonNotReady, message: "alpha/workers has had no ready node since 2026-12-03T09:55:00Z (more than 5m0s)"},
		{name: "the pool is gone", cc: cluster(func(s *schedulingv1alpha1.ClusterCapacityStatus) { s.Pools = s.Pools[:1] }), want: has,
			reason: schedulingv1alpha1.ReasonOverCommitted, message: "alpha has no pool workers any more"},
		{name: "a rescale that fits stays", cc: cluster(nil), want: sized(3, "1", "2Gi")},
		{name: "a rescale that does not fit", cc: cluster(nil), want: sized(4, "1", "2Gi"),
			reason: schedulingv1alpha1.ReasonOverCommitted, message: "alpha/workers cannot hold the app at 4 × (cpu 1, memory 2Gi) (cpu: 5 requested, 4 allocatable; memory: 10Gi requested, 8Gi allocatable)"},
		{name: "a shrink ends the over-commitment", cc: cluster(workers(capacity("4", "8Gi", 10), capacity("5", "6Gi", 3))), want: sized(1, "1", "2Gi")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := leaveReason(tc.cc, spec, tc.want, now)
			if reason != tc.reason || !strings.Contains(msg, tc.message) {
				t.Fatalf("leaveReason = %q, %q; want %q, %q", reason, msg, tc.reason, tc.message)
			}
		})
	}
}

func TestWantedSize(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, tc := range []struct {
		name string
		spec platformv1alpha1.AppSpec
		want size
	}{
		{name: "the plan sizes a replica", spec: platformv1alpha1.AppSpec{Plan: "standard"}, want: sized(1, "1", "2Gi")},
		{name: "resources override the plan", spec: platformv1alpha1.AppSpec{Plan: "standard", Resources: &platformv1alpha1.Resources{CPU: q("500m")}},
			want: sized(1, "500m", "2Gi")},
		{name: "instances of every process", spec: platformv1alpha1.AppSpec{Plan: "standard", Processes: []platformv1alpha1.Process{
			{Name: "worker", Replicas: ptr.To[int32](5)}, {Name: "web", Replicas: ptr.To[int32](3)}}}, want: sized(8, "1", "2Gi")},
		{name: "one web instance unless it says", spec: platformv1alpha1.AppSpec{Plan: "standard", Processes: []platformv1alpha1.Process{
			{Name: "worker", Replicas: ptr.To[int32](2)}, {Name: "web", Command: "./serve"}}}, want: sized(3, "1", "2Gi")},
		{name: "the release phase runs no instance", spec: platformv1alpha1.AppSpec{Plan: "standard", Processes: []platformv1alpha1.Process{
			{Name: "release", Replicas: ptr.To[int32](4)}, {Name: "clock"}}}, want: sized(1, "1", "2Gi")},
		{name: "zero web replicas place one, as a review does", spec: platformv1alpha1.AppSpec{Plan: "standard", Processes: []platformv1alpha1.Process{
			{Name: "web", Replicas: ptr.To[int32](0)}}}, want: sized(1, "1", "2Gi")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wantedSize(&platformv1alpha1.App{Spec: tc.spec})
			if !got.equal(tc.want) {
				t.Fatalf("wantedSize = %s (%s), want %s", got, got.Plan, tc.want)
			}
		})
	}
}
