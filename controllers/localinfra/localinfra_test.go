package localinfra_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/test/platformtest"
)

// noSecretLists fails t when the provider's manager listed or watched
// Secrets with their data: its cache must hold none (the clusters' keys,
// the tenants' values), it reads the Secrets it needs uncached.
func noSecretLists(t *testing.T, f *localinfratest.Fleet) {
	if reqs := f.SecretLists.Requests(); len(reqs) > 0 {
		t.Errorf("the manager listed or watched Secrets with their data, so its cache holds them: %v", reqs)
	}
}

// TestKubeadmControlPlaneRollsLocalMachines makes a three-machine cluster
// with the real KubeadmControlPlane and the local provider, then has KCP
// roll it to the next Kubernetes version with maxSurge 0: each machine is
// a real kube-apiserver, kube-controller-manager and kube-scheduler,
// replaced one at a time, never more than three.
func TestKubeadmControlPlaneRollsLocalMachines(t *testing.T) {
	t.Parallel() // on a management cluster and a local cluster of its own
	// The two newest pinned versions: the ones make test builds.
	versions := kubebin.KubeVersions()
	from, to := "v"+versions[len(versions)-2], "v"+versions[len(versions)-1]
	f := localinfratest.Start(t, localinfratest.Options{Version: to})
	t.Cleanup(func() { noSecretLists(t, f) })
	const ns, name = "default", "local-1"
	ctx := context.Background()
	f.CreateCluster(t, localinfra.ClusterOptions{Namespace: ns, Name: name, Version: from, ControlPlaneReplicas: 3})
	kcpKey := client.ObjectKey{Namespace: ns, Name: name + "-control-plane"}

	// Watch the Machines all along: how many exist at once, and which go.
	w := localinfratest.WatchMachines(f.Client, ns, name, localinfratest.WatchOptions{})
	defer w.Close()

	start := time.Now()
	waitAvailable := func(version string) {
		t.Helper()
		f.WaitControlPlane(t, ns, name, version, 3, 10*time.Minute)
	}
	waitAvailable(from)
	t.Logf("three %s machines ready in %s", from, time.Since(start).Round(time.Second))

	// What KCP and the Machine controller read of the workload cluster is
	// there, through the cluster's own endpoint and credentials.
	workload := f.WorkloadClient(t, ns, name)
	nodes, err := workload.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Errorf("%d Nodes in the workload cluster, want 3", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; !ok || !strings.HasPrefix(n.Spec.ProviderID, infrav1.ProviderIDPrefix) {
			t.Errorf("Node %s: labels %v, providerID %q", n.Name, n.Labels, n.Spec.ProviderID)
		}
	}
	if _, err := workload.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{}); err != nil {
		t.Errorf("kubeadm-config: %v", err)
	}
	leases, err := workload.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver"})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 3 {
		t.Errorf("%d apiserver identity leases, want 3: each machine is its own host", len(leases.Items))
	}
	// The LocalCluster reports its load balancer's backends at its next
	// resync (15 s).
	platformtest.Eventually(t, time.Minute, "three backends in the LocalCluster's status", func(ctx context.Context) error {
		lc := &infrav1.LocalCluster{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, lc); err != nil {
			return err
		}
		if len(lc.Status.Backends) != 3 {
			return fmt.Errorf("load balancer backends %v", lc.Status.Backends)
		}
		return nil
	})
	localinfratest.CheckComponents(t, workload, from)
	before := len(w.Snapshot())

	// The version bump: KCP replaces the machines one at a time.
	start = time.Now()
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := f.Client.Get(ctx, kcpKey, kcp); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(kcp.DeepCopy())
	kcp.Spec.Version = to
	if err := f.Client.Patch(ctx, kcp, patch); err != nil {
		t.Fatal(err)
	}
	waitAvailable(to)
	t.Logf("rolled to %s in %s", to, time.Since(start).Round(time.Second))
	localinfratest.CheckComponents(t, workload, to)
	w.Close()
	if maxMachines := w.MaxAtOnce(); maxMachines > 3 {
		t.Errorf("%d Machines existed at once: maxSurge 0 allows three", maxMachines)
	}
	gone := w.Snapshot()
	gone = slices.DeleteFunc(gone, func(ml localinfratest.MachineLife) bool { return ml.Gone.IsZero() })
	slices.SortFunc(gone, func(a, b localinfratest.MachineLife) int { return a.Gone.Compare(b.Gone) })
	var deleted []string
	for _, ml := range gone {
		deleted = append(deleted, ml.Name)
		if ml.Version != from {
			t.Errorf("a %s machine %s was deleted", ml.Version, ml.Name)
		}
	}
	if len(deleted) != before {
		t.Errorf("machines deleted %v, want the %d of %s", deleted, before, from)
	}
	t.Logf("KCP deleted, in order: %v", deleted)

	// Deleting the Cluster deletes its machines' processes and files.
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := f.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 5*time.Minute, "the LocalCluster gone", func(ctx context.Context) error {
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &infrav1.LocalCluster{}); err == nil {
			return fmt.Errorf("LocalCluster %s still there", name)
		}
		return nil
	})
	if f.Host.Cluster(ns, name) != nil {
		t.Error("the host still runs the deleted cluster")
	}
	if _, err := os.Stat(filepath.Join(f.Dir, "fleet", ns, name)); !os.IsNotExist(err) {
		t.Errorf("the deleted cluster's files remain: %v", err)
	}
}
