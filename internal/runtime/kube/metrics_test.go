package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
// scrape, which they leave alone. The crashes are the test app's own
// exits, which the node restarts with its back-off.
func testMetrics(t *testing.T, k *cluster, d *kube.Driver) {
	const tenant, app = "metered", "meter"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	metrics := kubeMetrics(t, d)
	read := func() runtimetest.Metrics { return runtimetest.ReadMetrics(t, metrics, kube.DriverLabel) }
	base := read()
	if !base.HasRestarts {
		t.Fatalf("no bex_runtime_restarts_total{driver=%q}: %+v", kube.DriverLabel, base)
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
	// check wants, since the first scrape, restarts more restarts and
	// the instances of each state changed by the numbers given; restarts
	// below zero: the restarts Status counts at the scrape. A container
	// that crash-loops may restart between two reads: the scrape counts
	// when Status reads the same before and after it.
	check := func(what string, restarts int, running, crashed float64) {
		t.Helper()
		platformtest.Eventually(t, 30*time.Second, what, func(context.Context) error {
			want := restarts
			var m runtimetest.Metrics
			if want < 0 {
				_, before := status()
				m = read()
				_, after := status()
				if before != after {
					return fmt.Errorf("restarts went from %d to %d during the scrape", before, after)
				}
				want = after
			} else {
				m = read()
			}
			var errs []error
			if got := m.Restarts - base.Restarts; got != float64(want) {
				errs = append(errs, fmt.Errorf("bex_runtime_restarts_total went up by %v, want %d", got, want))
			}
			if got := m.Instances[runtime.Running] - base.Instances[runtime.Running]; got != running {
				errs = append(errs, fmt.Errorf("%v more instances Running, want %v", got, running))
			}
			if got := m.Instances[runtime.Crashed] - base.Instances[runtime.Crashed]; got != crashed {
				errs = append(errs, fmt.Errorf("%v more instances Crashed, want %v", got, crashed))
			}
			if m.ReadErrors != 0 {
				errs = append(errs, fmt.Errorf("%v reads failed", m.ReadErrors))
			}
			return errors.Join(errs...)
		})
	}

	// The worker of release n runs until the file crash-meter-n shows in
	// the platform's binary directory, which containers on the run base
	// see at the same path; then it exits, and exits again at each of the
	// node's restarts: a crash loop.
	worker := func(n int) runtime.Process {
		mark := filepath.Join(k.BinDir, fmt.Sprintf("crash-meter-%d", n))
		return runtime.Process{Replicas: 1, Command: fmt.Sprintf(
			`trap 'exit 0' TERM; while [ ! -e %s ]; do sleep 1; done; echo crashing on purpose; exit 3`, mark)}
	}
	rel := shopRelease(1, k.image1)
	rel.Tenant, rel.App = tenant, app
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./testapp", Replicas: 2}, "worker": worker(1)}
	remove(t, d, tenant, app)
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

	// The app of web.0 crashes twice, that of web.1 once.
	crash(t, k.c, tenant, byName["web.0"].ID)
	crash(t, k.c, tenant, byName["web.1"].ID)
	crash(t, k.c, tenant, byName["web.0"].ID)
	_, restarted := status()
	if restarted != 3 {
		t.Fatalf("Status counts %d restarts after 3 crashes", restarted)
	}
	check("3 restarts in place", restarted, 3, 0)

	// worker.0 crash-loops: its container waits for its next restart, a
	// longer wait each time (0.5 s doubling on this node); after four
	// restarts the next is 8 s away.
	if err := os.WriteFile(filepath.Join(k.BinDir, "crash-meter-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "worker.0 crash-looping", func(context.Context) error {
		st, _ := status()
		for _, i := range st.Instances {
			if i.Process == "worker" && (i.State != runtime.Crashed || i.Restarts < 4) {
				return fmt.Errorf("worker.0 %s with %d restarts", i.State, i.Restarts)
			}
		}
		return nil
	})
	check("worker.0 crash-looping", -1, 2, 1)
	_, restarted = status()
	before := read().Restarts - base.Restarts

	// Release 2 replaces every Pod: the new ones start from 0 restarts,
	// and what the old ones counted stays counted.
	rel2 := rel
	rel2.Number, rel2.Image = 2, k.image2
	rel2.Processes = map[string]runtime.Process{runtime.WebProcess: {Command: "./testapp", Replicas: 2}, "worker": worker(2)}
	if err := d.Deploy(ctx, rel2, nil); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "release 2's Pods alone", func(context.Context) error {
		st, _ = status()
		for _, i := range st.Instances {
			if i.Release != 2 {
				return fmt.Errorf("%+v", st.Instances)
			}
		}
		return nil
	})
	t.Logf("Status counted %d restarts at the last scrape before release 2, the metrics %v", restarted, before)
	check("release 2 running", int(before), 3, 0)
	for _, i := range st.Instances {
		if i.Process == runtime.WebProcess {
			crash(t, k.c, tenant, i.ID)
			break
		}
	}
	check("a restart of release 2", int(before)+1, 3, 0)

	if err := d.Remove(ctx, tenant, app); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "the app's Pods gone", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := k.c.List(ctx, &pods, client.InNamespace(tenant)); err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("%d pods (%v)", len(pods.Items), err)
		}
		return nil
	})
	check("removed", int(before)+1, 0, 0)
}
