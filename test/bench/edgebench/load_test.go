package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConnReadsResponses checks the load generator's HTTP/1.1 reader
// against net/http: fixed length, chunked, wrong status, and a server that
// closes the connection.
func TestConnReadsResponses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.(http.Flusher).Flush() // no Content-Length: the body is chunked
			_, _ = w.Write([]byte(strings.Repeat("x", 5000)))
		case "/missing":
			http.NotFound(w, r)
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = w.Write([]byte(smallBody))
		default:
			_, _ = w.Write([]byte(smallBody))
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	c, err := dial(ctx, target{addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	get := func(path string, size int) (bool, error) {
		return c.do(target{addr: addr, host: "x.test", path: path}.request(), size)
	}
	for range 3 { // on one keep-alive connection
		if closing, err := get("/", len(smallBody)); err != nil || closing {
			t.Fatalf("GET /: closing %v, %v", closing, err)
		}
		if closing, err := get("/chunked", 5000); err != nil || closing {
			t.Fatalf("GET /chunked: closing %v, %v", closing, err)
		}
	}
	if _, err := get("/", 99); !errors.Is(err, errUnexpected) {
		t.Fatalf("wrong size: %v, want errUnexpected", err)
	}
	if _, err := get("/missing", len(smallBody)); !errors.Is(err, errUnexpected) {
		t.Fatalf("404: %v, want errUnexpected", err)
	}
	if closing, err := get("/close", len(smallBody)); err != nil || !closing {
		t.Fatalf("GET /close: closing %v, %v; want closing", closing, err)
	}
}

func TestMeasureCountsRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(smallBody))
	}))
	defer srv.Close()
	tg := target{addr: strings.TrimPrefix(srv.URL, "http://"), host: "x.test", path: "/", size: len(smallBody)}
	m, err := measure(context.Background(), tg, 2, 50*time.Millisecond, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Requests == 0 || m.Errors != 0 || m.P50 <= 0 || m.P99 < m.P50 || m.Max < m.P99 {
		t.Fatalf("measurement %+v", m)
	}
}

// resetting resets the first n connections it accepts, as a proxy that
// drops a handshake does, and hands on the others.
type resetting struct {
	net.Listener
	mu sync.Mutex
	n  int
}

func (l *resetting) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		reset := l.n > 0
		l.n--
		l.mu.Unlock()
		if !reset {
			return c, nil
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
}

// resettingTLS starts a TLS server of smallBody that resets its first n
// connections, and returns the target that reaches it.
func resettingTLS(t *testing.T, n int) target {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(smallBody))
	}))
	srv.Listener = &resetting{Listener: srv.Listener, n: n}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return target{addr: strings.TrimPrefix(srv.URL, "https://"), host: "example.com", path: "/", size: len(smallBody),
		tls: &tls.Config{RootCAs: roots, ServerName: "example.com", NextProtos: []string{"http/1.1"}}}
}

// TestMeasureOutlivesRefusedHandshake checks that a TLS handshake the
// server resets while a scenario opens its connections is counted as an
// error of that scenario, and the connection opened again, instead of
// ending the whole run.
func TestMeasureOutlivesRefusedHandshake(t *testing.T) {
	m, err := measure(context.Background(), resettingTLS(t, 1), 2, 50*time.Millisecond, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("measure: %v", err)
	}
	if m.Errors != 1 || !strings.Contains(m.FirstError, "connecting") {
		t.Errorf("errors %d, first %q; want the one reset handshake", m.Errors, m.FirstError)
	}
	if m.Requests == 0 {
		t.Errorf("no request measured after the reset: %+v", m)
	}
	// A proxy that takes none of a scenario's connections is not serving:
	// the run stops there, saying why.
	if _, err := measure(context.Background(), resettingTLS(t, 2), 2, 50*time.Millisecond, 200*time.Millisecond, nil); err == nil || !strings.Contains(err.Error(), "connecting") {
		t.Errorf("every handshake reset: %v, want the connecting error", err)
	}
}

func TestQuantileAndMedian(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.9, 9}, {0.99, 10}, {0.01, 1}} {
		if got := quantile(d, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median of 3 = %v", got)
	}
	if got := median([]float64{4, 1}); got != 2.5 {
		t.Errorf("median of 2 = %v", got)
	}
}
