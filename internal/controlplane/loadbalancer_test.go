package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/test/platformtest"
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

// TestStopHoldsConnectionsLeftOpen shows what StopAPIServer does with a
// connection a client keeps open past the drain: a request sent on it once
// the server has SIGTERM does not reach the server while it still serves
// (where a request it proxies to a peer gets 503), but waits in the load
// balancer until the server turns requests away; it then gets 429 with
// Retry-After, or the GOAWAY that makes the client send it again on a new
// connection, to the other server. The stopping server, 1.36.3, has a
// shutdown delay of 3 s, during which it serves as usual: without the
// hold, the request gets 200 from it; the other server is 1.37.2, so
// /version says who answered.
func TestStopHoldsConnectionsLeftOpen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		DataDir:      t.TempDir(),
		LoadBalancer: true,
		DrainTimeout: 500 * time.Millisecond,
		APIServers: []controlplane.APIServerSpec{
			{Name: "old", Version: "1.36.3", NoMVP: true,
				ExtraArgs: []string{"--shutdown-delay-duration=3s", "--shutdown-send-retry-after=true"}},
			{Name: "new", Version: "1.37.2", NoMVP: true},
		},
		Log: testLog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	old, lb := cp.APIServer("old"), cp.LoadBalancer()
	cfg := cp.RESTConfig()
	// client-go's HTTP/2 connection, made while only the old server is in
	// the rotation, and kept.
	kept, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	version := func() (int, http.Header, string) {
		t.Helper()
		resp, err := kept.Get(cfg.Host + "/version")
		if err != nil {
			t.Fatalf("GET /version on the kept connection: %v", err)
		}
		defer resp.Body.Close()
		var v struct{ GitVersion string }
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, resp.Header, v.GitVersion
	}
	lb.Remove(cp.APIServer("new").Addr())
	if status, _, v := version(); status != http.StatusOK || v != "v1.36.3" {
		t.Fatalf("GET /version before the stop: %d from %q, want 200 from v1.36.3", status, v)
	}
	lb.Add(cp.APIServer("new").Addr())

	stopped := make(chan error, 1)
	go func() { stopped <- cp.StopAPIServer("old") }()
	// Its /readyz fails from SIGTERM on.
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	direct := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}}
	platformtest.Eventually(t, time.Minute, "the old kube-apiserver to have SIGTERM (its /readyz failing)", func(ctx context.Context) error {
		resp, err := direct.Get(old.URL() + "/readyz")
		if err != nil {
			return nil
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return errors.New("/readyz answers 200")
		}
		return nil
	})
	status, header, v := version()
	switch {
	case status == http.StatusTooManyRequests && header.Get("Retry-After") != "":
	case status == http.StatusOK && v == "v1.37.2":
	default:
		t.Fatalf("GET /version on the connection kept past the drain, after SIGTERM: %d from %q (Retry-After %q); want 429 with Retry-After, or 200 from v1.37.2 on a new connection",
			status, v, header.Get("Retry-After"))
	}
	t.Logf("GET /version after SIGTERM: %d from %q", status, v)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}
