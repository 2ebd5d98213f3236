package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"bex.co/bex/test/bench"
)

// planeSample is the control plane's memory at one moment: the resident
// size of its kube-apiserver (its watch caches of every resource
// included) and of etcd, their Go heaps, and etcd's database.
type planeSample struct {
	apiserverRSS, etcdRSS uint64
	// apiserverHeap and etcdHeap are their Go heaps: live at the last
	// garbage collection (go_gc_heap_live_bytes) when the process gives
	// it, else in use (go_memstats_heap_inuse_bytes, garbage not yet
	// collected included); apiserverHeapKind and etcdHeapKind say which.
	apiserverHeap, etcdHeap         uint64
	apiserverHeapKind, etcdHeapKind string
	// etcdDB is the size of etcd's database file, etcdDBInUse the part of
	// it that holds data (etcd_mvcc_db_total_size_in_bytes and
	// etcd_mvcc_db_total_size_in_use_in_bytes): the file does not shrink
	// when revisions are compacted.
	etcdDB, etcdDBInUse uint64
}

const (
	liveHeapMetric = "go_gc_heap_live_bytes"
	heapMetric     = "go_memstats_heap_inuse_bytes"
	dbMetric       = "etcd_mvcc_db_total_size_in_bytes"
	dbInUseMetric  = "etcd_mvcc_db_total_size_in_use_in_bytes"
)

// samplePlane reads the kube-apiserver's and etcd's resident sizes from
// /proc, and their Go heaps and etcd's database size from their /metrics.
func (e *env) samplePlane(ctx context.Context) (planeSample, error) {
	var s planeSample
	var err error
	if s.apiserverRSS, err = bench.RSS(e.cp.APIServers()[0].PID()); err != nil {
		return s, fmt.Errorf("kube-apiserver: %w", err)
	}
	if s.etcdRSS, err = bench.RSS(e.cp.EtcdPID()); err != nil {
		return s, fmt.Errorf("etcd: %w", err)
	}
	etcdClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: e.cp.EtcdTLSConfig()}}
	m, err := scrape(ctx, etcdClient, e.cp.EtcdURL()+"/metrics", dbMetric, dbInUseMetric, liveHeapMetric, heapMetric)
	if err != nil {
		return s, fmt.Errorf("reading etcd's metrics: %w", err)
	}
	if m[dbMetric] == 0 || m[dbInUseMetric] == 0 {
		return s, fmt.Errorf("etcd's /metrics lacks %s or %s", dbMetric, dbInUseMetric)
	}
	s.etcdDB, s.etcdDBInUse = uint64(m[dbMetric]), uint64(m[dbInUseMetric])
	s.etcdHeap, s.etcdHeapKind = goHeap(m)
	apiClient, err := rest.HTTPClientFor(e.cfg)
	if err != nil {
		return s, err
	}
	if m, err = scrape(ctx, apiClient, strings.TrimSuffix(e.cfg.Host, "/")+"/metrics", liveHeapMetric, heapMetric); err != nil {
		return s, fmt.Errorf("reading the kube-apiserver's metrics: %w", err)
	}
	s.apiserverHeap, s.apiserverHeapKind = goHeap(m)
	return s, nil
}

// goHeap returns the live heap from metrics m when they give it, else the
// heap in use, and which it is.
func goHeap(m map[string]float64) (uint64, string) {
	if v, ok := m[liveHeapMetric]; ok {
		return uint64(v), "live at its last GC"
	}
	return uint64(m[heapMetric]), "in use"
}

// scrape returns the values of the unlabelled metrics names that url
// (Prometheus's text format) gives.
func scrape(ctx context.Context, c *http.Client, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		if out[name], err = strconv.ParseFloat(strings.TrimSpace(value), 64); err != nil {
			return nil, fmt.Errorf("metric %s: %w", name, err)
		}
	}
	return out, sc.Err()
}
