package edge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fixedResolver routes every host to its upstreams.
type fixedResolver []string

func (f fixedResolver) Resolve(host, _ string) (Route, []string, bool) {
	return Route{Tenant: "t", App: "a", Host: host}, f, true
}

// countedUpstream is an upstream that counts the connections it accepted
// and those that are closed.
type countedUpstream struct {
	*httptest.Server
	opened, closed atomic.Int32
}

func newCountedUpstream(t *testing.T, h http.HandlerFunc) *countedUpstream {
	t.Helper()
	u := &countedUpstream{}
	u.Server = httptest.NewUnstartedServer(h)
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			u.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			u.closed.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

func (u *countedUpstream) addr() string { return strings.TrimPrefix(u.URL, "http://") }

// inlineProxy is a Proxy over tr in front of upstreams, and a client of it.
func inlineProxy(t *testing.T, tr http.RoundTripper, upstreams ...string) (*httptest.Server, *http.Client) {
	t.Helper()
	p, err := New(fixedResolver(upstreams), Options{Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return s, s.Client()
}

func newTestInline() *inlineTransport {
	std := DefaultTransport()
	return newInlineTransport(std, std.DialContext)
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestInlineReusesConnections(t *testing.T) {
	up := newCountedUpstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.URL.Path) })
	s, c := inlineProxy(t, newTestInline(), up.addr())
	for i := range 50 {
		if code, body := get(t, c, fmt.Sprintf("%s/%d", s.URL, i)); code != 200 || body != fmt.Sprintf("/%d", i) {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	if n := up.opened.Load(); n != 1 {
		t.Fatalf("the upstream accepted %d connections for 50 requests in a row, want 1", n)
	}
}

// TestInlineRetriesAStaleConnection: an upstream that closes a connection
// after each answer without saying so (no Connection: close) leaves a dead
// connection in the pool; the next GET is sent again on a new one, a POST
// is not (the upstream may have acted on it).
func TestInlineRetriesAStaleConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var accepted atomic.Int32
	closed := make(chan struct{}, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer func() {
					c.Close()
					closed <- struct{}{}
				}()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(req.URL.Path), req.URL.Path)
			}()
		}
	}()
	tr := newTestInline()
	send := func(method, path string) (string, error) {
		req, _ := http.NewRequest(method, "http://"+l.Addr().String()+path, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for i := range 3 {
		path := fmt.Sprintf("/%d", i)
		if body, err := send(http.MethodGet, path); err != nil || body != path {
			t.Fatalf("GET %s: %q, %v", path, body, err)
		}
		// The upstream has closed it: the pooled connection is stale.
		<-closed
	}
	if n := accepted.Load(); n != 3 {
		t.Fatalf("the upstream accepted %d connections, want one per request", n)
	}
	if _, err := send(http.MethodPost, "/post"); err == nil {
		t.Fatal("a POST on a stale connection was sent again")
	}
}

// TestInlineClosesAConnectionNotReadToTheEnd: a body closed before its end
// closes the upstream connection at once: the rest of an endless answer is
// neither read nor left for the next request to take as its own.
func TestInlineClosesAConnectionNotReadToTheEnd(t *testing.T) {
	chunk := []byte(strings.Repeat("x", 32<<10))
	up := newCountedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/endless" {
			fmt.Fprint(w, "small")
			return
		}
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	tr := newTestInline()
	req, _ := http.NewRequest(http.MethodGet, up.URL+"/endless", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		resp.Body.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("closing an endless body did not return: it reads the rest")
	}
	deadline := time.Now().Add(10 * time.Second)
	for up.closed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the upstream connection of an abandoned body was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	req, _ = http.NewRequest(http.MethodGet, up.URL+"/small", nil)
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "small" {
		t.Fatalf("after an abandoned body: %q", b)
	}
}

// TestInlineSendsBodiesThroughTheFallback: a request with a body streams
// through the fallback transport and arrives whole.
func TestInlineSendsBodiesThroughTheFallback(t *testing.T) {
	up := newCountedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %d", r.Method, len(b))
	})
	var fallback atomic.Int32
	std := DefaultTransport()
	tr := newInlineTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		fallback.Add(1)
		return std.RoundTrip(r)
	}), std.DialContext)
	s, c := inlineProxy(t, tr, up.addr())
	resp, err := c.Post(s.URL+"/", "text/plain", strings.NewReader(strings.Repeat("y", 100000)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "POST 100000" || fallback.Load() != 1 {
		t.Fatalf("POST: %q, fallback used %d times", b, fallback.Load())
	}
	if code, body := get(t, c, s.URL+"/"); code != 200 || body != "GET 0" || fallback.Load() != 1 {
		t.Fatalf("GET: %d %q, fallback used %d times", code, body, fallback.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestInlineCancelUnblocks: a client that goes away while the upstream
// thinks ends the round trip and closes the upstream connection.
func TestInlineCancelUnblocks(t *testing.T) {
	release := make(chan struct{})
	up := newCountedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	tr := newTestInline()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+up.addr()+"/", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(req)
		errc <- err
	}()
	for up.opened.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a cancelled round trip returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled round trip did not return")
	}
	deadline := time.Now().Add(10 * time.Second)
	for up.closed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the connection of a cancelled round trip was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInlineClosesIdleConnections: connections idle past the timeout are
// closed, also those of an upstream that gets no more requests.
func TestInlineClosesIdleConnections(t *testing.T) {
	up := newCountedUpstream(t, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	tr := newTestInline()
	tr.idleTimeout = 200 * time.Millisecond
	s, c := inlineProxy(t, tr, up.addr())
	if code, _ := get(t, c, s.URL+"/"); code != 200 {
		t.Fatal(code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for up.closed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("an idle connection was not closed after the idle timeout")
		}
		time.Sleep(10 * time.Millisecond)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 0 || tr.sweep != nil {
		t.Fatalf("after the sweep: %d upstreams with idle connections, sweep armed %v", len(tr.idle), tr.sweep != nil)
	}
}

// TestInlineSkipsInformationalAnswers: a 103 before the answer is not
// taken as the answer.
func TestInlineSkipsInformationalAnswers(t *testing.T) {
	up := newCountedUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		fmt.Fprint(w, "final")
	})
	s, c := inlineProxy(t, newTestInline(), up.addr())
	if code, body := get(t, c, s.URL+"/"); code != 200 || body != "final" {
		t.Fatalf("got %d %q, want 200 final", code, body)
	}
}

// BenchmarkProxyTransport compares the inline transport with
// http.Transport: 32 keep-alive clients get 13 bytes through a Proxy from
// a loopback upstream, all in this process. The ratio of the two ns/op
// (and of the CPU time of the run) is the figure.
func BenchmarkProxyTransport(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "Hello, world\n")
	}))
	defer up.Close()
	addr := strings.TrimPrefix(up.URL, "http://")
	for _, tc := range []struct {
		name string
		tr   func() http.RoundTripper
	}{
		{"std", func() http.RoundTripper { return DefaultTransport() }},
		{"inline", func() http.RoundTripper { return newTestInline() }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p, err := New(fixedResolver{addr}, Options{Transport: tc.tr()})
			if err != nil {
				b.Fatal(err)
			}
			s := httptest.NewServer(p)
			defer s.Close()
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			var once sync.Once
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.Get(s.URL + "/")
					if err != nil {
						once.Do(func() { b.Error(err) })
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}
