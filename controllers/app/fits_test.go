package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/apiserver/local"
	"bex.co/bex/controllers/app"
	"bex.co/bex/internal/controlplane/cptest"
)

// TestFits asks the SchedulerPlacer, against a real apiserver with
// bex-apiserver registered and one static cluster of 4 cpu and 8Gi,
// whether Apps have room at a new size: a Placement that grows within its
// pool fits, one that grows past it does not (and the answer names the
// size and the cluster's shortage), another App's Placement takes its
// share of the room, a shrinking App always fits, and an App that is not
// placed yet gets the scheduler's verdict. Fits changes no Placement.
func TestFits(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := startBexAPIServer(ctx, t, local.Options{ControlPlane: cp, LocalClusters: []string{"small:cpu=4,memory=8Gi,pods=110"}})
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}); err != nil {
		t.Fatal(err)
	}
	place := func(name string, replicas int32) {
		t.Helper()
		pl := &schedulingv1alpha1.Placement{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name},
			Spec: schedulingv1alpha1.PlacementSpec{App: name, Cluster: "small", Pool: "default", Plan: "standard", Replicas: replicas,
				Resources: schedulingv1alpha1.Resources{CPU: resource.MustParse("1"), Memory: resource.MustParse("2Gi")}},
		}
		if err := c.Create(ctx, pl); err != nil {
			t.Fatalf("placing %s: %v", name, err)
		}
	}
	sized := func(name string, counts map[string]int32) *platformv1alpha1.App {
		a := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name}, Spec: platformv1alpha1.AppSpec{Plan: platformv1alpha1.PlanStandard}}
		for _, p := range []string{"web", "worker"} {
			if n, ok := counts[p]; ok {
				a.Spec.Processes = append(a.Spec.Processes, platformv1alpha1.Process{Name: p, Replicas: ptr.To(n)})
			}
		}
		return a
	}
	p := app.SchedulerPlacer{Client: c}
	fits := func(a *platformv1alpha1.App, want string) {
		t.Helper()
		why, err := p.Fits(ctx, a)
		if err != nil {
			t.Fatalf("Fits(%s %v): %v", a.Name, a.Spec.Processes, err)
		}
		switch {
		case want == "" && why != "":
			t.Errorf("Fits(%s %v) = %q, want room", a.Name, a.Spec.Processes, why)
		case want != "" && !strings.Contains(why, want):
			t.Errorf("Fits(%s %v) = %q, want it to say %q", a.Name, a.Spec.Processes, why, want)
		}
	}

	// shop runs 2 standard instances (2 cpu, 4Gi) on small.
	place("shop", 2)
	fits(sized("shop", map[string]int32{"web": 2}), "")
	fits(sized("shop", map[string]int32{"web": 3, "worker": 1}), "")
	fits(sized("shop", map[string]int32{"web": 4, "worker": 1}), "no cluster of the fleet can hold shop at 5 × (cpu 1, memory 2Gi)")
	fits(sized("shop", map[string]int32{"web": 5}), "small")

	// Another App takes 1 cpu and 2Gi: shop no longer grows to 4.
	place("blog", 1)
	fits(sized("shop", map[string]int32{"web": 3}), "")
	fits(sized("shop", map[string]int32{"web": 4}), "no cluster of the fleet can hold shop at 4 × (cpu 1, memory 2Gi)")
	// Shrinking always fits, whatever the pool holds.
	fits(sized("shop", map[string]int32{"web": 1}), "")

	// An App without a Placement: the scheduler's verdict on the room
	// that is left (1 cpu, 2Gi).
	fits(sized("cron", map[string]int32{"web": 1}), "")
	fits(sized("cron", map[string]int32{"web": 2}), "no cluster of the fleet can hold cron at 2 × (cpu 1, memory 2Gi)")

	// Nothing was written.
	pl := &schedulingv1alpha1.Placement{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant-a", Name: "shop"}, pl); err != nil || pl.Spec.Replicas != 2 {
		t.Errorf("shop's Placement after Fits: %d replicas, %v; want 2 as placed", pl.Spec.Replicas, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant-a", Name: "cron"}, &schedulingv1alpha1.Placement{}); err == nil {
		t.Errorf("Fits placed cron")
	}
}
