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

	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/test/platformtest"
)

// testBuildPods, on an apiserver where no node runs Pods: a build Pod runs
// its agent with an idle limit; a build Pod that is never ready fails StartBuild saying so and leaves neither Pod nor
// Secret; a build Pod a stopped git receiver left past its deadline is
// deleted by the app's next build, and one still there by Remove.
func testBuildPods(t *testing.T, c client.Client, d *kube.Driver) {
	ctx := context.Background()
	const tenant, app = "acme", "builds"
	if err := d.PrepareNamespace(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	defaultServiceAccount(t, c, tenant)
	spec := kube.BuildSpec{Tenant: tenant, App: app, Image: "registry.bex.test/bex-build-agent:1", Disk: "1Gi", Timeout: time.Minute}
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
	started := make(chan error, 1)
	go func() {
		_, err := d.StartBuild(ctx, spec)
		started <- err
	}()
	// The Pod while it waits: its agent exits when its builder is gone.
	platformtest.Eventually(t, 30*time.Second, "the build Pod made", func(context.Context) error {
		var pl corev1.PodList
		if err := c.List(ctx, &pl, client.InNamespace(tenant), sel); err != nil || len(pl.Items) != 1 {
			return fmt.Errorf("%v build pods: %v", len(pl.Items), err)
		}
		cmd := strings.Join(pl.Items[0].Spec.Containers[0].Command, " ")
		if !strings.Contains(cmd, " --idle-timeout 2m0s") {
			t.Errorf("build pod runs %q; want --idle-timeout 2m0s", cmd)
		}
		return nil
	})
	err := <-started
	if err == nil || !strings.Contains(err.Error(), "not ready after 2s") {
		t.Fatalf("StartBuild with no node: %v; want not ready after 2s", err)
	}
	platformtest.Eventually(t, 30*time.Second, "the unready build's Pod and Secret deleted", func(context.Context) error {
		if p, s := left(); p+s != 0 {
			return fmt.Errorf("%d pods, %d secrets left", p, s)
		}
		return nil
	})

	// What a git receiver stopped mid-build leaves: a Pod past its
	// deadline. Nothing deletes it but the driver.
	plant := func(name string) {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name, Labels: map[string]string{
				kube.LabelBuildOf: app, "app.kubernetes.io/managed-by": "bex", "app.kubernetes.io/component": "build"}},
			Spec: restrictedPodSpec("build", spec.Image, 1),
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	plant("builds-build-old")
	platformtest.Eventually(t, 30*time.Second, "the next build deletes the build Pod past its deadline of 1 s", func(context.Context) error {
		if _, err := d.StartBuild(ctx, spec); err == nil {
			t.Fatal("StartBuild with no node succeeded")
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
