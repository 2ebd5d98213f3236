package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/runtimemetrics"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/test/platformtest"
)

// kubeMetrics is the runtime's metrics of d alone, as the controller
// manager registers them for the workload cluster.
func kubeMetrics(t *testing.T, d *kube.Driver) *runtimemetrics.Collector {
	c, err := runtimemetrics.New(runtimemetrics.Options{Driver: kube.DriverLabel, Sources: d.MetricsSources})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testMetrics follows an app's Pods through crashes, a crash loop, a
// release that replaces them and its removal: bex_runtime_instances
// counts them by the state Status gives them, and
// bex_runtime_restarts_total goes up by the restarts Status counts, never
// back when the Pods that restarted are replaced. Other tests' Pods are
// in the cluster too: what is checked is what changed since the first
// scrape, which they leave alone.
func testMetrics(t *testing.T, c client.Client, d *kube.Driver) {
	const tenant, app = "metered", "meter"
	simulate(t, c, tenant)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	metrics := kubeMetrics(t, d)
	read := func() runtimetest.Metrics { return runtimetest.ReadMetrics(t, metrics, kube.DriverLabel) }
	base := read()
	if !base.HasRestarts {
		t.Fatalf("no bex_runtime_restarts_total{driver=%q}: %+v", kube.DriverLabel, base)
	}
	// check wants, since the first scrape, restarts more restarts and
	// the instances of each state changed by the numbers given.
	check := func(what string, restarts int, running, crashed float64) {
		t.Helper()
		m := read()
		if got := m.Restarts - base.Restarts; got != float64(restarts) {
			t.Errorf("%s: bex_runtime_restarts_total went up by %v, want %d", what, got, restarts)
		}
		if got := m.Instances[runtime.Running] - base.Instances[runtime.Running]; got != running {
			t.Errorf("%s: %v more instances Running, want %v", what, got, running)
		}
		if got := m.Instances[runtime.Crashed] - base.Instances[runtime.Crashed]; got != crashed {
			t.Errorf("%s: %v more instances Crashed, want %v", what, got, crashed)
		}
		if m.ReadErrors != 0 {
			t.Errorf("%s: %v reads failed", what, m.ReadErrors)
		}
	}
	status := func() (runtime.Status, int) {
		st, err := d.Status(ctx, tenant, app)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		total := 0
		for _, i := range st.Instances {
			total += i.Restarts
		}
		return st, total
	}

	rel := shopRelease(1, "img:1")
	rel.Tenant, rel.App = tenant, app
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatal(err)
	}
	st, _ := status()
	byName := map[string]runtime.Instance{}
	for _, i := range st.Instances {
		byName[i.Name()] = i
	}
	if len(st.Instances) != 3 || len(byName) != 3 || byName["worker.0"].ID == "" {
		t.Fatalf("release 1 runs %+v, want web.0, web.1, worker.0", st.Instances)
	}
	check("release 1 running", 0, 3, 0)

	// The kubelet restarts web.0's container twice, web.1's once.
	crashPod(t, c, tenant, byName["web.0"].ID)
	crashPod(t, c, tenant, byName["web.0"].ID)
	crashPod(t, c, tenant, byName["web.1"].ID)
	_, restarted := status()
	if restarted != 3 {
		t.Fatalf("Status counts %d restarts after 3 crashes", restarted)
	}
	check("3 restarts in place", restarted, 3, 0)

	// worker.0 crash-loops: its container waits for its next restart.
	crashLoop(t, c, tenant, byName["worker.0"].ID)
	st, restarted = status()
	crashed := 0
	for _, i := range st.Instances {
		if i.State == runtime.Crashed {
			crashed++
		}
	}
	if restarted != 4 || crashed != 1 {
		t.Fatalf("Status after worker.0's crash: %+v, %d restarts", st.Instances, restarted)
	}
	check("worker.0 crash-looping", restarted, 2, 1)

	// Release 2 replaces every Pod: the new ones start from 0 restarts,
	// and what the old ones counted stays counted.
	rel2 := rel
	rel2.Number, rel2.Image = 2, "img:2"
	if err := d.Deploy(ctx, rel2, nil); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 30*time.Second, "release 2's Pods alone", func(context.Context) error {
		st, _ = status()
		for _, i := range st.Instances {
			if i.Release != 2 {
				return fmt.Errorf("%+v", st.Instances)
			}
		}
		return nil
	})
	check("release 2 running", 4, 3, 0)
	crashPod(t, c, tenant, st.Instances[0].ID)
	check("a restart of release 2", 5, 3, 0)

	if err := d.Remove(ctx, tenant, app); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 30*time.Second, "the app's Pods gone", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(tenant)); err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("%d pods (%v)", len(pods.Items), err)
		}
		return nil
	})
	check("removed", 5, 0, 0)
}

// crashLoop plays the kubelet finding the pod's container exited again:
// its restart count goes up and it waits in CrashLoopBackOff.
func crashLoop(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var pod corev1.Pod
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
			return err
		}
		for i := range pod.Status.ContainerStatuses {
			cs := &pod.Status.ContainerStatuses[i]
			cs.RestartCount++
			cs.Ready = false
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", FinishedAt: metav1.Now()}}
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		}
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == corev1.PodReady {
				pod.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
		return c.Status().Update(context.Background(), &pod)
	})
	if err != nil {
		t.Fatalf("crash-looping pod %s/%s: %v", ns, name, err)
	}
}
