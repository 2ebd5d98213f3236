package workerhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"bex.co/bex/controllers"
	"bex.co/bex/controllers/workerhook"
	capicrds "bex.co/bex/deploy/capi-crds"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

// keep is a finalizer that stands in for Cluster API's own, so that a
// deleted Cluster or Machine stays with its deletionTimestamp.
const keep = "test.bex.co/keep"

// maxHold is the reconciler's bound in this test: long enough for the move
// it makes, short enough to wait for.
const maxHold = 40 * time.Second

// TestWorkersWaitForTheirApps runs the reconciler against a real apiserver
// and the store's record of where apps run. It checks that worker Machines
// get the pre-drain hook and control-plane Machines do not; that a worker
// deleted while its Cluster stays is let go at once; that a worker of a
// Cluster being deleted is held while the cluster serves an app and let go
// once the app moved; and that a hold ends at MaxHold with a Warning event
// naming the app that did not move.
func TestWorkersWaitForTheirApps(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), capicrds.CRDs()); err != nil {
		t.Fatalf("installing Cluster API's CRDs: %v", err)
	}
	st, err := store.Open(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.CreateTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "Cluster API's kinds served", func(ctx context.Context) error {
		if err := c.List(ctx, &clusterv1.ClusterList{}); err != nil {
			return err
		}
		return c.List(ctx, &clusterv1.MachineList{})
	})
	startController(ctx, t, cp, st)

	for _, name := range []string{"alpha", "beta"} {
		cl := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Finalizers: []string{keep}},
			Spec: clusterv1.ClusterSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.bex.co", Kind: "LocalCluster", Name: name},
			},
		}
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	cpMachine := newMachine(t, c, "alpha", "alpha-cp", true)
	scaledDown := newMachine(t, c, "alpha", "alpha-w1", false)
	moving := newMachine(t, c, "alpha", "alpha-w2", false)
	stuck := newMachine(t, c, "beta", "beta-w1", false)
	for _, m := range []*clusterv1.Machine{scaledDown, moving, stuck} {
		waitHook(t, c, m, true)
	}
	// Given the time the workers took, the control-plane Machine was seen
	// too: it has no hook.
	if err := c.Get(ctx, client.ObjectKeyFromObject(cpMachine), cpMachine); err != nil {
		t.Fatal(err)
	}
	if _, ok := cpMachine.Annotations[workerhook.Hook]; ok {
		t.Errorf("control-plane machine %s has the hook: %v", cpMachine.Name, cpMachine.Annotations)
	}

	// The cluster stays: its worker goes at once, apps or not.
	if err := st.SetServingCluster(ctx, "acme", "web", "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetServingCluster(ctx, "acme", "stuck", "beta"); err != nil {
		t.Fatal(err)
	}
	deleteObject(t, c, scaledDown)
	waitHook(t, c, scaledDown, false)
	letGo(t, c, scaledDown)

	// The clusters are deleted: their workers wait for their apps.
	for _, name := range []string{"alpha", "beta"} {
		deleteObject(t, c, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}})
	}
	deleteObject(t, c, moving)
	deleteObject(t, c, stuck)
	deleted := time.Now()
	held := 15 * time.Second // three looks at the store
	time.Sleep(held)
	for _, m := range []*clusterv1.Machine{moving, stuck} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m.Annotations[workerhook.TerminateHook]; !ok {
			t.Fatalf("%s was let go %s into its cluster's deletion, with an app still there: no %s, the hook Cluster API honours then", m.Name, held, workerhook.TerminateHook)
		}
	}
	waitEvent(t, cp, moving.Name, "WaitingForApps", "acme/web")

	// acme/web moves: alpha's worker goes after the settle time.
	if err := st.SetServingCluster(ctx, "acme", "web", "local"); err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	waitHook(t, c, moving, false)
	t.Logf("let go %s after the app moved", time.Since(moved).Round(100*time.Millisecond))
	if time.Since(deleted) >= maxHold {
		t.Fatalf("alpha's worker was let go %s after its deletion: by MaxHold, not by the move", time.Since(deleted))
	}
	waitEvent(t, cp, moving.Name, "AppsMoved", "alpha serves no app")
	letGo(t, c, moving)

	// acme/stuck does not move: beta's worker goes at MaxHold.
	waitHook(t, c, stuck, false)
	if waited := time.Since(deleted); waited < maxHold-time.Second {
		t.Fatalf("beta's worker was let go %s after its deletion, before MaxHold (%s)", waited, maxHold)
	}
	waitEvent(t, cp, stuck.Name, "AppsNotMoved", "beta still serves acme/stuck")
	letGo(t, c, stuck)
}

func startController(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, st *store.Store) {
	t.Helper()
	mgr, err := ctrl.NewManager(cp.RESTConfig(), ctrl.Options{
		Scheme:                 controllers.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &workerhook.Reconciler{Client: mgr.GetClient(), Apps: st, Events: mgr.GetEventRecorder(workerhook.ControllerName), MaxHold: maxHold}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { <-done })
}

// newMachine creates a Machine of cluster, with the keep finalizer.
func newMachine(t *testing.T, c client.Client, cluster, name string, controlPlane bool) *clusterv1.Machine {
	t.Helper()
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster}
	if controlPlane {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	} else {
		labels[clusterv1.MachineDeploymentNameLabel] = cluster + "-workers"
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels, Finalizers: []string{keep}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.bex.co", Kind: "LocalMachine", Name: name},
		},
	}
	if err := c.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitHook waits until m has the hook (on) or has lost it.
func waitHook(t *testing.T, c client.Client, m *clusterv1.Machine, on bool) {
	t.Helper()
	platformtest.Eventually(t, time.Minute, fmt.Sprintf("%s with the hook: %t", m.Name, on), func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		// Both hooks: Cluster API honours only the pre-terminate one for
		// a Machine whose Cluster is being deleted.
		_, drain := m.Annotations[workerhook.Hook]
		_, terminate := m.Annotations[workerhook.TerminateHook]
		if drain != on || terminate != on {
			return fmt.Errorf("annotations %v", m.Annotations)
		}
		return nil
	})
}

func deleteObject(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
}

// letGo removes the keep finalizer, as Cluster API would once it deleted
// the machine.
func letGo(t *testing.T, c client.Client, m *clusterv1.Machine) {
	t.Helper()
	base := m.DeepCopy()
	controllerutil.RemoveFinalizer(m, keep)
	if err := c.Patch(t.Context(), m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// waitEvent waits for an event about the machine with reason and a note
// that contains substr.
func waitEvent(t *testing.T, cp *controlplane.ControlPlane, machine, reason, substr string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, fmt.Sprintf("a %s event on %s", reason, machine), func(ctx context.Context) error {
		evs, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Name != machine {
				continue
			}
			if e.Reason == reason && strings.Contains(e.Note, substr) {
				return nil
			}
			seen = append(seen, describe(e))
		}
		return fmt.Errorf("events: %v", seen)
	})
}

func describe(e eventsv1.Event) string { return e.Reason + ": " + e.Note }
