package app_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/apiserver/local"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/app"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/test/scheduler/fleettest"
)

// moveTimeout bounds how long a move may take once its cause is in place:
// "within about a minute", with nothing but the controller's own resync to
// bring the App back.
const moveTimeout = 75 * time.Second

// TestAppFollowsTheFleet runs the App controller with the SchedulerPlacer
// against a real apiserver with bex-apiserver registered, its fleet being
// embedded mode's standby static cluster "local" and, later, two Cluster
// API clusters whose nodes live in the same apiserver. It checks that the
// standby cluster takes an App only while no Cluster API cluster can run
// apps (and keeps the one it has); that an App moves off a cordoned cluster
// (Placement spec.cluster, movedFrom and the App's status.cluster) without
// any change to the App; that a rescale updates the Placement; that an App
// stays where it is when no other cluster can take it; and that it moves
// back to the standby cluster once every Cluster API cluster is being
// deleted, while an App no other cluster can hold stays, and is reported
// unplaced once its cluster is gone.
func TestAppFollowsTheFleet(t *testing.T) {
	ctx, f := startFleet(t)
	c := f.c
	// Uncached, as controllers.Setup gives it.
	startController(ctx, t, f.cp.RESTConfig(), nil, app.SchedulerPlacer{Client: c})

	// No Cluster API cluster: the standby cluster takes the first App.
	first := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "first"}}
	if err := c.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, c, first, "local", metav1.ConditionTrue, "placed on local/default")
	waitCapacity(t, c, "local", func(s *schedulingv1alpha1.ClusterCapacityStatus) error {
		if !s.Standby || !s.AcceptsPlacements {
			return fmt.Errorf("local: standby=%t accepts=%t (%s)", s.Standby, s.AcceptsPlacements, s.Message)
		}
		return nil
	})

	// Two Cluster API clusters that run apps: alpha (4 cpu, 8Gi) and
	// beta (16 cpu, 32Gi). The standby cluster takes no new App now.
	f.seed(ctx, t, seededCluster("alpha", "4", "8Gi"), seededCluster("beta", "16", "32Gi"))
	waitCapacity(t, c, "local", func(s *schedulingv1alpha1.ClusterCapacityStatus) error {
		if s.AcceptsPlacements || s.Reason != schedulingv1alpha1.ReasonStandby || !strings.Contains(s.Message, "alpha, beta") {
			return fmt.Errorf("local: accepts=%t reason=%s (%s)", s.AcceptsPlacements, s.Reason, s.Message)
		}
		return nil
	})
	// A standard App (1 cpu, 2Gi) goes to alpha: BinPack would have
	// chosen local (31 against 25) were it not on standby.
	shop := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "shop"}, Spec: platformv1alpha1.AppSpec{Plan: platformv1alpha1.PlanStandard}}
	if err := c.Create(ctx, shop); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, c, shop, "alpha", metav1.ConditionTrue, "placed on alpha/workers")
	if pl := placementOf(ctx, t, c, first); pl.Spec.Cluster != "local" || pl.Spec.MovedFrom != nil {
		t.Fatalf("first: the standby cluster is no reason to move, got %+v", pl.Spec)
	}
	// batch (6 cpu) fits beta only, and never local.
	batch := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "batch"}, Spec: platformv1alpha1.AppSpec{
		Plan: platformv1alpha1.PlanStandard, Resources: &platformv1alpha1.Resources{CPU: ptr.To(resource.MustParse("6"))}}}
	if err := c.Create(ctx, batch); err != nil {
		t.Fatal(err)
	}
	waitPlaced(t, c, batch, "beta", metav1.ConditionTrue, "placed on beta/workers")

	// alpha is cordoned: shop moves to beta, with nothing changed on it.
	setClusterMeta(ctx, t, c, "alpha", func(cl *clusterv1.Cluster) { cl.Annotations[schedulingv1alpha1.CordonedAnnotation] = "true" })
	cordoned := time.Now()
	waitPlaced(t, c, shop, "beta", metav1.ConditionTrue, "from alpha/workers")
	t.Logf("shop moved to beta %s after alpha's cordon", time.Since(cordoned).Round(time.Second))
	pl := placementOf(ctx, t, c, shop)
	if m := pl.Spec.MovedFrom; pl.Spec.Cluster != "beta" || pl.Spec.Pool != "workers" || m == nil || m.Cluster != "alpha" || m.Pool != "workers" ||
		m.Reason != schedulingv1alpha1.ReasonCordoned || !strings.Contains(m.Message, "alpha is cordoned") {
		t.Fatalf("shop's Placement after the cordon: %+v (movedFrom %+v)", pl.Spec, pl.Spec.MovedFrom)
	}
	cs := kubernetes.NewForConfigOrDie(f.cp.RESTConfig())
	platformtest.Eventually(t, time.Minute, "a Moved event on shop", func(ctx context.Context) error {
		evs, err := cs.EventsV1().Events(shop.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Name != shop.Name {
				continue
			}
			if e.Reason == "Moved" && strings.Contains(e.Note, "Placed again on beta/workers, away from alpha/workers") {
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return fmt.Errorf("shop's events: %v", seen)
	})

	// A rescale: 2 web replicas of 1 cpu and 1Gi each.
	patchApp(ctx, t, c, shop, func(a *platformv1alpha1.App) {
		a.Spec.Processes = []platformv1alpha1.Process{{Name: "web", Replicas: ptr.To[int32](2)}}
		a.Spec.Resources = &platformv1alpha1.Resources{Memory: ptr.To(resource.MustParse("1Gi"))}
	})
	platformtest.Eventually(t, moveTimeout, "shop's Placement rescaled", func(ctx context.Context) error {
		pl := placementOf(ctx, t, c, shop)
		if s := pl.Spec; s.Cluster != "beta" || s.Replicas != 2 || s.Resources.CPU.Cmp(resource.MustParse("1")) != 0 || s.Resources.Memory.Cmp(resource.MustParse("1Gi")) != 0 {
			return fmt.Errorf("placement: %s/%s %d × (cpu %s, memory %s)", s.Cluster, s.Pool, s.Replicas, s.Resources.CPU.String(), s.Resources.Memory.String())
		}
		return nil
	})

	// beta is cordoned too: alpha is cordoned and local stands by (both
	// Cluster API clusters still run apps), so shop stays on beta.
	setClusterMeta(ctx, t, c, "beta", func(cl *clusterv1.Cluster) { cl.Annotations[schedulingv1alpha1.CordonedAnnotation] = "true" })
	got := waitPlaced(t, c, shop, "beta", metav1.ConditionTrue, "stays on beta/workers although beta is cordoned")
	msg := meta.FindStatusCondition(got.Status.Conditions, platformv1alpha1.AppPlacedCondition).Message
	for _, s := range []string{"alpha: Cordoned", "local: Standby"} {
		if !strings.Contains(msg, s) {
			t.Errorf("Placed message %q does not say %q", msg, s)
		}
	}
	if pl := placementOf(ctx, t, c, shop); pl.Spec.Cluster != "beta" || pl.Spec.MovedFrom == nil || pl.Spec.MovedFrom.Cluster != "alpha" {
		t.Fatalf("shop's Placement when nothing else fits: %+v", pl.Spec)
	}

	// Both Cluster API clusters are being deleted (a finalizer holds them):
	// no Cluster API cluster runs apps, the standby cluster takes them, and
	// shop moves there; batch, too big for local, stays on beta.
	for _, name := range []string{"alpha", "beta"} {
		setClusterMeta(ctx, t, c, name, func(cl *clusterv1.Cluster) { cl.Finalizers = append(cl.Finalizers, "test.bex.co/hold") })
		if err := c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-" + name, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	waitCapacity(t, c, "beta", func(s *schedulingv1alpha1.ClusterCapacityStatus) error {
		if !s.Deleting || s.AcceptsPlacements || s.Reason != schedulingv1alpha1.ReasonDeleting {
			return fmt.Errorf("beta: deleting=%t accepts=%t reason=%s", s.Deleting, s.AcceptsPlacements, s.Reason)
		}
		return nil
	})
	deleted := time.Now()
	waitPlaced(t, c, shop, "local", metav1.ConditionTrue, "from beta/workers")
	t.Logf("shop moved to local %s after the clusters' deletion", time.Since(deleted).Round(time.Second))
	// beta is cordoned and being deleted: the reason recorded is the one
	// the round that moved shop read, and with the capacity watch that
	// round may have begun before beta's deletion showed.
	if pl := placementOf(ctx, t, c, shop); pl.Spec.Pool != "default" || pl.Spec.Replicas != 2 || pl.Spec.MovedFrom == nil ||
		(pl.Spec.MovedFrom.Reason != schedulingv1alpha1.ReasonDeleting && pl.Spec.MovedFrom.Reason != schedulingv1alpha1.ReasonCordoned) {
		t.Fatalf("shop's Placement after the deletion: %+v (movedFrom %+v)", pl.Spec, pl.Spec.MovedFrom)
	}
	waitPlaced(t, c, batch, "beta", metav1.ConditionTrue, "stays on beta/workers although beta is being deleted")

	// beta's deletion ends: the cluster is gone from the fleet and nothing
	// else holds batch. Placed turns False with the scheduler's reasons;
	// status.cluster and the Placement still name beta.
	setClusterMeta(ctx, t, c, "beta", func(cl *clusterv1.Cluster) { cl.Finalizers = nil })
	got = waitPlaced(t, c, batch, "beta", metav1.ConditionFalse, "cluster beta is gone from the fleet")
	msg = meta.FindStatusCondition(got.Status.Conditions, platformv1alpha1.AppPlacedCondition).Message
	if !strings.Contains(msg, "local/default: InsufficientCPU") {
		t.Errorf("Placed message %q does not say why local cannot take batch", msg)
	}
	if pl := placementOf(ctx, t, c, batch); pl.Spec.Cluster != "beta" || pl.Spec.MovedFrom != nil {
		t.Fatalf("batch's Placement once beta is gone: %+v", pl.Spec)
	}
}

// fleet is a control plane with bex-apiserver beside it, whose fleet is
// embedded mode's standby static cluster "local" until seed adds Cluster
// API clusters, and the namespace tenant-a for the Apps.
type fleet struct {
	cp *controlplane.ControlPlane
	// c is an uncached client of the plane with the controllers' scheme.
	c          client.Client
	kubeconfig []byte
}

// startFleet starts a fleet that lasts until the test ends, and returns
// it with a context that ends with the test, or after 10 minutes.
func startFleet(t *testing.T) (context.Context, *fleet) {
	t.Helper()
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	c := startBexAPIServer(ctx, t, local.Options{ControlPlane: cp})
	kubeconfig, err := os.ReadFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}); err != nil {
		t.Fatal(err)
	}
	return ctx, &fleet{cp: cp, c: c, kubeconfig: kubeconfig}
}

// seed adds the clusters to the fleet, their nodes in the same apiserver.
func (f *fleet) seed(ctx context.Context, t *testing.T, clusters ...fleettest.Cluster) {
	t.Helper()
	for _, fc := range clusters {
		if err := fleettest.Seed(ctx, f.c, f.c, f.kubeconfig, fc); err != nil {
			t.Fatalf("seeding %s: %v", fc.Name, err)
		}
	}
}

// startBexAPIServer starts bex-apiserver with opts (its Dir a temporary
// one) beside opts.ControlPlane until the test ends, and returns an
// uncached client of the plane with the controllers' scheme.
func startBexAPIServer(ctx context.Context, t *testing.T, opts local.Options) client.Client {
	t.Helper()
	opts.Dir = t.TempDir()
	srv, err := local.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting bex-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stopping bex-apiserver: %v", err)
		}
	})
	c, err := client.New(opts.ControlPlane.RESTConfig(), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// seededCluster is a Cluster API cluster of one ready node in pool
// "workers", in namespace fleet-NAME.
func seededCluster(name, cpu, mem string) fleettest.Cluster {
	return fleettest.Cluster{
		Name: name, Namespace: "fleet-" + name, SpecVersion: "v1.37.2",
		Versions: []fleettest.Version{{Version: "v1.37.2", Replicas: 1}},
		Pools:    []fleettest.Pool{{Name: "workers", Nodes: []fleettest.Node{{Name: name + "-w-1", CPU: cpu, Memory: mem, Pods: 110, Ready: true}}}},
	}
}

// waitPlaced polls until the App is on cluster with its Placed condition
// at status and a message containing substr.
func waitPlaced(t *testing.T, c client.Client, a *platformv1alpha1.App, cluster string, status metav1.ConditionStatus, substr string) *platformv1alpha1.App {
	t.Helper()
	return waitPlacedWithin(t, moveTimeout, c, a, cluster, status, substr)
}

// waitPlacedWithin is waitPlaced with a deadline of timeout.
func waitPlacedWithin(t *testing.T, timeout time.Duration, c client.Client, a *platformv1alpha1.App, cluster string, status metav1.ConditionStatus, substr string) *platformv1alpha1.App {
	t.Helper()
	got := &platformv1alpha1.App{}
	platformtest.Eventually(t, timeout, fmt.Sprintf("%s on %s, Placed=%s saying %q", a.Name, cluster, status, substr), func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil {
			return err
		}
		placed := meta.FindStatusCondition(got.Status.Conditions, platformv1alpha1.AppPlacedCondition)
		if got.Status.Cluster != cluster || placed == nil || placed.Status != status || !strings.Contains(placed.Message, substr) {
			return fmt.Errorf("status.cluster %q, Placed %+v", got.Status.Cluster, placed)
		}
		return nil
	})
	return got
}

// waitCapacity polls until the cluster's ClusterCapacity passes check.
func waitCapacity(t *testing.T, c client.Client, cluster string, check func(*schedulingv1alpha1.ClusterCapacityStatus) error) {
	t.Helper()
	platformtest.Eventually(t, time.Minute, "the capacity of "+cluster, func(ctx context.Context) error {
		cc := &schedulingv1alpha1.ClusterCapacity{}
		if err := c.Get(ctx, client.ObjectKey{Name: cluster}, cc); err != nil {
			return err
		}
		return check(&cc.Status)
	})
}

func placementOf(ctx context.Context, t *testing.T, c client.Client, a *platformv1alpha1.App) *schedulingv1alpha1.Placement {
	t.Helper()
	pl := &schedulingv1alpha1.Placement{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), pl); err != nil {
		t.Fatalf("the Placement of %s: %v", a.Name, err)
	}
	return pl
}

// setClusterMeta changes the metadata of the Cluster API Cluster
// fleet-NAME/NAME.
func setClusterMeta(ctx context.Context, t *testing.T, c client.Client, name string, change func(*clusterv1.Cluster)) {
	t.Helper()
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "fleet-" + name, Name: name}, cl); err != nil {
		t.Fatal(err)
	}
	base := cl.DeepCopy()
	if cl.Annotations == nil {
		cl.Annotations = map[string]string{}
	}
	change(cl)
	if err := c.Patch(ctx, cl, client.MergeFrom(base)); err != nil {
		t.Fatalf("patching cluster %s: %v", name, err)
	}
}

func patchApp(ctx context.Context, t *testing.T, c client.Client, a *platformv1alpha1.App, change func(*platformv1alpha1.App)) {
	t.Helper()
	got := &platformv1alpha1.App{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil {
		t.Fatal(err)
	}
	base := got.DeepCopy()
	change(got)
	if err := c.Patch(ctx, got, client.MergeFrom(base)); err != nil {
		t.Fatalf("patching app %s: %v", a.Name, err)
	}
}
