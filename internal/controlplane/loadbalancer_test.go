package controlplane_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"bex.co/bex/internal/controlplane"
)

// TestLoadBalancer starts two apiservers behind the plane's load balancer and
// shows that the endpoint, the rest.Config and the kubeconfig point at it and
// verify TLS through it; that new connections reach every server in the
// rotation; that a stopped or killed server leaves the rotation while
// requests through the load balancer keep succeeding; that a started one
// joins it once ready; and that the load balancer keeps its address across a
// restart on the same DataDir.
func TestLoadBalancer(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts := controlplane.Options{
		DataDir:      dir,
		LoadBalancer: true,
		DrainTimeout: time.Second,
		APIServers:   []controlplane.APIServerSpec{{Name: "a", Version: "1.36.3"}, {Name: "b", Version: "1.36.3"}},
		Log:          testLog{t},
	}
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cp.Stop() }()
	lb := cp.LoadBalancer()
	if lb == nil {
		t.Fatal("LoadBalancer() = nil with Options.LoadBalancer set")
	}

	endpoint := cp.Endpoint()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != controlplane.LoadBalancerIP || u.Host != lb.Addr() {
		t.Fatalf("endpoint %s is not the load balancer at %s", endpoint, lb.Addr())
	}
	kc, err := clientcmd.LoadFromFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if got := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server; got != endpoint {
		t.Fatalf("kubeconfig points at %s, want the load balancer %s", got, endpoint)
	}
	// client-go verifies the serving certificate for the load balancer's IP.
	if _, err := kubernetes.NewForConfigOrDie(cp.RESTConfig()).Discovery().ServerVersion(); err != nil {
		t.Fatalf("client-go through the load balancer: %v", err)
	}

	a, b := cp.APIServer("a"), cp.APIServer("b")
	assertRotation(t, cp, a, b)
	requestsOnFreshConnections(ctx, t, cp, 4)
	for _, s := range []*controlplane.APIServer{a, b} {
		if st, _ := lb.Stats().Backend(s.Addr()); st.Total == 0 {
			t.Fatalf("no connection reached %s through the load balancer: %+v", s.Name, lb.Stats())
		}
	}

	if err := cp.StopAPIServer("a"); err != nil {
		t.Fatal(err)
	}
	if a.Running() {
		t.Fatal("a still runs after StopAPIServer")
	}
	assertRotation(t, cp, b)
	before, _ := lb.Stats().Backend(a.Addr())
	requestsOnFreshConnections(ctx, t, cp, 4)
	if after, _ := lb.Stats().Backend(a.Addr()); after.Total != before.Total {
		t.Fatalf("the stopped server got %d new connections", after.Total-before.Total)
	}

	c, err := cp.StartAPIServer(ctx, controlplane.APIServerSpec{Name: "c", Version: "1.36.3"})
	if err != nil {
		t.Fatal(err)
	}
	assertRotation(t, cp, b, c)

	if err := cp.KillAPIServer("b"); err != nil {
		t.Fatal(err)
	}
	assertRotation(t, cp, c)
	requestsOnFreshConnections(ctx, t, cp, 3)
	if st, _ := lb.Stats().Backend(c.Addr()); st.Total < 3 {
		t.Fatalf("c, the only server left, got %d connections, want at least 3", st.Total)
	}

	cp.Stop()
	opts.APIServers = []controlplane.APIServerSpec{{Name: "c", Version: "1.36.3"}}
	if cp, err = controlplane.Start(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if cp.Endpoint() != endpoint {
		t.Fatalf("load balancer moved across restarts: %s → %s", endpoint, cp.Endpoint())
	}
	requestsOnFreshConnections(ctx, t, cp, 1)
}

func assertRotation(t *testing.T, cp *controlplane.ControlPlane, want ...*controlplane.APIServer) {
	t.Helper()
	var addrs []string
	for _, s := range want {
		addrs = append(addrs, s.Addr())
	}
	if got := cp.LoadBalancer().Backends(); !slices.Equal(got, addrs) {
		t.Fatalf("load balancer rotation = %v, want %v", got, addrs)
	}
}

// requestsOnFreshConnections sends n requests through the plane's endpoint,
// each on a new TCP connection, so that each is balanced anew, and fails the
// test unless every one gets 200.
func requestsOnFreshConnections(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, n int) {
	t.Helper()
	cfg := cp.RESTConfig()
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		tr := &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/version", nil)
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("GET /version through the load balancer: %v", err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /version through the load balancer: %d", resp.StatusCode)
		}
	}
}

// testLog writes the plane's progress to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p))
	return len(p), nil
}
