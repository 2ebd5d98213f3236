package platformtest_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/controllers"
	capicrds "bex.co/bex/deploy/capi-crds"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/test/platformtest"
)

// TestJoinMachineBesideAnnotation joins a Machine from the copy its
// creation returned after another writer (the FleetUpgrade controller
// putting its deletion hook on) changed it: the join must land, and keep
// the annotation. A status update with the stale resourceVersion fails
// with a conflict, and a simulated KubeadmControlPlane that lost its join
// rolled on with a machine the verifier could not see.
func TestJoinMachineBesideAnnotation(t *testing.T) {
	cp := cptest.StartBare(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), capicrds.CRDs()); err != nil {
		t.Fatalf("installing Cluster API CRDs: %v", err)
	}
	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "cp-1"},
		Spec: clusterv1.MachineSpec{
			ClusterName: "c", Version: "v1.36.3", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("cp-1-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "LocalMachine", Name: "cp-1"},
		},
	}
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	other := &clusterv1.Machine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), other); err != nil {
		t.Fatal(err)
	}
	const hook = clusterv1.PreDrainDeleteHookAnnotationPrefix + "/bex-gate"
	other.Annotations = map[string]string{hook: "up"}
	if err := c.Update(ctx, other); err != nil {
		t.Fatal(err)
	}

	if err := platformtest.JoinMachine(ctx, c, m, "cp-1", "10.0.0.1"); err != nil {
		t.Fatalf("joining from a copy older than the hook: %v", err)
	}
	got := &clusterv1.Machine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	if !platformtest.MachineJoined(got) || got.Status.NodeRef.Name != "cp-1" || len(got.Status.Addresses) != 2 {
		t.Errorf("the Machine's status after the join: %+v, want joined as cp-1 with two addresses", got.Status)
	}
	if got.Annotations[hook] != "up" {
		t.Errorf("the Machine's annotations after the join: %v, want the hook kept", got.Annotations)
	}
}
