package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/internal/edge"
)

// edgeResult is what measureEdge measured.
type edgeResult struct {
	entries int
	// cold is the time from a new cache's start until WatchRoutes had the
	// first full table; cacheHeap the live heap that cache and its table
	// added.
	cold      time.Duration
	cacheHeap uint64
	// rebuild is what one change of a Route costs the watch (list from the
	// cache, RouteEntries, SetRoutes), setRoutes the last alone, median of
	// rebuildRuns; tableHeap the live heap of a Table of all the entries.
	rebuild, setRoutes time.Duration
	// tableHeap is signed: the garbage collector's noise may exceed a
	// small table's size.
	tableHeap int64
	// removal are the times from a Route's deletion until the edge's
	// table no longer routes its hostname.
	removal latencies
	// latency by scenario: direct, the edge with few hostnames, the edge
	// with all.
	latency  map[string]latencies
	fewHosts int
}

const rebuildRuns = 20

// Latency scenarios.
const (
	scenarioDirect = "direct"
	scenarioFew    = "edge, few hostnames"
	scenarioAll    = "edge, all hostnames"
)

// staticApps runs every app with one upstream.
type staticApps struct{ upstream []string }

func (a staticApps) Upstreams(string, string) []string { return a.upstream }
func (a staticApps) Runs(string, string) bool          { return true }

// measureEdge builds the edge's routing table from the converged Routes as
// bex-edge does (edge.WatchRoutes on a cache of its own), times a rebuild
// and weighs the table, then measures the edge's added latency with a few
// hostnames and with all of them.
func (e *env) measureEdge(ctx context.Context, f *fleet, o *options, r *report) error {
	er := &r.edge
	heap0 := liveHeap()
	c, err := cache.New(e.cfg, cache.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	table := &edge.Table{}
	start := time.Now()
	go func() { _ = c.Start(cctx); close(done) }()
	defer func() { cancel(); <-done }()
	if err := edge.WatchRoutes(ctx, c, table, logr.Discard()); err != nil {
		return err
	}
	er.cold = time.Since(start)
	er.cacheHeap = liveHeap() - heap0

	var list platformv1alpha1.RouteList
	var rebuild, set latencies
	for range rebuildRuns {
		t0 := time.Now()
		if err := c.List(ctx, &list); err != nil {
			return err
		}
		entries := edge.RouteEntries(list.Items)
		t1 := time.Now()
		table.SetRoutes(entries)
		rebuild, set = append(rebuild, time.Since(t0)), append(set, time.Since(t1))
	}
	er.rebuild, er.setRoutes = rebuild.quantile(0.5), set.quantile(0.5)
	entries := edge.RouteEntries(list.Items)
	er.entries = len(entries)
	list = platformv1alpha1.RouteList{}
	// Ten tables, so that the figure stands above the collector's noise.
	heap1 := liveHeap()
	tables := make([]*edge.Table, 10)
	for i := range tables {
		tables[i] = &edge.Table{}
		tables[i].SetRoutes(entries)
	}
	er.tableHeap = (int64(liveHeap()) - int64(heap1)) / int64(len(tables))
	goruntime.KeepAlive(tables)
	fmt.Fprintf(os.Stderr, "edge table: %d entries, cold %s, rebuild %s\n", er.entries, er.cold.Round(time.Millisecond), er.rebuild.Round(time.Microsecond))
	if er.entries != f.apps {
		return fmt.Errorf("the edge's table has %d entries for %d converged Routes", er.entries, f.apps)
	}

	if er.removal, err = e.timeRemovals(ctx, f, table, 5); err != nil {
		return err
	}
	return e.measureLatency(ctx, entries, o, er)
}

// timeRemovals deletes the Routes of the last n apps, one at a time, and
// times each until table no longer routes its hostname.
func (e *env) timeRemovals(ctx context.Context, f *fleet, table *edge.Table, n int) (latencies, error) {
	var out latencies
	for i := f.apps - 1; i >= f.apps-n && i >= 0; i-- {
		rt := &platformv1alpha1.Route{}
		rt.Namespace, rt.Name = f.tenant(i), f.app(i)
		start := time.Now()
		if err := e.kube.Delete(ctx, rt); err != nil {
			return nil, fmt.Errorf("deleting route %s/%s: %w", rt.Namespace, rt.Name, err)
		}
		for {
			if _, ok := table.Entry(f.host(i), "/"); !ok {
				break
			}
			if time.Since(start) > time.Minute {
				return nil, fmt.Errorf("the edge still routes %s a minute after its Route was deleted", f.host(i))
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func (e *env) measureLatency(ctx context.Context, entries []edge.RouteEntry, o *options, er *edgeResult) error {
	upstream, err := serve(ctx, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Hello, world\n") }))
	if err != nil {
		return err
	}
	er.fewHosts = min(10, len(entries))
	hosts := func(es []edge.RouteEntry) []string {
		out := make([]string, 0, len(es))
		for _, e := range es {
			out = append(out, e.Hostname)
		}
		return out
	}
	targets := map[string]struct {
		addr  string
		hosts []string
	}{scenarioDirect: {upstream, hosts(entries[:er.fewHosts])}}
	for _, sc := range []struct {
		name    string
		entries []edge.RouteEntry
	}{{scenarioFew, entries[:er.fewHosts]}, {scenarioAll, entries}} {
		addr, err := e.startEdge(ctx, sc.entries, upstream)
		if err != nil {
			return err
		}
		targets[sc.name] = struct {
			addr  string
			hosts []string
		}{addr, hosts(sc.entries)}
	}
	// Every hostname once first: the edge's per-route state (metrics
	// series, round-robin counters) exists before the clock runs.
	for _, name := range []string{scenarioFew, scenarioAll} {
		t := targets[name]
		if _, err := load(ctx, t.addr, t.hosts, o.concurrency, 0, len(t.hosts)); err != nil {
			return err
		}
	}
	er.latency = map[string]latencies{}
	order := []string{scenarioDirect, scenarioFew, scenarioAll}
	for round := range o.rounds {
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, name := range order {
			t := targets[name]
			if _, err := load(ctx, t.addr, t.hosts, o.concurrency, time.Second, 0); err != nil { // warm-up
				return err
			}
			l, err := load(ctx, t.addr, t.hosts, o.concurrency, o.duration, 0)
			if err != nil {
				return err
			}
			er.latency[name] = append(er.latency[name], l...)
			fmt.Fprintf(os.Stderr, "round %d, %s: %d requests, p50 %s, p99 %s\n", round+1, name, len(l), l.quantile(0.5), l.quantile(0.99))
		}
		if round%2 == 1 {
			slices.Reverse(order)
		}
	}
	return nil
}

// startEdge serves an edge (edge.Server with a local CA and Prometheus
// metrics, as deployed) whose table holds entries, every app at upstream,
// on a loopback port for plain HTTP; it returns that port's address.
func (e *env) startEdge(ctx context.Context, entries []edge.RouteEntry, upstream string) (string, error) {
	dir, err := os.MkdirTemp("", "bex-appsbench-edge-")
	if err != nil {
		return "", err
	}
	e.stops = append(e.stops, func() { os.RemoveAll(dir) })
	ca, err := edge.LoadOrCreateLocalCA(filepath.Join(dir, "ca"))
	if err != nil {
		return "", err
	}
	table := &edge.Table{Defaults: &edge.DefaultHosts{Domain: appDomain, Apps: staticApps{[]string{upstream}}}}
	table.SetRoutes(entries)
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	httpsL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		httpL.Close()
		return "", err
	}
	srv, err := edge.NewServer(edge.ServerOptions{
		Table: table, Storage: &certmagic.FileStorage{Path: filepath.Join(dir, "storage")}, LocalCA: ca,
		HTTPPort: httpL.Addr().(*net.TCPAddr).Port, HTTPSPort: httpsL.Addr().(*net.TCPAddr).Port, ListenHost: "127.0.0.1",
		Metrics: prometheus.NewRegistry(), Log: logr.Discard(),
	})
	if err != nil {
		return "", err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = srv.Serve(sctx, httpL, httpsL); close(done) }()
	e.stops = append(e.stops, func() { cancel(); <-done; srv.Close() })
	return httpL.Addr().String(), nil
}

// serve serves h on a loopback port until ctx ends.
func serve(ctx context.Context, h http.Handler) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	context.AfterFunc(ctx, func() { srv.Close() })
	return l.Addr().String(), nil
}

// load sends GETs to addr over conns keep-alive connections, each to a
// hostname picked at random from hosts, for d, or when d is 0 each
// hostname once (n of them); it returns every request's latency. A
// response other than 200 is an error.
func load(ctx context.Context, addr string, hosts []string, conns int, d time.Duration, n int) (latencies, error) {
	var mu sync.Mutex
	var all latencies
	var firstErr error
	deadline := time.Now().Add(d)
	var next int
	var nextMu sync.Mutex
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			var mine latencies
			for ctx.Err() == nil {
				host := hosts[rand.IntN(len(hosts))]
				if d == 0 {
					nextMu.Lock()
					i := next
					next++
					nextMu.Unlock()
					if i >= n {
						break
					}
					host = hosts[i]
				} else if time.Now().After(deadline) {
					break
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
				if err != nil {
					panic(err) // constant URL form
				}
				req.Host = host
				t0 := time.Now()
				resp, err := c.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%s: %s", host, resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return all, firstErr
}
