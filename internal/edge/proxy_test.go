package edge_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"bex.co/bex/internal/edge"
)

// table is a Resolver over a fixed map of host → upstreams.
type table struct {
	mu     sync.Mutex
	routes map[string][]string
	calls  int
}

func (tb *table) Resolve(host, path string) (edge.Route, []string, bool) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.calls++
	ups, ok := tb.routes[host]
	return edge.Route{Tenant: "t", App: strings.Split(host, ".")[0], Host: host}, ups, ok
}

func (tb *table) set(host string, ups ...string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.routes[host] = ups
}

func upstream(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func named(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) }
}

// deadAddr returns an address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func newProxy(t *testing.T, r edge.Resolver) *httptest.Server {
	t.Helper()
	p, err := edge.New(r, edge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return s
}

func do(t *testing.T, s *httptest.Server, method, host, path string, body io.Reader) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, host, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestUnknownHostAndNoUpstream(t *testing.T) {
	tb := &table{routes: map[string][]string{"idle.bex.test": nil}}
	s := newProxy(t, tb)
	code, body, h := do(t, s, "GET", "nobody.bex.test", "/", nil)
	if code != http.StatusNotFound || !strings.Contains(body, "no app at this address") || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Errorf("unknown host: %d %q %s", code, body, h.Get("Content-Type"))
	}
	code, body, _ = do(t, s, "GET", "idle.bex.test", "/", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no healthy instance") {
		t.Errorf("no upstream: %d %q", code, body)
	}
}

func TestRoundRobinAndHost(t *testing.T) {
	a, b := upstream(t, named("a")), upstream(t, named("b"))
	tb := &table{routes: map[string][]string{"app.bex.test": {a, b}}}
	s := newProxy(t, tb)
	seen := map[string]int{}
	for range 10 {
		// Host matching ignores case, port and a trailing dot.
		code, body, _ := do(t, s, "GET", "App.Bex.Test.:8080", "/", nil)
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		seen[body]++
	}
	if seen["a"] != 5 || seen["b"] != 5 {
		t.Errorf("answers %v, want 5 each", seen)
	}
}

func TestForwardedHeaders(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s|%s|%s|%s|%s", r.Host, r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-For"), r.URL.RequestURI())
	})
	s := newProxy(t, &table{routes: map[string][]string{"app.bex.test": {up}}})
	req, _ := http.NewRequest("GET", s.URL+"/p/q?x=1", nil)
	req.Host = "app.bex.test"
	req.Header.Set("X-Forwarded-For", "6.6.6.6") // a client's claim is dropped
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "app.bex.test|app.bex.test|http|127.0.0.1|/p/q?x=1"; string(b) != want {
		t.Errorf("upstream saw %q, want %q", b, want)
	}
}

func TestRetryOnAnotherUpstream(t *testing.T) {
	live := upstream(t, named("live"))
	dead := deadAddr(t)
	tb := &table{routes: map[string][]string{"app.bex.test": {dead, live}}}
	s := newProxy(t, tb)
	for i := range 6 {
		code, body, _ := do(t, s, "GET", "app.bex.test", "/", nil)
		if code != 200 || body != "live" {
			t.Fatalf("GET %d: %d %q, want the live upstream's answer", i, code, body)
		}
	}
	// Nothing was sent to a refused connection, so a POST is retried too.
	for i := range 4 {
		code, body, _ := do(t, s, "POST", "app.bex.test", "/", nil)
		if code != 200 || body != "live" {
			t.Fatalf("POST %d: %d %q", i, code, body)
		}
	}
	// A POST with a body that cannot be replayed is not.
	tb.set("app.bex.test", dead)
	code, body, _ := do(t, s, "POST", "app.bex.test", "/", io.NopCloser(strings.NewReader("payload")))
	if code != http.StatusBadGateway || !strings.Contains(body, "did not answer") {
		t.Errorf("POST to a dead upstream: %d %q, want 502", code, body)
	}
}

func TestRetryResolvesAgain(t *testing.T) {
	// At a cut-over the table moves on between the first try and the retry.
	next := upstream(t, named("v2"))
	dead := deadAddr(t)
	tb := &switching{first: []string{dead}, then: []string{next}}
	s := newProxy(t, tb)
	code, body, _ := do(t, s, "GET", "app.bex.test", "/", nil)
	if code != 200 || body != "v2" {
		t.Fatalf("%d %q, want the new upstream's answer", code, body)
	}
}

// switching resolves to first once, then to then.
type switching struct {
	mu          sync.Mutex
	n           int
	first, then []string
}

func (s *switching) Resolve(host, path string) (edge.Route, []string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if s.n == 1 {
		return edge.Route{Host: host}, s.first, true
	}
	return edge.Route{Host: host}, s.then, true
}

func TestStreaming(t *testing.T) {
	release := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: second\n\n")
	})
	s := newProxy(t, &table{routes: map[string][]string{"app.bex.test": {up}}})
	req, _ := http.NewRequest("GET", s.URL+"/events", nil)
	req.Host = "app.bex.test"
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The first event arrives while the upstream still holds the response open.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
}

// wsEcho starts a WebSocket upstream that answers each message with
// "echo: " and the message.
func wsEcho(t *testing.T) string {
	t.Helper()
	upgrader := websocket.Upgrader{}
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, append([]byte("echo: "), msg...)); err != nil {
				return
			}
		}
	})
}

func TestWebSocket(t *testing.T) {
	up := wsEcho(t)
	s := newProxy(t, &table{routes: map[string][]string{"ws.bex.test": {up}}})
	dialer := websocket.Dialer{
		NetDial: func(network, addr string) (net.Conn, error) {
			return net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
		},
		HandshakeTimeout: 10 * time.Second,
	}
	c, _, err := dialer.Dial("ws://ws.bex.test/socket", nil)
	if err != nil {
		t.Fatalf("dialing through the edge: %v", err)
	}
	defer c.Close()
	for _, m := range []string{"one", "two"} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.ReadMessage()
		if err != nil || string(got) != "echo: "+m {
			t.Fatalf("got %q, %v", got, err)
		}
	}
}

type apps map[[2]string][]string

func (a apps) Upstreams(tenant, app string) []string { return a[[2]string{tenant, app}] }
func (a apps) Runs(tenant, app string) bool {
	_, ok := a[[2]string{tenant, app}]
	return ok
}

func TestDefaultHosts(t *testing.T) {
	r := &edge.DefaultHosts{Domain: "apps.example.com", Apps: apps{
		{"acme", "shop"}:      {"127.0.0.1:1"},
		{"my-team", "my-api"}: {"127.0.0.1:2"},
		{"acme", "idle"}:      nil,
	}}
	for _, tc := range []struct {
		host, tenant, app string
		ok                bool
	}{
		{"shop-acme.apps.example.com", "acme", "shop", true},
		{"my-api-my-team.apps.example.com", "my-team", "my-api", true},
		{"idle-acme.apps.example.com", "acme", "idle", true},
		{"shop-other.apps.example.com", "", "", false},
		{"shop.apps.example.com", "", "", false},
		{"x.shop-acme.apps.example.com", "", "", false},
		{"shop-acme.example.com", "", "", false},
		{"apps.example.com", "", "", false},
	} {
		route, ups, ok := r.Resolve(tc.host, "/")
		if ok != tc.ok || route.Tenant != tc.tenant || route.App != tc.app {
			t.Errorf("%s: got %+v %v, want %s/%s %v", tc.host, route, ok, tc.tenant, tc.app, tc.ok)
		}
		if ok && tc.app != "idle" && len(ups) != 1 {
			t.Errorf("%s: upstreams %v", tc.host, ups)
		}
	}
	if got := edge.Hostname("acme", "shop", "apps.example.com"); got != "shop-acme.apps.example.com" {
		t.Errorf("Hostname: %s", got)
	}
}
