package kube_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/childproc"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
)

// TestUsageOfUnreadableNodes: an app without Pods has no usage
// (ErrNotFound), and an app whose running Pod is on a node that does not
// answer gets an error naming the node, not an empty usage. The usage of
// a node that answers is TestKubeUsage in node/, with bex-node.
func TestUsageOfUnreadableNodes(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	cp := cptest.StartBare(t)
	c := newClient(t, cp.RESTConfig())
	d, err := kube.New(cp.RESTConfig(), kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const tenant, app, nodeName = "usage", "web-app", "gone-1"
	// No controller manager makes the ServiceAccount that admission wants.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "default"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := d.Usage(ctx, tenant, app); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("the usage of an app without pods: %v, want ErrNotFound", err)
	}

	// A Node whose kubelet port nothing listens on, at a loopback
	// address (read directly: the apiserver proxies to none).
	ports, err := childproc.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(ports[0])
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: app + "-web-1", Labels: map[string]string{
			kube.LabelApp: app, kube.LabelManagedBy: "bex", kube.LabelProcess: runtime.WebProcess, kube.LabelRelease: "1"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: runtime.WebProcess, Image: "registry.bex.test/usage/web-app:1"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	u, err := d.Usage(ctx, tenant, app)
	if err == nil || !strings.Contains(err.Error(), "node "+nodeName) {
		t.Errorf("the usage of an app on a node that does not answer: %+v, %v; want an error naming node %s", u, err, nodeName)
	}
}

// TestUsageReadsEachNodeOnce: two apps whose Pods run on one node, asked
// for in turn as the sampler does, cost one read of the node's stats
// summary, and each app gets its own Pod's CPU and memory from it. The
// node is a kubelet's stats endpoint only (TLS, trusted by the driver's
// rest.Config, at a loopback address, read directly), which counts its
// reads; the real kubelet's is TestKubeUsage in node/.
func TestUsageReadsEachNodeOnce(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const tenant = "usage"
	apps := []string{"shop", "blog"}
	uc := startUsageCluster(t, ctx, tenant, "worker-1")
	for i, app := range apps {
		uc.runPod(t, ctx, tenant, app, i+1)
	}
	d, err := kube.New(uc.cfg, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, app := range apps {
		u, err := d.Usage(ctx, tenant, app)
		if err != nil {
			t.Fatalf("usage of %s: %v", app, err)
		}
		if len(u) != 1 || u[0].ID != app+"-web-1" || u[0].CPUSeconds != float64(i+1) || u[0].MemoryBytes != int64(i+1)<<20 {
			t.Errorf("usage of %s: %+v, want its own pod's %d s of CPU and %d MiB", app, u, i+1, i+1)
		}
	}
	if n := uc.reads.Load(); n != 1 {
		t.Errorf("the node's summary was read %d times for two apps, want once", n)
	}
}

// TestReadAppsAtOnce: ReadApps reads three apps of two tenants, and one
// that does not run, with one list of Deployments, one of Pods and one
// read of the node's summary, where Status and Usage make three lists an
// app; and each app's reading is what Status and Usage return for it.
func TestReadAppsAtOnce(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	uc := startUsageCluster(t, ctx, "acme", "worker-1")
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "globex"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "globex", Name: "default"}},
	} {
		if err := uc.c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	apps := []runtime.AppName{{Tenant: "acme", App: "shop"}, {Tenant: "acme", App: "blog"}, {Tenant: "globex", App: "shop"}}
	for i, a := range apps {
		uc.deployApp(t, ctx, a, i+1)
	}
	// The lists the driver makes, by resource.
	var mu sync.Mutex
	lists := map[string]int{}
	counted := rest.CopyConfig(uc.cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if p := r.URL.Path; r.Method == http.MethodGet && (strings.HasSuffix(p, "/pods") || strings.HasSuffix(p, "/deployments")) {
				mu.Lock()
				lists[p[strings.LastIndex(p, "/")+1:]]++
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	d, err := kube.New(counted, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gone := runtime.AppName{Tenant: "acme", App: "gone"}
	readings, err := d.ReadApps(ctx, append(slices.Clone(apps), gone))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"deployments": 1, "pods": 1}; !maps.Equal(lists, want) {
		t.Errorf("ReadApps of four apps listed %v, want %v", lists, want)
	}
	if n := uc.reads.Load(); n != 1 {
		t.Errorf("the node's summary was read %d times, want once", n)
	}
	if r, ok := readings[gone]; !ok || !errors.Is(r.StatusErr, runtime.ErrNotFound) || !errors.Is(r.UsageErr, runtime.ErrNotFound) {
		t.Errorf("an app that does not run: %+v (present %t), want ErrNotFound for its status and usage", r, ok)
	}
	fresh, err := kube.New(uc.cfg, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range apps {
		r := readings[a]
		if r.StatusErr != nil || r.UsageErr != nil {
			t.Errorf("%v: status error %v, usage error %v", a, r.StatusErr, r.UsageErr)
			continue
		}
		st, err := fresh.Status(ctx, a.Tenant, a.App)
		if err != nil {
			t.Fatal(err)
		}
		u, err := fresh.Usage(ctx, a.Tenant, a.App)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Status, st) || !reflect.DeepEqual(r.Usage, u) {
			t.Errorf("%v: ReadApps %+v %+v, Status and Usage %+v %+v", a, r.Status, r.Usage, st, u)
		}
		if r.Status.Release != i+1 || len(r.Usage) != 1 || r.Usage[0].CPUSeconds != float64(i+1) {
			t.Errorf("%v: release %d, usage %+v; want release %d and its own pod's %d s of CPU", a, r.Status.Release, r.Usage, i+1, i+1)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// usageCluster is a bare apiserver with a Node whose kubelet is a stats
// endpoint only (TLS, trusted by cfg, at a loopback address, read
// directly), which counts its reads; the real kubelet's is TestKubeUsage
// in node/.
type usageCluster struct {
	c     client.Client
	cfg   *rest.Config
	node  string
	reads atomic.Int32

	mu      sync.Mutex
	summary statsv1alpha1.Summary
}

// startUsageCluster starts the apiserver with namespace tenant and the node.
func startUsageCluster(t testing.TB, ctx context.Context, tenant, nodeName string) *usageCluster {
	t.Helper()
	cp := cptest.StartBare(t)
	uc := &usageCluster{c: newClient(t, cp.RESTConfig()), node: nodeName}
	// No controller manager makes the ServiceAccount that admission wants.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "default"}},
	} {
		if err := uc.c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	kubelet := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stats/summary" {
			http.NotFound(w, r)
			return
		}
		uc.reads.Add(1)
		uc.mu.Lock()
		defer uc.mu.Unlock()
		_ = json.NewEncoder(w).Encode(uc.summary)
	}))
	t.Cleanup(kubelet.Close)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if err := uc.c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(kubelet.Listener.Addr().(*net.TCPAddr).Port)
	if err := uc.c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	cfg := cp.RESTConfig()
	ca := cfg.CAData
	if cfg.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg.CAFile, cfg.CAData = "", append(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kubelet.Certificate().Raw})...)
	uc.cfg = cfg
	return uc
}

// deployApp makes a web Deployment of the app at release r, and its
// running Pod (runPod, with r seconds of CPU and r MiB).
func (uc *usageCluster) deployApp(t testing.TB, ctx context.Context, a runtime.AppName, r int) {
	t.Helper()
	labels := map[string]string{kube.LabelApp: a.App, kube.LabelTenant: a.Tenant, kube.LabelManagedBy: "bex",
		kube.LabelProcess: runtime.WebProcess, kube.LabelRelease: strconv.Itoa(r)}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.Tenant, Name: a.App + "-web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{kube.LabelApp: a.App}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: runtime.WebProcess, Image: "registry.bex.test/" + a.App + ":1"}}}},
		},
	}
	if err := uc.c.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	uc.runPod(t, ctx, a.Tenant, a.App, r)
}

// runPod makes a running web Pod of the app on the node, app-web-1, which
// used n seconds of CPU and holds n MiB in the node's summary.
func (uc *usageCluster) runPod(t testing.TB, ctx context.Context, tenant, app string, n int) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: app + "-web-1", Labels: map[string]string{
			kube.LabelApp: app, kube.LabelTenant: tenant, kube.LabelManagedBy: "bex", kube.LabelProcess: runtime.WebProcess, kube.LabelRelease: "1"}},
		Spec: corev1.PodSpec{NodeName: uc.node, Containers: []corev1.Container{{Name: runtime.WebProcess, Image: "registry.bex.test/" + tenant + "/" + app + ":1"}}},
	}
	if err := uc.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	if err := uc.c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cpu, mem := uint64(n)*1e9, uint64(n)<<20
	uc.mu.Lock()
	defer uc.mu.Unlock()
	uc.summary.Pods = append(uc.summary.Pods, statsv1alpha1.PodStats{
		PodRef: statsv1alpha1.PodReference{Name: pod.Name, Namespace: tenant, UID: string(pod.UID)},
		Containers: []statsv1alpha1.ContainerStats{{Name: runtime.WebProcess,
			CPU: &statsv1alpha1.CPUStats{UsageCoreNanoSeconds: &cpu}, Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: &mem}}},
	})
}

// BenchmarkReadApps: a sampler's round of 500 apps, one Deployment and
// one running Pod each on one node, read at once (ReadApps), its
// instances alone as a scrape of the runtime's metrics reads them
// (ReadInstances), and app by app (Status and Usage), against a bare
// apiserver on this machine.
//
//	go test -run '^$' -bench ReadApps -benchtime 5x ./internal/runtime/kube
func BenchmarkReadApps(b *testing.B) {
	ctrl.SetLogger(logr.Discard())
	ctx := context.Background()
	uc := startUsageCluster(b, ctx, "bench", "worker-1")
	const n = 500
	apps := make([]runtime.AppName, n)
	for i := range apps {
		apps[i] = runtime.AppName{Tenant: "bench", App: fmt.Sprintf("app-%03d", i)}
		uc.deployApp(b, ctx, apps[i], 1)
	}
	d, err := kube.New(uc.cfg, kube.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ReadApps", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.ReadApps(ctx, apps); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What a scrape of the runtime's metrics reads (runtimemetrics).
	b.Run("ReadInstances", func(b *testing.B) {
		for b.Loop() {
			insts, err := d.ReadInstances(ctx)
			if err != nil || len(insts) != n {
				b.Fatalf("%d instances (%v), want %d", len(insts), err, n)
			}
		}
	})
	b.Run("AppByApp", func(b *testing.B) {
		for b.Loop() {
			for _, a := range apps {
				if _, err := d.Status(ctx, a.Tenant, a.App); err != nil {
					b.Fatal(err)
				}
				if _, err := d.Usage(ctx, a.Tenant, a.App); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
