package node_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"bex.co/bex/builder/build"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/internal/store"
	"bex.co/bex/node"
)

// TestMoveBetweenClustersOnTheNodes: an app moves from one workload
// cluster to another, each a real apiserver with its controller manager,
// scheduler and a bex-node running the app's containers, while requests
// through the edge's routing keep coming: the release starts on the new
// cluster, passes its health check, the edge switches to the new
// cluster's endpoints, and the old cluster's Deployment goes after the
// drain. No request fails. Where the app runs is recorded in Postgres.
func TestMoveBetweenClustersOnTheNodes(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	a := start(t, func(f *fixture, o *node.Options) {
		o.Keychain = build.Keychain(f.Registry, registry.Auth(registryToken))
	})
	// Both nodes pull from a's registry, as every node of a fleet pulls
	// from the platform's one registry.
	b := start(t, func(_ *fixture, o *node.Options) {
		o.Keychain = build.Keychain(a.Registry, registry.Auth(registryToken))
	})

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	const tenant, app, domain = "acme", "web", "apps.test"
	if _, err := st.CreateTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	opts := kube.Options{PollInterval: 200 * time.Millisecond, ProgressDeadline: time.Minute, GracePeriod: 5 * time.Second,
		DrainDelay: 2 * time.Second}
	clusters := placed.Static{}
	for name, f := range map[string]*fixture{"a": a, "b": b} {
		c, _, err := placed.KubeCluster(ctx, f.CP.RESTConfig(), opts, testr.New(t))
		if err != nil {
			t.Fatalf("cluster %s: %v", name, err)
		}
		clusters[name] = c
	}
	d, err := placed.New(ctx, placed.Options{Clusters: clusters, Ledger: st, DrainDelay: 3 * time.Second,
		RoutedTimeout: 30 * time.Second, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	release := func(cluster string) runtime.Release {
		return runtimetest.WithWorkerCommands(runtime.Release{
			Tenant: tenant, App: app, Number: 1, Cluster: cluster, Image: a.AppImage,
			Env:         map[string]string{runtimetest.EnvVersion: "v1"},
			Processes:   map[string]runtime.Process{runtime.WebProcess: {Replicas: 2}},
			HealthCheck: runtime.HealthCheck{Path: runtimetest.HealthPath, Interval: 200 * time.Millisecond, Timeout: 2 * time.Second},
		})
	}
	deploy := func(cluster string) string {
		t.Helper()
		var log strings.Builder
		if err := d.Deploy(ctx, release(cluster), &log); err != nil {
			t.Fatalf("deploying on %s: %v\n%s", cluster, err, log.String())
		}
		return log.String()
	}
	get := func() (string, error) { return runtimetest.EdgeGet(d, domain, tenant, app, "/") }

	deploy("a")
	if body, err := get(); err != nil || strings.TrimSpace(body) != "v1" {
		t.Fatalf("on cluster a, before the move: %q %v", body, err)
	}

	var sent, failed atomic.Int64
	var firstErr atomic.Value
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			sent.Add(1)
			if body, err := get(); err != nil || strings.TrimSpace(body) != "v1" {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("%q %v", body, err))
			}
		}
	}()
	time.Sleep(time.Second)
	log := deploy("b")
	time.Sleep(time.Second)
	close(stop)
	<-done
	t.Logf("the move:\n%s", log)
	t.Logf("%d requests through the edge during the move", sent.Load())
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d requests failed during the move, first: %v", n, sent.Load(), firstErr.Load())
	}
	if c, ok, err := st.ServingCluster(ctx, tenant, app); err != nil || !ok || c != "b" {
		t.Errorf("Postgres says %q (%v, %v) serves the app, want b", c, ok, err)
	}
	if c, _ := d.Serving(tenant, app); c != "b" {
		t.Errorf("the edge routes to %q, want b", c)
	}
	if _, err := a.Admin.AppsV1().Deployments(tenant).Get(ctx, kube.ObjectName(app, runtime.WebProcess), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("cluster a's web Deployment after the move: %v, want it gone", err)
	}
	pods, err := b.Admin.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName == nodeName && p.Status.PodIP != "" {
			running++
		}
	}
	if running != 2 {
		t.Errorf("cluster b runs %d Pods of the app on its node, want 2", running)
	}
}
