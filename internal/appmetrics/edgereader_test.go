package appmetrics_test

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/runtime"
)

// edgeProcess serves a Totals as bex-edge does, behind a bearer token, at
// a fixed address; restart stands for the process starting again (new
// Totals, counts from zero).
type edgeProcess struct {
	srv *httptest.Server

	mu     sync.Mutex
	totals *appmetrics.Totals
}

func newEdgeProcess(t *testing.T, token string) *edgeProcess {
	e := &edgeProcess{totals: appmetrics.NewTotals(0, 0)}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) != 1 {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != appmetrics.TotalsPath {
			http.NotFound(w, r)
			return
		}
		e.mu.Lock()
		tot := e.totals
		e.mu.Unlock()
		tot.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *edgeProcess) observe(tenant, app string, n, status int, d time.Duration) {
	e.mu.Lock()
	tot := e.totals
	e.mu.Unlock()
	for range n {
		tot.Observe(tenant, app, status, d)
	}
}

func (e *edgeProcess) restart() {
	e.mu.Lock()
	e.totals = appmetrics.NewTotals(0, 0)
	e.mu.Unlock()
}

func (e *edgeProcess) addr() string { return strings.TrimPrefix(e.srv.URL, "http://") }

// TestEdgeReader: two edge processes count requests; two readers (two
// bex-web replicas, each with its own sampler) read them over HTTP. Each
// interval's point holds what both edges served in it, no more: the
// counts before a reader's first read are a baseline, an edge restarted
// between reads counts from zero, and a second reader's reads take
// nothing from the first's. Each app's point holds its own requests only.
func TestEdgeReader(t *testing.T) {
	const token = "edge-token"
	edges := []*edgeProcess{newEdgeProcess(t, token), newEdgeProcess(t, token)}
	addrs := func(context.Context) ([]string, error) { return []string{edges[0].addr(), edges[1].addr()}, nil }
	keys := []appmetrics.Key{{Tenant: "acme", App: "shop"}, {Tenant: "beta", App: "shop"}}
	rt := &stubRuntime{status: map[string]runtime.Status{"acme/shop": {}, "beta/shop": {}}}
	newReplica := func() (*appmetrics.Sampler, *appmetrics.EdgeReader) {
		s, err := appmetrics.New(appmetrics.Options{Apps: func(context.Context) ([]appmetrics.Key, error) { return keys, nil }, Runtime: rt})
		if err != nil {
			t.Fatal(err)
		}
		r, err := appmetrics.NewEdgeReader(s, appmetrics.EdgeReaderOptions{Addrs: addrs, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		return s, r
	}
	s1, r1 := newReplica()
	s2, r2 := newReplica()
	t0 := time.Now()
	// round reads the edges and samples, with both replicas, and returns
	// each replica's last point of app.
	round := func(i int, app appmetrics.Key) [2]appmetrics.Point {
		t.Helper()
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		var out [2]appmetrics.Point
		for j, rep := range []struct {
			s *appmetrics.Sampler
			r *appmetrics.EdgeReader
		}{{s1, r1}, {s2, r2}} {
			if err := rep.r.Read(t.Context(), at); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			if err := rep.s.Sample(t.Context(), at); err != nil {
				t.Fatal(err)
			}
			series, _ := rep.s.Series(app.Tenant, app.App, time.Hour, at)
			out[j] = series.Points[len(series.Points)-1]
		}
		return out
	}
	acme := keys[0]

	// Served before the replicas first read: not this interval's.
	edges[0].observe("acme", "shop", 50, 200, time.Millisecond)
	for _, p := range round(0, acme) {
		if p.Requests != 0 {
			t.Errorf("first read: %d requests, want 0 (the edges' counts so far are a baseline)", p.Requests)
		}
	}

	edges[0].observe("acme", "shop", 98, 200, 10*time.Millisecond)
	edges[1].observe("acme", "shop", 2, 503, 2*time.Second)
	edges[1].observe("beta", "shop", 7, 200, time.Millisecond)
	for j, p := range round(1, acme) {
		if p.Requests != 100 || p.Errors != 2 || p.P50Seconds == nil || p.P99Seconds == nil {
			t.Fatalf("replica %d, acme's second point: %+v, want 100 requests from both edges, 2 errors", j, p)
		}
		if *p.P50Seconds < 0.010 || *p.P50Seconds > 0.0125 || *p.P99Seconds < 2 || *p.P99Seconds > 2.5 {
			t.Errorf("replica %d: p50 %v, p99 %v; want 10 ms and 2 s, at most 25%% above", j, *p.P50Seconds, *p.P99Seconds)
		}
	}
	for j, p := range [2]*appmetrics.Sampler{s1, s2} {
		series, _ := p.Series("beta", "shop", time.Hour, t0.Add(10*time.Second))
		if last := series.Points[len(series.Points)-1]; last.Requests != 7 || last.Errors != 0 {
			t.Errorf("replica %d, beta's second point: %+v, want its own 7 requests", j, last)
		}
	}

	// Nothing served: nothing counted again.
	for _, p := range round(2, acme) {
		if p.Requests != 0 {
			t.Errorf("an interval without requests: %d, want 0", p.Requests)
		}
	}

	// The second edge restarts and counts from zero, below what it had.
	edges[1].restart()
	edges[1].observe("acme", "shop", 1, 200, time.Millisecond)
	edges[0].observe("acme", "shop", 3, 200, time.Millisecond)
	for j, p := range round(3, acme) {
		if p.Requests != 4 {
			t.Errorf("replica %d, after an edge restarted: %d requests, want 4", j, p.Requests)
		}
	}
}

// TestEdgeReaderToken: a reader without the edges' token is refused (the
// Totals hold every tenant's traffic), and says so; a reader is not
// TestEdgeReaderReadsOnStop: when Run stops, it reads the edges once
// more, so the sampler's last sample has what they served since the last
// read.
func TestEdgeReaderReadsOnStop(t *testing.T) {
	const token = "edge-token"
	edge := newEdgeProcess(t, token)
	keys := []appmetrics.Key{{Tenant: "acme", App: "shop"}}
	s, err := appmetrics.New(appmetrics.Options{Apps: func(context.Context) ([]appmetrics.Key, error) { return keys, nil },
		Runtime: &stubRuntime{status: map[string]runtime.Status{"acme/shop": {}}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := appmetrics.NewEdgeReader(s, appmetrics.EdgeReaderOptions{
		Addrs: func(context.Context) ([]string, error) { return []string{edge.addr()}, nil }, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := r.Read(t.Context(), t0); err != nil {
		t.Fatal(err)
	}
	edge.observe("acme", "shop", 9, http.StatusOK, 2*time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r.Run(ctx)
	if err := s.Sample(t.Context(), t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	series, _ := s.Series("acme", "shop", time.Hour, t0.Add(3*time.Second))
	if n := len(series.Points); n != 1 || series.Points[0].Requests != 9 {
		t.Errorf("after the reader stopped: %+v, want one point with the 9 requests served after its last read", series.Points)
	}
}

// built without a token at all.
func TestEdgeReaderToken(t *testing.T) {
	e := newEdgeProcess(t, "right")
	rt := &stubRuntime{}
	s, err := appmetrics.New(appmetrics.Options{Apps: func(context.Context) ([]appmetrics.Key, error) { return nil, nil }, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	addrs := func(context.Context) ([]string, error) { return []string{e.addr()}, nil }
	if _, err := appmetrics.NewEdgeReader(s, appmetrics.EdgeReaderOptions{Addrs: addrs}); err == nil {
		t.Error("a reader without a token was built")
	}
	r, err := appmetrics.NewEdgeReader(s, appmetrics.EdgeReaderOptions{Addrs: addrs, Token: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Read(t.Context(), time.Now()); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), e.addr()) {
		t.Errorf("a read with the wrong token: %v, want a 401 naming the edge", err)
	}
}

// BenchmarkEdgeRead10000Apps: one read of an edge that counted 10,000
// apps, each with requests in 12 latency buckets, by a reader that read it
// before (the differences of every app). It reports the size of the
// edge's answer.
func BenchmarkEdgeRead10000Apps(b *testing.B) {
	const token = "edge-token"
	e := &edgeProcess{totals: appmetrics.NewTotals(0, 0)}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.totals.ServeHTTP(w, r) }))
	defer e.srv.Close()
	var keys []appmetrics.Key
	for i := range 10000 {
		k := appmetrics.Key{Tenant: fmt.Sprintf("tenant-%04d", i/5), App: fmt.Sprintf("app-%05d", i)}
		keys = append(keys, k)
		for j := range 12 {
			e.totals.Observe(k.Tenant, k.App, 200, time.Duration(1<<j)*time.Millisecond)
		}
	}
	s, err := appmetrics.New(appmetrics.Options{Apps: func(context.Context) ([]appmetrics.Key, error) { return keys, nil }, Runtime: &stubRuntime{}})
	if err != nil {
		b.Fatal(err)
	}
	r, err := appmetrics.NewEdgeReader(s, appmetrics.EdgeReaderOptions{Addrs: func(context.Context) ([]string, error) { return []string{e.addr()}, nil }, Token: token})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Read(b.Context(), time.Now()); err != nil {
		b.Fatal(err)
	}
	resp, err := http.Get(e.srv.URL + appmetrics.TotalsPath)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for b.Loop() {
		for _, k := range keys[:100] {
			e.totals.Observe(k.Tenant, k.App, 200, time.Millisecond)
		}
		if err := r.Read(b.Context(), time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(body)), "bytes/read")
}
