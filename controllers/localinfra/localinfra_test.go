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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/test/platformtest"
)

// TestKubeadmControlPlaneRollsLocalMachines makes a three-machine cluster
// with the real KubeadmControlPlane and the local provider, then has KCP
// roll it to the next Kubernetes version with maxSurge 0: each machine is
// a real kube-apiserver, kube-controller-manager and kube-scheduler,
// replaced one at a time, never more than three.
// noSecretLists fails t when the provider's manager listed or watched
// Secrets with their data: its cache must hold none (the clusters' keys,
// the tenants' values), it reads the Secrets it needs uncached.
func noSecretLists(t *testing.T, f *localinfratest.Fleet) {
	if reqs := f.SecretLists.Requests(); len(reqs) > 0 {
		t.Errorf("the manager listed or watched Secrets with their data, so its cache holds them: %v", reqs)
	}
}

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
	checkComponents(t, workload, from)
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
	checkComponents(t, workload, to)
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

// checkComponents checks through the cluster's endpoint that the machines
// of version run kube-controller-manager and kube-scheduler: one of them
// holds each component's leader lease; a new namespace gets its default
// ServiceAccount (the controller manager's serviceaccount controller), a
// Deployment its ReplicaSet and Pod (its controllers), which the
// scheduler tries to place (Pending: the control-plane Nodes are tainted);
// the components' mirror Pods are ready; and each machine's Node lease is
// renewed, as the kubelet does, so the node lifecycle controller keeps its
// Node ready.
func checkComponents(t *testing.T, workload kubernetes.Interface, version string) {
	t.Helper()
	ctx := context.Background()
	list, err := workload.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, n := range list.Items {
		if n.Status.NodeInfo.KubeletVersion == version {
			nodes = append(nodes, n.Name)
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("Nodes of %s: %v, want 3", version, nodes)
	}
	for _, component := range []string{"kube-controller-manager", "kube-scheduler"} {
		// A new leader takes over once the lease of a deleted machine's
		// expires (15 s).
		platformtest.Eventually(t, time.Minute, component+"'s lease held by a "+version+" machine", func(ctx context.Context) error {
			l, err := workload.CoordinationV1().Leases("kube-system").Get(ctx, component, metav1.GetOptions{})
			if err != nil {
				return err
			}
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			if !slices.ContainsFunc(nodes, func(n string) bool { return strings.HasPrefix(holder, n+"_") }) {
				return fmt.Errorf("held by %q", holder)
			}
			return nil
		})
	}
	ns := "components-" + strings.NewReplacer("v", "", ".", "-").Replace(version)
	if _, err := workload.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "namespace "+ns+"'s default ServiceAccount", func(ctx context.Context) error {
		_, err := workload.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	labels := map[string]string{"app": "pause"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if _, err := workload.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "the Deployment's ReplicaSet, and its Pod seen by the scheduler", func(ctx context.Context) error {
		rss, err := workload.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(rss.Items) != 1 {
			return fmt.Errorf("%d ReplicaSets", len(rss.Items))
		}
		pods, err := workload.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d Pods", len(pods.Items))
		}
		for _, c := range pods.Items[0].Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return nil
			}
		}
		return fmt.Errorf("Pod %s has no PodScheduled condition: no scheduler tried it", pods.Items[0].Name)
	})
	for _, n := range nodes {
		for _, component := range []string{"kube-controller-manager", "kube-scheduler"} {
			pod, err := workload.CoreV1().Pods("kube-system").Get(ctx, component+"-"+n, metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				continue
			}
			ready := slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			})
			var command []string
			for _, c := range pod.Spec.Containers {
				command = append(command, c.Command...)
			}
			if !ready || !slices.Contains(command, "--leader-elect=true") {
				t.Errorf("mirror Pod %s: ready %v, command %q", pod.Name, ready, command)
			}
		}
		l, err := workload.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			continue
		}
		if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > 30*time.Second {
			t.Errorf("Node %s's lease was last renewed at %v", n, l.Spec.RenewTime)
		}
	}
}
