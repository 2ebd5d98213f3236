package kube_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/node/nodetest"
	"bex.co/bex/test/platformtest"
)

// testBuildPods: a build Pod runs its agent (bex-build-agent, from the
// platform's binary directory on the run base) with an idle limit, and
// StartBuild returns once it answers; Delete leaves neither Pod nor
// Secret. A build Pod that is never ready (more CPU than the node has)
// fails StartBuild saying so and leaves neither Pod nor Secret; a build
// Pod a stopped git receiver left past its deadline, one that no node
// stopped (the scheduler could not place it), is deleted by the app's
// next build, and one still there by Remove.
func testBuildPods(t *testing.T, k *cluster, newDriver func(*testing.T, kube.Options) *kube.Driver) {
	ctx := context.Background()
	c := k.c
	const tenant, app = "acme", "builds"
	d := newDriver(t, kube.Options{RunStartTimeout: time.Minute})
	quick := newDriver(t, kube.Options{RunStartTimeout: 2 * time.Second})
	if err := d.PrepareNamespace(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	defaultServiceAccount(t, c, tenant)
	spec := kube.BuildSpec{Tenant: tenant, App: app, Image: k.image1, Disk: "1Gi", Timeout: time.Minute}
	sel := client.MatchingLabels{kube.LabelBuildOf: app}
	left := func() (pods, secrets int) {
		var pl corev1.PodList
		var sl corev1.SecretList
		if err := c.List(ctx, &pl, client.InNamespace(tenant), sel); err != nil {
			t.Fatal(err)
		}
		if err := c.List(ctx, &sl, client.InNamespace(tenant), sel); err != nil {
			t.Fatal(err)
		}
		return len(pl.Items), len(sl.Items)
	}
	noneLeft := func(what string) {
		t.Helper()
		platformtest.Eventually(t, time.Minute, what, func(context.Context) error {
			if p, s := left(); p+s != 0 {
				return fmt.Errorf("%d pods, %d secrets left", p, s)
			}
			return nil
		})
	}
	t.Cleanup(func() { _ = d.Remove(context.Background(), tenant, app) })

	bp, err := d.StartBuild(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	var pl corev1.PodList
	if err := c.List(ctx, &pl, client.InNamespace(tenant), sel); err != nil || len(pl.Items) != 1 {
		t.Fatalf("%v build pods: %v", len(pl.Items), err)
	}
	if cmd := strings.Join(pl.Items[0].Spec.Containers[0].Command, " "); !strings.Contains(cmd, " --idle-timeout 2m0s") {
		t.Errorf("build pod runs %q; want --idle-timeout 2m0s", cmd)
	}
	if code, body, err := nodetest.Get(ctx, bp.URL+"/healthz"); err != nil || code != 200 {
		t.Errorf("the build's agent at %s: %d %q %v", bp.URL, code, body, err)
	}
	bp.Delete(ctx)
	noneLeft("the build's Pod and Secret deleted")

	unplaced := spec
	unplaced.Resources = runtime.Resources{CPU: "64"}
	if _, err := quick.StartBuild(ctx, unplaced); err == nil || !strings.Contains(err.Error(), "not ready after 2s") {
		t.Fatalf("StartBuild of a Pod the scheduler cannot place: %v; want not ready after 2s", err)
	}
	noneLeft("the unready build's Pod and Secret deleted")

	// What a git receiver stopped mid-build leaves: a Pod past its
	// deadline. Nothing deletes it but the driver.
	plant := func(name string) {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name, Labels: map[string]string{
				kube.LabelBuildOf: app, "app.kubernetes.io/managed-by": "bex", "app.kubernetes.io/component": "build"}},
			Spec: unplaceable(restrictedPodSpec("build", spec.Image, 1)),
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	plant("builds-build-old")
	platformtest.Eventually(t, 30*time.Second, "the next build deletes the build Pod past its deadline of 1 s", func(context.Context) error {
		if _, err := quick.StartBuild(ctx, unplaced); err == nil {
			t.Fatal("StartBuild of a Pod the scheduler cannot place succeeded")
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "builds-build-old"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})

	plant("builds-build-running")
	if err := d.Remove(ctx, tenant, app); err != nil {
		t.Fatal(err)
	}
	if p, s := left(); p+s != 0 {
		t.Errorf("after Remove: %d build pods, %d secrets", p, s)
	}
}
