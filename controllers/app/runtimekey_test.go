package app_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/app"
	capicrds "bex.co/bex/deploy/capi-crds"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/test/platformtest"
)

// clusterReleases runs each App on the driver placed.KubeClusters makes
// for its cluster (status.cluster): EnsureRunning fails while the cluster
// has no driver, as the placed runtime's does.
type clusterReleases struct {
	clusters   *placed.KubeClusters
	reconciles atomic.Int64
}

func (r *clusterReleases) EnsureRunning(ctx context.Context, a *platformv1alpha1.App) error {
	_, err := r.clusters.Driver(ctx, a.Status.Cluster)
	return err
}
func (*clusterReleases) Health(context.Context, string, string) (bool, string, error) {
	return true, "1 web instance running", nil
}
func (*clusterReleases) Remove(context.Context, string, string) error { return nil }
func (r *clusterReleases) LastBuild(context.Context, string, string) (app.LastBuild, error) {
	r.reconciles.Add(1)
	return app.LastBuild{Number: 1}, nil
}

// onePlacer places every App on one cluster.
type onePlacer struct{ cluster string }

func (p onePlacer) Place(context.Context, *platformv1alpha1.App) (app.Placement, error) {
	return app.Placement{Placed: true, Cluster: p.cluster, Pool: "workers", Message: "the only cluster"}, nil
}
func (onePlacer) Unplace(context.Context, *platformv1alpha1.App) error { return nil }

// TestAppWaitsForItsRuntimeKey: an App placed on a cluster whose runtime
// kubeconfig is not yet in the runtime Secret is not running, and runs as
// soon as the key is written (its next resync being 10 minutes away): the
// App controller watches that Secret.
func TestAppWaitsForItsRuntimeKey(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), capicrds.CRDs()); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := os.ReadFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's apiserver is the management one.
	secret := platformtest.CreateRuntimeFleet(ctx, t, c, nil, "w1")
	const tenant = "tenant-key"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil {
		t.Fatal(err)
	}
	clusters, err := placed.NewKubeClusters(ctx, placed.KubeOptions{Client: c, RuntimeSecret: client.ObjectKeyFromObject(secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer clusters.Close()
	releases := &clusterReleases{clusters: clusters}
	cfg := rest.CopyConfig(cp.RESTConfig())
	var secretLists platformtest.SecretLists
	cfg.Wrap(secretLists.Wrap)
	startReconciler(ctx, t, cfg, &app.Reconciler{
		Releases: releases, Placer: onePlacer{cluster: "w1"}, PollPlacements: true,
		Resync: 10 * time.Minute, PlacementResync: 10 * time.Minute,
		RuntimeSecret: client.ObjectKeyFromObject(secret),
	})

	a := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "web"}}
	createReleased(ctx, t, c, a)
	waitReady(t, c, a, platformv1alpha1.AppUnhealthyReason, `has no key "fleet.w1"`)
	// The reconciles of the App's own status writes are done: nothing
	// brings it back but the Secret.
	settled(t, &releases.reconciles, 2*time.Second, 30*time.Second)

	secret.Data = map[string][]byte{placed.RuntimeKubeconfigKey("fleet", "w1"): kubeconfig}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, a, platformv1alpha1.AppHealthyReason, "1 web instance running")

	// The Secrets the reconciler lists or watches with their data are the
	// runtime Secret alone: its cache holds no other Secret of bex.
	want := "/api/v1/namespaces/" + secret.Namespace + "/secrets?"
	selector := "fieldSelector=" + url.QueryEscape("metadata.name="+secret.Name)
	reqs := secretLists.Requests()
	if len(reqs) == 0 {
		t.Error("the reconciler never listed the runtime Secret")
	}
	for _, r := range reqs {
		if !strings.Contains(r, want) || !strings.Contains(r, selector) {
			t.Errorf("the reconciler read Secrets with their data beyond the runtime Secret: %s", r)
		}
	}
}
