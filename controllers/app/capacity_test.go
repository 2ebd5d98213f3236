package app_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/controllers/app"
	"bex.co/bex/test/platformtest"
)

// capacityTimeout bounds how long a placement takes to follow a change
// of the fleet that the capacity watch tells of: far below the 30 s
// resync the controller had, and the hour this test sets it to.
const capacityTimeout = 20 * time.Second

// TestPlacementFollowsCapacityWatch runs the App controller with the
// SchedulerPlacer and its placement resync set to an hour, against a real
// apiserver with bex-apiserver registered, so that only the watch of the
// ClusterCapacities brings an App back when the fleet changes under it:
// an App moves off its cluster once the cluster is cordoned, and off a
// pool whose node shrank below what it holds (a workload Node's event,
// which no Cluster API object shows); an App no cluster can take is placed
// once a cluster with room joins, and is reported unplaced once that
// cluster is gone.
func TestPlacementFollowsCapacityWatch(t *testing.T) {
	ctx, f := startFleet(t)
	c := f.c
	f.seed(ctx, t, seededCluster("alpha", "4", "8Gi"), seededCluster("beta", "16", "32Gi"))
	placer := &countingPlacer{Placer: app.SchedulerPlacer{Client: c}, calls: map[string]int{}}
	startReconciler(ctx, t, f.cp.RESTConfig(), &app.Reconciler{Placer: placer, PlacementResync: time.Hour})

	// BinPack: a standard App (1 cpu, 2Gi) fills alpha first.
	shop := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "shop"}, Spec: platformv1alpha1.AppSpec{Plan: platformv1alpha1.PlanStandard}}
	if err := c.Create(ctx, shop); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, c, shop, "alpha", metav1.ConditionTrue, "placed on alpha/workers")
	placer.waitQuiet(t, shop.Name)

	// alpha is cordoned: shop moves to beta.
	setClusterMeta(ctx, t, c, "alpha", func(cl *clusterv1.Cluster) { cl.Annotations[schedulingv1alpha1.CordonedAnnotation] = "true" })
	start := time.Now()
	waitPlacedWithin(t, capacityTimeout, c, shop, "beta", metav1.ConditionTrue, "alpha is cordoned")
	t.Logf("shop moved off cordoned alpha in %s", time.Since(start).Round(time.Millisecond))
	placer.waitQuiet(t, shop.Name)

	// alpha is back; beta's node shrinks to half a CPU, below shop's one:
	// beta/workers is over-committed and shop moves back to alpha.
	setClusterMeta(ctx, t, c, "alpha", func(cl *clusterv1.Cluster) { delete(cl.Annotations, schedulingv1alpha1.CordonedAnnotation) })
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "beta-w-1"}, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("500m")
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	waitPlacedWithin(t, capacityTimeout, c, shop, "alpha", metav1.ConditionTrue, "beta/workers is over-committed")
	t.Logf("shop moved off over-committed beta in %s", time.Since(start).Round(time.Millisecond))

	// batch (12 cpu) fits nowhere: alpha has 3 cpu free, beta half of
	// one, and the standby local takes nothing while they run apps.
	batch := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "batch"}, Spec: platformv1alpha1.AppSpec{
		Plan: platformv1alpha1.PlanStandard, Resources: &platformv1alpha1.Resources{CPU: ptr.To(resource.MustParse("12"))}}}
	if err := c.Create(ctx, batch); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, c, batch, "", metav1.ConditionFalse, "alpha/workers: InsufficientCPU")
	placer.waitQuiet(t, batch.Name)

	// gamma (16 cpu) joins the fleet: batch goes there.
	f.seed(ctx, t, seededCluster("gamma", "16", "32Gi"))
	start = time.Now()
	waitPlacedWithin(t, capacityTimeout, c, batch, "gamma", metav1.ConditionTrue, "placed on gamma/workers")
	t.Logf("batch placed on gamma %s after it was seeded", time.Since(start).Round(time.Millisecond))
	placer.waitQuiet(t, batch.Name)

	// gamma goes: nothing else holds batch, which is reported unplaced.
	if err := c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-gamma", Name: "gamma"}}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	waitPlacedWithin(t, capacityTimeout, c, batch, "gamma", metav1.ConditionFalse, "cluster gamma is gone from the fleet")
	t.Logf("batch reported unplaced %s after gamma's deletion", time.Since(start).Round(time.Millisecond))
}

// countingPlacer counts the Place calls per App.
type countingPlacer struct {
	app.Placer
	mu    sync.Mutex
	calls map[string]int
}

func (p *countingPlacer) Place(ctx context.Context, a *platformv1alpha1.App) (app.Placement, error) {
	p.mu.Lock()
	p.calls[a.Name]++
	p.mu.Unlock()
	return p.Placer.Place(ctx, a)
}

// waitQuiet waits until the App has not been placed for 2 s: the rounds
// its own status writes bring have ended, and only a watch can bring it
// back before the hour this test sets.
func (p *countingPlacer) waitQuiet(t *testing.T, name string) {
	t.Helper()
	last, since := -1, time.Now()
	platformtest.Eventually(t, time.Minute, name+" not reconciled for 2 s", func(context.Context) error {
		p.mu.Lock()
		n := p.calls[name]
		p.mu.Unlock()
		if n != last {
			last, since = n, time.Now()
			return errors.New("reconciled")
		}
		if time.Since(since) < 2*time.Second {
			return errors.New("quiet for less than 2 s")
		}
		return nil
	})
}
