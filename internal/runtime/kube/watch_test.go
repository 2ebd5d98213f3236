package kube_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/test/platformtest"
)

// testWatch: a watch of the driver's Deployments tells of an app rolled
// out, of its Deployment becoming unavailable and of its removal, by the
// app's tenant and name; a Deployment the driver did not make tells
// nothing; Watches is true only while the watch runs and has listed.
func testWatch(t *testing.T, k *cluster, d *kube.Driver) {
	const tenant = "watchers"
	c := k.c
	if d.Watches(tenant, "seen") {
		t.Fatal("a driver nobody watches says it sees its apps' changes")
	}
	var mu sync.Mutex
	heard := map[string]int{}
	count := func(app string) int {
		mu.Lock()
		defer mu.Unlock()
		return heard[app]
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	d.Watch(ctx, func(tn, app string) {
		mu.Lock()
		defer mu.Unlock()
		heard[tn+"/"+app]++
	})
	platformtest.Eventually(t, 30*time.Second, "the watch listed the Deployments", func(context.Context) error {
		if !d.Watches(tenant, "seen") {
			return errors.New("not watching yet")
		}
		return nil
	})

	rel := shopRelease(1, k.image1)
	rel.Tenant, rel.App = tenant, "seen"
	remove(t, d, tenant, "seen")
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatal(err)
	}
	if count(tenant+"/seen") == 0 {
		t.Fatal("a rollout told nothing")
	}

	// A web instance crashes: its Deployment has an instance fewer
	// available until the node has restarted it.
	st, err := d.Status(ctx, tenant, "seen")
	if err != nil {
		t.Fatal(err)
	}
	before := count(tenant + "/seen")
	for _, i := range st.Instances {
		if i.Process == runtime.WebProcess {
			crash(t, c, tenant, i.ID)
			break
		}
	}
	platformtest.Eventually(t, 30*time.Second, "the change of status told", func(context.Context) error {
		if count(tenant+"/seen") == before {
			return errors.New("nothing told")
		}
		return nil
	})

	// Not the driver's: nothing told.
	one := int32(1)
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "foreign", Labels: map[string]string{kube.LabelApp: "foreign", kube.LabelTenant: tenant}},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"x": "y"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}},
	}
	if err := c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), foreign) })

	before = count(tenant + "/seen")
	if err := d.Remove(ctx, tenant, "seen"); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 30*time.Second, "the removal told", func(context.Context) error {
		if count(tenant+"/seen") == before {
			return errors.New("nothing told")
		}
		return nil
	})
	if n := count(tenant + "/foreign"); n != 0 {
		t.Errorf("a Deployment the driver did not make told %d times", n)
	}

	stop()
	platformtest.Eventually(t, 30*time.Second, "the watch ended", func(context.Context) error {
		if d.Watches(tenant, "seen") {
			return errors.New("still says it watches")
		}
		return nil
	})
}
