package localinfra_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/controllers/workerhook"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/test/platformtest"
)

// TestMachineDeploymentRunsWorkers makes a cluster with a MachineDeployment
// of two workers: each is bex-node on its own address, whose Node Cluster
// API's Machine controller matches by provider ID, registered with the
// labels and taints of the KubeadmConfigTemplate's nodeRegistration (and
// no node-role label, as kubeadm gives a worker none). A Pod that selects
// the workers' label and tolerates their taint is scheduled onto one,
// pulls from the registry with the node's credentials, serves on its Pod
// IP, and its log is read through the cluster's apiserver (the apiserver's
// kubelet client, allowed by kubeadm's cluster-admins binding); one that
// does not tolerate the taint is not scheduled. Scaling the
// MachineDeployment down stops one worker and removes its Node.
func TestMachineDeploymentRunsWorkers(t *testing.T) {
	t.Parallel() // on a management cluster and a local cluster of its own
	sandboxtest.Require(t)
	versions := kubebin.KubeVersions()
	version := "v" + versions[len(versions)-1]
	dir := t.TempDir()

	const token = "s3cret"
	reg, err := registry.New(filepath.Join(dir, "registry"), token)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg.Handler())
	t.Cleanup(srv.Close)
	regHost := strings.TrimPrefix(srv.URL, "http://")
	image := regHost + "/tenant-a/testapp:1"
	runtimetest.PushTestApp(t, image, dir, registry.Auth(token), nil)
	regConfig := filepath.Join(dir, "config.json")
	if err := registry.WriteDockerConfig(regConfig, regHost, token); err != nil {
		t.Fatal(err)
	}

	bin := platformtest.BuildBinaries(t, "bex-node")
	f := localinfratest.Start(t, localinfratest.Options{Version: version, Host: localfleet.Options{
		NodeBinary: filepath.Join(bin, "bex-node"), NodeRegistryConfig: regConfig,
	}, Setup: func(mgr ctrl.Manager) error {
		// The platform's deletion hook on workers (controllers/workerhook),
		// as make run runs it; no cluster of this test is deleted, so no app
		// is served by one.
		return (&workerhook.Reconciler{
			Client: mgr.GetClient(), Apps: noApps{}, Events: mgr.GetEventRecorder(workerhook.ControllerName),
			Workloads: workerhook.SecretWorkloads(mgr.GetAPIReader()),
		}).SetupWithManager(mgr)
	}})
	t.Cleanup(func() { noSecretLists(t, f) })
	const ns, name = "default", "workers-1"
	ctx := context.Background()
	start := time.Now()
	pool := map[string]string{"bex.co/pool": "general"}
	dedicated := corev1.Taint{Key: "bex.co/dedicated", Value: "apps", Effect: corev1.TaintEffectNoSchedule}
	f.CreateCluster(t, localinfra.ClusterOptions{Namespace: ns, Name: name, Version: version, ControlPlaneReplicas: 3,
		WorkerReplicas: 2, WorkerLabels: pool, WorkerTaints: []corev1.Taint{dedicated}})
	f.WaitControlPlane(t, ns, name, version, 3, 10*time.Minute)
	workload := f.WorkloadClient(t, ns, name)

	// The workers' Machines get their Nodes: Cluster API matched them by
	// the provider ID bex-node registered.
	var workers []corev1.Node
	platformtest.Eventually(t, 5*time.Minute, "two worker Machines with ready Nodes", func(ctx context.Context) error {
		var machines clusterv1.MachineList
		if err := f.Client.List(ctx, &machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: name + "-md-0"}); err != nil {
			return err
		}
		if len(machines.Items) != 2 {
			return fmt.Errorf("%d worker Machines", len(machines.Items))
		}
		workers = workers[:0]
		for _, m := range machines.Items {
			if !m.Status.NodeRef.IsDefined() {
				return fmt.Errorf("Machine %s has no nodeRef yet (phase %s)", m.Name, m.Status.Phase)
			}
			n, err := workload.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n.Spec.ProviderID != m.Spec.ProviderID || !strings.HasPrefix(n.Spec.ProviderID, infrav1.ProviderIDPrefix) {
				return fmt.Errorf("Node %s has provider ID %q, its Machine %q", n.Name, n.Spec.ProviderID, m.Spec.ProviderID)
			}
			if !nodeIsReady(n) {
				return fmt.Errorf("Node %s is not ready", n.Name)
			}
			// What the API's fleet view counts as a ready worker.
			if !meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineNodeReadyCondition) {
				return fmt.Errorf("Machine %s is not NodeReady: %+v", m.Name, m.Status.Conditions)
			}
			for k := range n.Labels {
				if strings.HasPrefix(k, "node-role.kubernetes.io/") {
					return fmt.Errorf("worker Node %s has the role label %s, which kubeadm gives no worker", n.Name, k)
				}
			}
			if n.Labels["bex.co/pool"] != "general" || n.Labels["kubernetes.io/hostname"] != n.Name {
				return fmt.Errorf("worker Node %s has labels %v, want bex.co/pool=general from its nodeRegistration beside the kubelet's own", n.Name, n.Labels)
			}
			if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != dedicated.Key || n.Spec.Taints[0].Value != dedicated.Value || n.Spec.Taints[0].Effect != dedicated.Effect {
				return fmt.Errorf("worker Node %s has taints %v, want those of its nodeRegistration, %v", n.Name, n.Spec.Taints, dedicated)
			}
			if n.Status.NodeInfo.KubeletVersion != version {
				return fmt.Errorf("Node %s reports kubelet %s, want %s", n.Name, n.Status.NodeInfo.KubeletVersion, version)
			}
			workers = append(workers, *n)
		}
		return nil
	})
	t.Logf("three control-plane machines and two workers ready in %s", time.Since(start).Round(time.Second))
	for _, n := range workers {
		if f.Host.Cluster(ns, name).Worker(n.Name) == nil {
			t.Errorf("the host runs no worker %s", n.Name)
		}
	}

	// A Pod that selects the workers' pool and tolerates their taint is
	// scheduled onto one and runs there, pulled with the node's registry
	// credentials.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: pool,
			Tolerations:  []corev1.Toleration{{Key: dedicated.Key, Operator: corev1.TolerationOpEqual, Value: dedicated.Value, Effect: dedicated.Effect}},
			// bex-node mounts no volumes, the token's either (docs/fleet.md).
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "web", Image: image,
				Env:   []corev1.EnvVar{{Name: "PORT", Value: "8080"}, {Name: runtimetest.EnvVersion, Value: "on-a-worker"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			}},
		},
	}
	if _, err := workload.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One that does not tolerate the taint fits no node: the control
	// plane's three have kubeadm's taint, the two workers theirs (without
	// it, it would be bound to a worker as the one above).
	intolerant := pod.DeepCopy()
	intolerant.Name, intolerant.Spec.Tolerations = "intolerant", nil
	if _, err := workload.CoreV1().Pods("default").Create(ctx, intolerant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "the Pod without the toleration unschedulable for the workers' taint", func(ctx context.Context) error {
		p, err := workload.CoreV1().Pods("default").Get(ctx, intolerant.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				strings.Contains(c.Message, "5 node(s) had untolerated taint") {
				return nil
			}
		}
		return fmt.Errorf("Pod on %q, conditions %+v", p.Spec.NodeName, p.Status.Conditions)
	})
	if err := workload.CoreV1().Pods("default").Delete(ctx, intolerant.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var podIP string
	platformtest.Eventually(t, 2*time.Minute, "the Pod serving on its IP", func(ctx context.Context) error {
		p, err := workload.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("the Pod failed: %s: %s", p.Status.Reason, p.Status.Message)
		}
		if !slices.ContainsFunc(workers, func(n corev1.Node) bool { return n.Name == p.Spec.NodeName }) {
			return fmt.Errorf("Pod on %q, want a worker", p.Spec.NodeName)
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("Pod phase %s, IP %q, statuses %+v", p.Status.Phase, p.Status.PodIP, p.Status.ContainerStatuses)
		}
		podIP = p.Status.PodIP
		resp, err := http.Get("http://" + podIP + ":8080/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "on-a-worker") {
			return fmt.Errorf("the Pod answers %q", body)
		}
		return nil
	})
	platformtest.Eventually(t, time.Minute, "the Pod's log through the apiserver", func(ctx context.Context) error {
		raw, err := workload.CoreV1().Pods("default").GetLogs("hello", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(string(raw), "listening on port 8080") {
			return fmt.Errorf("log %q", raw)
		}
		return nil
	})
	if err := workload.CoreV1().Pods("default").Delete(ctx, "hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "the Pod gone and its container stopped", func(ctx context.Context) error {
		if _, err := workload.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Pod still there: %v", err)
		}
		if _, err := http.Get("http://" + podIP + ":8080/"); err == nil {
			return fmt.Errorf("%s still answers", podIP)
		}
		return nil
	})

	// An app of one instance, as the kube driver makes it (a Deployment of
	// the platform's, rolled with maxSurge 1 and maxUnavailable 0), runs on
	// the worker the scale-down deletes: the deletion hook rolls it onto
	// the other worker before Cluster API drains this one, so it has a
	// ready Pod all along (a drain alone evicts it first).
	steady, onNode := startSteady(ctx, t, workload, image, pool, dedicated)
	marked := false
	var machines clusterv1.MachineList
	if err := f.Client.List(ctx, &machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		t.Fatal(err)
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if m.Status.NodeRef.Name != onNode {
			continue
		}
		base := m.DeepCopy()
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, clusterv1.DeleteMachineAnnotation, "yes")
		if err := f.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		marked = true
	}
	if !marked {
		t.Fatalf("no Machine of node %s", onNode)
	}
	gaps := watchReady(ctx, t, workload, steady)

	// Scaling down deletes one worker: its node agent stops, its Node
	// and files go.
	md := &clusterv1.MachineDeployment{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-md-0"}, md); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(md.DeepCopy())
	one := int32(1)
	md.Spec.Replicas = &one
	if err := f.Client.Patch(ctx, md, patch); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 3*time.Minute, "one worker left", func(ctx context.Context) error {
		nodes, err := workload.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!node-role.kubernetes.io/control-plane"})
		if err != nil {
			return err
		}
		if len(nodes.Items) != 1 {
			return fmt.Errorf("%d worker Nodes", len(nodes.Items))
		}
		running := 0
		for _, n := range workers {
			if f.Host.Cluster(ns, name).Worker(n.Name) != nil {
				running++
			} else if _, err := os.Stat(filepath.Join(f.Dir, "fleet", ns, name, "machines", n.Name)); !os.IsNotExist(err) {
				return fmt.Errorf("the deleted worker %s's files remain: %v", n.Name, err)
			}
		}
		if running != 1 {
			return fmt.Errorf("the host runs %d workers", running)
		}
		return nil
	})
	polls, empty := gaps()
	t.Logf("the app's Pods read %d times during the scale-down, %d times with none ready", polls, len(empty))
	if len(empty) > 0 {
		t.Errorf("the app of one instance had no ready Pod %d times of %d during the scale-down, first at %s", len(empty), polls, empty[0])
	}
	pods, err := workload.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=steady"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == onNode {
			t.Errorf("Pod %s still on the deleted worker %s", p.Name, onNode)
		}
	}
}

// startSteady runs a Deployment of one instance of the test app as the
// kube runtime driver would, and returns its name and its Pod's node.
func startSteady(ctx context.Context, t *testing.T, workload kubernetes.Interface, image string, pool map[string]string, taint corev1.Taint) (string, string) {
	t.Helper()
	labels := map[string]string{"app": "steady", "app.kubernetes.io/managed-by": "bex"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "steady", Namespace: "default", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "steady"}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                 pool,
					Tolerations:                  []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}},
					AutomountServiceAccountToken: ptr.To(false),
					Containers: []corev1.Container{{
						Name: "web", Image: image,
						Env:   []corev1.EnvVar{{Name: "PORT", Value: "8080"}},
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: runtimetest.HealthPath, Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1,
						},
					}},
				},
			},
		},
	}
	if _, err := workload.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var node string
	platformtest.Eventually(t, 2*time.Minute, "the steady app's Pod ready", func(ctx context.Context) error {
		pods, err := workload.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=steady"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if podReady(&p) {
				node = p.Spec.NodeName
				return nil
			}
		}
		return fmt.Errorf("%d Pods, none ready", len(pods.Items))
	})
	return dep.Name, node
}

// watchReady reads the Deployment's Pods every 200 ms until the returned
// function is called, which returns how many times it read them and when
// none was ready. A read that fails (an apiserver's blip) is no gap of the
// app's and is not counted.
func watchReady(ctx context.Context, t *testing.T, workload kubernetes.Interface, name string) func() (int, []string) {
	t.Helper()
	var failedReads atomic.Int64
	stop := platformtest.Meanwhile(ctx, 200*time.Millisecond, func(ctx context.Context) error {
		pods, err := workload.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			failedReads.Add(1)
			return nil
		}
		if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return podReady(&p) }) {
			return fmt.Errorf("none of %d Pods ready", len(pods.Items))
		}
		return nil
	})
	return func() (int, []string) {
		calls, gaps := stop()
		return calls - int(failedReads.Load()), gaps
	}
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// noApps is a store with no app on any cluster.
type noApps struct{}

func (noApps) AppsServedBy(context.Context, string) ([]string, error) { return nil, nil }

func nodeIsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
