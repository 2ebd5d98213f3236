package edge_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"bex.co/bex/internal/edge"
)

// edgeServer is a Server on two loopback listeners with a local CA.
type edgeServer struct {
	srv              *edge.Server
	ca               *edge.LocalCA
	httpL, httpsL    net.Listener
	table            *edge.Table
	reg              *prometheus.Registry
	httpPort, tlsPor int
}

func startServer(t *testing.T, table *edge.Table) *edgeServer {
	t.Helper()
	ca, err := edge.LoadOrCreateLocalCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpsL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e := &edgeServer{ca: ca, httpL: httpL, httpsL: httpsL, table: table, reg: reg,
		httpPort: httpL.Addr().(*net.TCPAddr).Port, tlsPor: httpsL.Addr().(*net.TCPAddr).Port}
	e.srv, err = edge.NewServer(edge.ServerOptions{
		Table: table, Storage: &certmagic.FileStorage{Path: t.TempDir()}, LocalCA: ca,
		HTTPPort: e.httpPort, HTTPSPort: e.tlsPor, ListenHost: "127.0.0.1", Metrics: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(ctx, httpL, httpsL) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		e.srv.Close()
	})
	return e
}

// client returns an HTTP client that trusts the local CA and reaches every
// hostname at the edge's listeners, without following redirects.
func (e *edgeServer) client(h2 bool) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		port := e.httpPort
		if strings.HasSuffix(addr, ":443") || strings.HasSuffix(addr, fmt.Sprintf(":%d", e.tlsPor)) {
			port = e.tlsPor
		}
		return (&net.Dialer{}).DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
	}
	tr := &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: e.ca.Pool()}, ForceAttemptHTTP2: h2}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestServerTLSAndRedirect(t *testing.T) {
	web := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "web %s %s %s", r.Host, r.Header.Get("X-Forwarded-Proto"), r.URL.Path)
	})
	api := upstream(t, named("api"))
	plainApp := upstream(t, named("plain"))
	table := &edge.Table{
		Defaults: &edge.DefaultHosts{Domain: "apps.test", Apps: apps{{"acme", "web"}: {web}, {"acme", "api"}: {api}, {"acme", "plain"}: {plainApp}}},
	}
	table.SetRoutes([]edge.RouteEntry{
		{Hostname: "www.shop.test", PathPrefix: "/", Tenant: "acme", App: "web"},
		{Hostname: "www.shop.test", PathPrefix: "/api", Tenant: "acme", App: "api"},
		{Hostname: "*.wild.test", Tenant: "acme", App: "web"},
		{Hostname: "plain.shop.test", Tenant: "acme", App: "plain", PlainHTTP: true},
	})
	e := startServer(t, table)
	c := e.client(true)
	https := func(host, path string) string { return fmt.Sprintf("https://%s:%d%s", host, e.tlsPor, path) }

	// A default hostname over HTTPS, with HTTP/2.
	resp, body := get(t, c, https("web-acme.apps.test", "/x"))
	if resp.StatusCode != 200 || body != "web web-acme.apps.test:"+fmt.Sprint(e.tlsPor)+" https /x" {
		t.Fatalf("default hostname: %d %q", resp.StatusCode, body)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("protocol %s, want HTTP/2", resp.Proto)
	}
	if got := resp.TLS.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != "web-acme.apps.test" {
		t.Errorf("certificate names %v", got)
	}

	// Routes: longest prefix wins, by whole segments; wildcards match one label.
	for path, want := range map[string]string{"/api/v1": "api", "/api": "api", "/apix": "web www.shop.test"} {
		_, body := get(t, c, https("www.shop.test", path))
		if !strings.HasPrefix(body, want) {
			t.Errorf("www.shop.test%s answered %q, want %q…", path, body, want)
		}
	}
	if _, body := get(t, c, https("a.wild.test", "/")); !strings.HasPrefix(body, "web a.wild.test") {
		t.Errorf("wildcard route answered %q", body)
	}

	// Plain HTTP redirects, keeping path and query.
	resp, _ = get(t, c, fmt.Sprintf("http://www.shop.test:%d/a/b?q=1", e.httpPort))
	if want := https("www.shop.test", "/a/b?q=1"); resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Errorf("HTTP answered %d Location %q, want 308 %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	// …except for a Route that asked for plain HTTP.
	if resp, body := get(t, c, fmt.Sprintf("http://plain.shop.test:%d/", e.httpPort)); resp.StatusCode != 200 || body != "plain" {
		t.Errorf("plain route: %d %q", resp.StatusCode, body)
	}
	// Unknown hosts get a 404 page on HTTP.
	if resp, body := get(t, c, fmt.Sprintf("http://nobody.test:%d/", e.httpPort)); resp.StatusCode != 404 || !strings.Contains(body, "no app") {
		t.Errorf("unknown host on HTTP: %d %q", resp.StatusCode, body)
	}

	// No certificate for a name nobody claims, nor for a plain-HTTP Route,
	// nor for a default-looking name of an app that does not exist.
	for _, host := range []string{"nobody.test", "plain.shop.test", "ghost-acme.apps.test", "a.b.wild.test"} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", e.httpsL.Addr().String(),
			&tls.Config{ServerName: host, RootCAs: e.ca.Pool()})
		if err == nil {
			conn.Close()
			t.Errorf("TLS handshake for unclaimed %s succeeded", host)
		}
	}

	// Per-route metrics.
	if n := testutil.ToFloat64(mustCounter(t, e.reg, "bex_edge_requests_total", map[string]string{"tenant": "acme", "app": "api", "host": "www.shop.test", "class": "2xx"})); n != 2 {
		t.Errorf("bex_edge_requests_total for the api route = %v, want 2", n)
	}
}

// mustCounter finds one series of a counter in reg.
func mustCounter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return m.GetCounter().GetValue() })
		}
	}
	t.Fatalf("no %s%v in the registry", name, labels)
	return nil
}

func TestServerWebSocketOverTLS(t *testing.T) {
	up := wsEcho(t)
	table := &edge.Table{Defaults: &edge.DefaultHosts{Domain: "apps.test", Apps: apps{{"acme", "chat"}: {up}}}}
	e := startServer(t, table)
	dialer := websocket.Dialer{
		NetDial:          func(network, _ string) (net.Conn, error) { return net.Dial(network, e.httpsL.Addr().String()) },
		TLSClientConfig:  &tls.Config{RootCAs: e.ca.Pool()},
		HandshakeTimeout: 20 * time.Second,
	}
	c, _, err := dialer.Dial(fmt.Sprintf("wss://chat-acme.apps.test:%d/socket", e.tlsPor), nil)
	if err != nil {
		t.Fatalf("dialing wss through the edge: %v", err)
	}
	defer c.Close()
	for _, m := range []string{"hello", "again"} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
		if _, got, err := c.ReadMessage(); err != nil || string(got) != "echo: "+m {
			t.Fatalf("got %q, %v", got, err)
		}
	}
}

// TestMetricsHostsBounded sends requests for 1,000 invented hostnames no
// route claims and 1,000 under a wildcard Route: neither grows the
// metrics' series past one per claim.
func TestMetricsHostsBounded(t *testing.T) {
	web := upstream(t, named("web"))
	table := &edge.Table{Defaults: &edge.DefaultHosts{Domain: "apps.test", Apps: apps{{"acme", "web"}: {web}}}}
	table.SetRoutes([]edge.RouteEntry{{Hostname: "*.wild.test", Tenant: "acme", App: "web", PlainHTTP: true}})
	e := startServer(t, table)
	c := e.client(false)
	send := func(host string) {
		t.Helper()
		resp, _ := get(t, c, fmt.Sprintf("http://%s:%d/", host, e.httpPort))
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s answered %d", host, resp.StatusCode)
		}
	}
	// One request each first: the unknown bucket and the wildcard's series.
	send("first.nobody.test")
	send("first.wild.test")
	before := seriesCount(t, e.reg)
	for i := range 1000 {
		send(fmt.Sprintf("h%d-%s.nobody.test", i, rand.Text()[:8]))
		send(fmt.Sprintf("h%d-%s.wild.test", i, strings.ToLower(rand.Text()[:8])))
	}
	if after := seriesCount(t, e.reg); after != before {
		t.Errorf("2,000 invented hostnames grew the edge's series from %d to %d", before, after)
	}
	if n := testutil.ToFloat64(mustCounter(t, e.reg, "bex_edge_requests_total", map[string]string{"tenant": "", "app": "", "host": "unknown", "class": "4xx"})); n != 1001 {
		t.Errorf("requests counted for unknown hosts = %v, want 1001", n)
	}
	if n := testutil.ToFloat64(mustCounter(t, e.reg, "bex_edge_requests_total", map[string]string{"tenant": "acme", "app": "web", "host": "*.wild.test", "class": "2xx"})); n != 1001 {
		t.Errorf("requests counted for the wildcard route = %v, want 1001", n)
	}
}

// seriesCount counts the series of every edge metric in reg.
func seriesCount(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "bex_edge_") {
			n += len(mf.GetMetric())
		}
	}
	return n
}

// TestMetricsOfGoneRoutes serves 100 Routes and an app's default hostname,
// then deletes 99 of the Routes and stops the app: the series of what is
// gone are deleted, those of the Route left stay. Without it, ten thousand
// apps created and deleted leave their series in the edge for good.
func TestMetricsOfGoneRoutes(t *testing.T) {
	web := upstream(t, named("web"))
	running := apps{{"acme", "web"}: {web}, {"acme", "gone"}: {web}}
	table := &edge.Table{Defaults: &edge.DefaultHosts{Domain: "apps.test", Apps: running}}
	var routes []edge.RouteEntry
	for i := range 100 {
		routes = append(routes, edge.RouteEntry{Hostname: fmt.Sprintf("r%d.churn.test", i), Tenant: "acme", App: "web", PlainHTTP: true})
	}
	table.SetRoutes(routes)
	e := startServer(t, table)
	c := e.client(false)
	urls := []string{fmt.Sprintf("https://gone-acme.apps.test:%d/", e.tlsPor)}
	for _, r := range routes {
		urls = append(urls, fmt.Sprintf("http://%s:%d/", r.Hostname, e.httpPort))
	}
	for _, u := range urls {
		if resp, _ := get(t, c, u); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s answered %d", u, resp.StatusCode)
		}
	}
	hostsIn := func() map[string]bool {
		t.Helper()
		mfs, err := e.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "host" {
						seen[lp.GetValue()] = true
					}
				}
			}
		}
		return seen
	}
	if got := hostsIn(); len(got) != len(urls) {
		t.Fatalf("series for %d hosts, want %d", len(got), len(urls))
	}

	delete(running, [2]string{"acme", "gone"}) // before SetRoutes wakes the edge
	table.SetRoutes(routes[:1])
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := hostsIn()
		if len(got) == 1 && got["r0.churn.test"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("series left for %d hosts (r0.churn.test: %v), want only r0.churn.test's", len(got), got["r0.churn.test"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
