package platformtest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateCluster creates through c the Cluster API Cluster namespace/name
// as the local fleet makes one (its control plane a KubeadmControlPlane,
// its infrastructure a LocalCluster, both named like it and neither
// created here: nothing acts on the Cluster), and returns it.
func CreateCluster(ctx context.Context, t testing.TB, c client.Client, namespace, name string) *clusterv1.Cluster {
	t.Helper()
	cl := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: name},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.bex.co", Kind: "LocalCluster", Name: name},
		},
	}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	return cl
}

// CreateRuntimeFleet creates through c what a test of the fleet's runtime
// kubeconfigs starts from: the namespaces "fleet" and "bex", a Cluster of
// each name of clusters in fleet (CreateCluster), and the Secret
// bex/bex-runtime-kubeconfigs, into which controllers/runtimecreds writes
// those kubeconfigs (placed.KubeOptions.RuntimeSecret), holding data (nil:
// no key yet). It returns the Secret.
func CreateRuntimeFleet(ctx context.Context, t testing.TB, c client.Client, data map[string][]byte, clusters ...string) *corev1.Secret {
	t.Helper()
	for _, ns := range []string{"fleet", "bex"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range clusters {
		CreateCluster(ctx, t, c, "fleet", name)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bex", Name: "bex-runtime-kubeconfigs"},
		Data:       data,
	}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	return secret
}
