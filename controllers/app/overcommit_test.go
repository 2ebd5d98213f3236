package app_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/controllers/app"
	"bex.co/bex/test/platformtest"
)

// TestPlacingAtOnceDoesNotOverCommit places twelve standard Apps (1 cpu,
// 2Gi each) at once on alpha (room for four) and beta (for sixteen), bin
// packing preferring alpha, against a real apiserver with bex-apiserver
// registered. Reviews that will be recorded hold their pool's room until
// the Placement is seen: twelve such reviews through the aggregator,
// none written, put four on alpha and eight on beta (all twelve on alpha
// before); the App controller's eight workers then place the twelve Apps
// with no pool over-committed and no App moved. When alpha then shrinks
// to two cpu, the two Apps placed there last leave and the other two
// stay, rather than each App that looks.
func TestPlacingAtOnceDoesNotOverCommit(t *testing.T) {
	ctx, f := startFleet(t)
	c := f.c
	f.seed(ctx, t, seededCluster("alpha", "4", "8Gi"), seededCluster("beta", "16", "32Gi"))
	waitCapacity(t, c, "beta", func(s *schedulingv1alpha1.ClusterCapacityStatus) error {
		if !s.AcceptsPlacements {
			return fmt.Errorf("beta takes no placements: %s", s.Message)
		}
		return nil
	})
	const apps = 12
	name := func(i int) string { return fmt.Sprintf("app-%02d", i) }

	// Twelve reviews at once, each naming the Placement it stands for.
	var wg sync.WaitGroup
	chosen := make([]string, apps)
	errs := make([]error, apps)
	for i := range apps {
		wg.Go(func() {
			r := &schedulingv1alpha1.PlacementReview{Spec: schedulingv1alpha1.PlacementReviewSpec{
				App: name(i), Replicas: 1, Constraints: schedulingv1alpha1.PlacementConstraints{Plan: "standard"},
				Candidates: schedulingv1alpha1.CandidatesNone,
				Reserve:    &schedulingv1alpha1.PlacementRef{Namespace: "tenant-a", Name: name(i)},
			}}
			errs[i] = c.Create(ctx, r)
			chosen[i] = r.Status.Cluster
		})
	}
	wg.Wait()
	perCluster := map[string]int{}
	for i := range apps {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		perCluster[chosen[i]]++
	}
	if perCluster["alpha"] != 4 || perCluster["beta"] != apps-4 {
		t.Fatalf("12 concurrent reviews chose %v, want alpha 4 and beta 8", perCluster)
	}

	// The controller places the Apps those reviews stood for: each
	// review replaces its App's reservation.
	placer := &countingPlacer{Placer: app.SchedulerPlacer{Client: c}, calls: map[string]int{}}
	startController(ctx, t, f.cp.RESTConfig(), nil, placer)
	for i := range apps {
		a := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name(i)}, Spec: platformv1alpha1.AppSpec{Plan: platformv1alpha1.PlanStandard}}
		if err := c.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	placements := func(ctx context.Context) (map[string][]schedulingv1alpha1.Placement, error) {
		var list schedulingv1alpha1.PlacementList
		if err := c.List(ctx, &list, client.InNamespace("tenant-a")); err != nil {
			return nil, err
		}
		out := map[string][]schedulingv1alpha1.Placement{}
		for _, p := range list.Items {
			out[p.Spec.Cluster] = append(out[p.Spec.Cluster], p)
		}
		return out, nil
	}
	platformtest.Eventually(t, 2*time.Minute, "12 Apps placed", func(ctx context.Context) error {
		by, err := placements(ctx)
		if err != nil {
			return err
		}
		if n := len(by["alpha"]) + len(by["beta"]); n != apps {
			return fmt.Errorf("%d Placements", n)
		}
		return nil
	})
	by, err := placements(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(by["alpha"]) != 4 {
		t.Errorf("%d Apps on alpha (room for 4), %d on beta", len(by["alpha"]), len(by["beta"]))
	}
	for _, ps := range by {
		for _, p := range ps {
			if m := p.Spec.MovedFrom; m != nil {
				t.Errorf("%s moved from %s/%s: %s", p.Name, m.Cluster, m.Pool, m.Message)
			}
		}
	}

	// alpha's node shrinks to two cpu: two of its four Apps leave.
	onAlpha := map[string]int{}
	placer.mu.Lock()
	for _, p := range by["alpha"] {
		onAlpha[p.Name] = placer.calls[p.Name]
	}
	placer.mu.Unlock()
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "alpha-w-1"}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("2")
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 2*time.Minute, "two Apps left alpha, each of its four looked", func(ctx context.Context) error {
		by, err := placements(ctx)
		if err != nil {
			return err
		}
		if n := len(by["alpha"]); n != 2 {
			return fmt.Errorf("%d Apps on alpha", n)
		}
		placer.mu.Lock()
		defer placer.mu.Unlock()
		for name, n := range onAlpha {
			if placer.calls[name] == n {
				return fmt.Errorf("%s not placed again since alpha shrank", name)
			}
		}
		return nil
	})
	// Those that stay had their turn: once they are quiet, none more left.
	for name := range onAlpha {
		placer.waitQuiet(t, name)
	}
	by, err = placements(ctx)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, ps := range by {
		for _, p := range ps {
			if p.Spec.MovedFrom != nil {
				moved++
			}
		}
	}
	if len(by["alpha"]) != 2 || moved != 2 {
		t.Errorf("after alpha shrank to 2 cpu: %d Apps on it, %d moved; want 2 and 2", len(by["alpha"]), moved)
	}
}
