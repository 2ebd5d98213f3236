package kube_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	cp := cptest.StartBare(t)
	c := newClient(t, cp.RESTConfig())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const tenant, nodeName = "usage", "worker-1"
	apps := []string{"shop", "blog"}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "default"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	var reads atomic.Int32
	var summary statsv1alpha1.Summary // written before the first read
	kubelet := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stats/summary" {
			http.NotFound(w, r)
			return
		}
		reads.Add(1)
		_ = json.NewEncoder(w).Encode(summary)
	}))
	defer kubelet.Close()
	port := kubelet.Listener.Addr().(*net.TCPAddr).Port

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	for i, app := range apps {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: app + "-web-1", Labels: map[string]string{
				kube.LabelApp: app, kube.LabelManagedBy: "bex", kube.LabelProcess: runtime.WebProcess, kube.LabelRelease: "1"}},
			Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: runtime.WebProcess, Image: "registry.bex.test/usage/" + app + ":1"}}},
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodRunning
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		cpu, mem := uint64(i+1)*1e9, uint64(i+1)<<20
		summary.Pods = append(summary.Pods, statsv1alpha1.PodStats{
			PodRef: statsv1alpha1.PodReference{Name: pod.Name, Namespace: tenant, UID: string(pod.UID)},
			Containers: []statsv1alpha1.ContainerStats{{Name: runtime.WebProcess,
				CPU: &statsv1alpha1.CPUStats{UsageCoreNanoSeconds: &cpu}, Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: &mem}}},
		})
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
	d, err := kube.New(cfg, kube.Options{})
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
	if n := reads.Load(); n != 1 {
		t.Errorf("the node's summary was read %d times for two apps, want once", n)
	}
}
