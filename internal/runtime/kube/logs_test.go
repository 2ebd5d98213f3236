package kube_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/test/platformtest"
)

// fakeKubelet serves /containerLogs the way a kubelet does, from lines the
// test adds; the apiserver proxies pods/log to it.
type fakeKubelet struct {
	mu    sync.Mutex
	lines map[string][]string // pod → "<RFC3339Nano> text"
	added chan struct{}
}

func (k *fakeKubelet) add(pod string, at time.Time, text string) {
	k.mu.Lock()
	k.lines[pod] = append(k.lines[pod], at.UTC().Format(time.RFC3339Nano)+" "+text)
	close(k.added)
	k.added = make(chan struct{})
	k.mu.Unlock()
}

func (k *fakeKubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// /containerLogs/<namespace>/<pod>/<container>
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
	if len(parts) != 3 {
		http.NotFound(w, r)
		return
	}
	pod := parts[1]
	q := r.URL.Query()
	k.mu.Lock()
	lines := append([]string(nil), k.lines[pod]...)
	sent := len(lines) // lines of pod already considered
	k.mu.Unlock()
	if n, err := strconv.Atoi(q.Get("tailLines")); err == nil && n < len(lines) {
		lines = lines[len(lines)-n:]
	}
	bw := bufio.NewWriter(w)
	for _, l := range lines {
		fmt.Fprintln(bw, l)
	}
	bw.Flush()
	w.(http.Flusher).Flush()
	if q.Get("follow") != "true" {
		return
	}
	for {
		k.mu.Lock()
		added := k.added
		more := append([]string(nil), k.lines[pod][sent:]...)
		sent = len(k.lines[pod])
		k.mu.Unlock()
		for _, l := range more {
			fmt.Fprintln(w, l)
		}
		w.(http.Flusher).Flush()
		select {
		case <-added:
		case <-r.Context().Done():
			return
		}
	}
}

func testLogs(t *testing.T, c client.Client, d *kube.Driver) {
	ctx := context.Background()
	kubelet := &fakeKubelet{lines: map[string][]string{}, added: make(chan struct{})}
	srv := httptest.NewTLSServer(kubelet)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fake-node"}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status = corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(p)}},
	}
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}

	rel := shopRelease(1, "img:1")
	rel.App = "logged"
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Replicas: 2}}
	done := deploy(d, rel, &platformtest.SyncBuffer{})
	web := getDeployment(t, c, "logged-web", release("1"))
	setStatus(t, c, "acme", "logged-web", func(dep *appsv1.Deployment) { rolledOut(dep) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	defaultServiceAccount(t, c, "acme")
	for _, name := range []string{"logged-web-a", "logged-web-b"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name, Labels: web.Spec.Template.Labels}, Spec: web.Spec.Template.Spec}
		pod.Spec.NodeName = "fake-node"
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Minute)
	kubelet.add("logged-web-a", t0, "hello from a")
	kubelet.add("logged-web-b", t0.Add(time.Second), "hello from b")
	kubelet.add("logged-web-a", t0.Add(2*time.Second), "third")

	ch, err := d.Logs(ctx, "acme", "logged", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for l := range ch {
		got = append(got, fmt.Sprintf("%s.%d %s", l.Process, l.Instance, l.Text))
	}
	if want := "web.1 hello from b|web.0 third"; strings.Join(got, "|") != want {
		t.Errorf("tail 2: %q, want %q", strings.Join(got, "|"), want)
	}

	fctx, cancel := context.WithCancel(ctx)
	follow, err := d.Logs(fctx, "acme", "logged", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	// The follower may connect after the line is added; add until it shows.
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for found := false; !found; {
		select {
		case l, ok := <-follow:
			if !ok {
				t.Fatal("follow channel closed early")
			}
			found = l.Text == "followed" && l.Process == "web" && l.Instance == 1
		case <-tick.C:
			kubelet.add("logged-web-b", time.Now(), "followed")
		case <-deadline:
			t.Fatal("a line added after Logs(follow) never arrived")
		}
	}
	cancel()
	for range follow {
	}
}
