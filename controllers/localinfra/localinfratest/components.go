package localinfratest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"bex.co/bex/test/platformtest"
)

// CheckComponents checks through the cluster's endpoint that the machines
// of version run kube-controller-manager and kube-scheduler: one of them
// holds each component's leader lease; a new namespace gets its default
// ServiceAccount (the controller manager's serviceaccount controller), a
// Deployment its ReplicaSet and Pod (its controllers), which the
// scheduler tries to place (Pending: the control-plane Nodes are tainted);
// the components' mirror Pods are ready; and each machine's Node lease is
// renewed, as the kubelet does, so the node lifecycle controller keeps its
// Node ready.
func CheckComponents(t *testing.T, workload kubernetes.Interface, version string) {
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
