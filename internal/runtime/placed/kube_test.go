package placed_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capicrds "bex.co/bex/deploy/capi-crds"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/test/platformtest"
)

// startManagement starts an apiserver with Cluster API's CRDs: a client
// of it that knows Clusters, and its admin kubeconfig.
func startManagement(ctx context.Context, t *testing.T) (client.Client, []byte) {
	t.Helper()
	cp := cptest.StartBare(t)
	if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), capicrds.CRDs()); err != nil {
		t.Fatal(err)
	}
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := os.ReadFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	return c, kubeconfig
}

// TestKubeClustersWatch: a watch asked of the placed driver before a
// Cluster API cluster is connected reaches that cluster's kube driver once
// it is, tells of its apps' Deployments by tenant and app, survives the
// cluster's driver being made anew (its kubeconfig Secret changed), and
// ends with the cluster: an app it serves is then not watched.
func TestKubeClustersWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, kubeconfig := startManagement(ctx, t)
	// The cluster is its own management cluster: its kubeconfig reaches
	// the same apiserver.
	for _, ns := range []string{"fleet", tenant} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	cluster := platformtest.CreateCluster(ctx, t, c, "fleet", "w1")
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "w1-kubeconfig"},
		Data:       map[string][]byte{placed.KubeconfigKey: kubeconfig},
	}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	k, err := placed.NewKubeClusters(ctx, placed.KubeOptions{Client: c, Recheck: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	l := &ledger{}
	if err := l.SetServingCluster(ctx, tenant, "shop", "w1"); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, k, l)
	var mu sync.Mutex
	heard := map[string]int{}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return heard[tenant+"/shop"]
	}
	d.Watch(ctx, func(tn, app string) {
		mu.Lock()
		defer mu.Unlock()
		heard[tn+"/"+app]++
	})
	if d.Watches(tenant, "shop") {
		t.Fatal("an app on a cluster not connected yet is said to be watched")
	}
	if _, err := k.Driver(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	waitWatches(t, d, true)
	one := int32(1)
	sel := map[string]string{kube.LabelApp: "shop", kube.LabelProcess: "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "shop-web", Labels: map[string]string{
			kube.LabelManagedBy: "bex", kube.LabelTenant: tenant, kube.LabelApp: "shop", kube.LabelProcess: "web",
		}},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "img"}}}}},
	}
	if err := c.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	waitHeard(t, count, 0)

	// The kubeconfig changes: the cluster's driver is made anew, and the
	// watch goes on with it, once (not twice).
	secret.Data["rotated"] = []byte("1")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := k.Driver(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	waitWatches(t, d, true)
	before := count()
	dep.Labels["example.test/touch"] = "1"
	if err := c.Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	waitHeard(t, count, before)
	time.Sleep(time.Second)
	if n := count() - before; n != 1 {
		t.Errorf("one change of a Deployment told %d times after the driver was made anew, want once", n)
	}

	// The Cluster goes: its driver, and the watch on it, with it.
	if err := c.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "the cluster dropped", func(ctx context.Context) error {
		if _, err := k.Driver(ctx, "w1"); !errors.Is(err, placed.ErrNoCluster) {
			return errors.New("still connected")
		}
		return nil
	})
	waitWatches(t, d, false)
}

func waitWatches(t *testing.T, d *placed.Driver, want bool) {
	t.Helper()
	platformtest.Eventually(t, time.Minute, "Watches of the app on w1", func(context.Context) error {
		if d.Watches(tenant, "shop") != want {
			return errors.New("not yet")
		}
		return nil
	})
}

func waitHeard(t *testing.T, count func() int, before int) {
	t.Helper()
	platformtest.Eventually(t, time.Minute, "the Deployment's change told", func(context.Context) error {
		if count() == before {
			return errors.New("nothing told")
		}
		return nil
	})
}

// TestKubeClustersRuntimeSecret: with a RuntimeSecret, a cluster's
// kubeconfig is its key NAMESPACE.CLUSTER there (Cluster API's
// <cluster>-kubeconfig, absent here, is not read); a change of another
// cluster's key keeps its driver, a change of its own makes it anew, and
// a Cluster without a key is not connected, saying why.
func TestKubeClustersRuntimeSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, kubeconfig := startManagement(ctx, t)
	w1Key := map[string][]byte{placed.RuntimeKubeconfigKey("fleet", "w1"): kubeconfig}
	secret := platformtest.CreateRuntimeFleet(ctx, t, c, w1Key, "w1", "w2")
	recheck := 100 * time.Millisecond
	k, err := placed.NewKubeClusters(ctx, placed.KubeOptions{Client: c, RuntimeSecret: client.ObjectKeyFromObject(secret), Recheck: recheck})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	first, err := k.Driver(ctx, "w1")
	if err != nil {
		t.Fatalf("connecting through the runtime Secret: %v", err)
	}
	if _, err := k.Driver(ctx, "w2"); err == nil || !strings.Contains(err.Error(), `has no key "fleet.w2"`) {
		t.Errorf("a cluster without a key: %v, want it named", err)
	}

	update := func(key string, value []byte) {
		t.Helper()
		secret.Data[key] = value
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * recheck) // past the driver's and the Secret's Recheck
	}
	update(placed.RuntimeKubeconfigKey("fleet", "w2"), kubeconfig)
	if d, err := k.Driver(ctx, "w1"); err != nil || d != first {
		t.Errorf("another cluster's key changed: w1's driver made anew (%v)", err)
	}
	update(placed.RuntimeKubeconfigKey("fleet", "w1"), append(append([]byte{}, kubeconfig...), "\n# renewed\n"...))
	if d, err := k.Driver(ctx, "w1"); err != nil || d == first {
		t.Errorf("w1's key changed: its driver was kept (%v)", err)
	}
}

// TestKubeClustersRuntimeKeyComesLater: a cluster whose key the runtime
// Secret lacked is connected as soon as the key is written, though the
// Secret was read less than Recheck ago (the App controller asks again
// when the Secret changes).
func TestKubeClustersRuntimeKeyComesLater(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, kubeconfig := startManagement(ctx, t)
	secret := platformtest.CreateRuntimeFleet(ctx, t, c, nil, "w1")
	k, err := placed.NewKubeClusters(ctx, placed.KubeOptions{Client: c, RuntimeSecret: client.ObjectKeyFromObject(secret), Recheck: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := k.Driver(ctx, "w1"); err == nil || !strings.Contains(err.Error(), `has no key "fleet.w1"`) {
		t.Fatalf("a cluster without a key: %v, want it named", err)
	}
	secret.Data = map[string][]byte{placed.RuntimeKubeconfigKey("fleet", "w1"): kubeconfig}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Driver(ctx, "w1"); err != nil {
		t.Fatalf("the key was written, the Secret read 10 minutes ago at most: %v", err)
	}
}
