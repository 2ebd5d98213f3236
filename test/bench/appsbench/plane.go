package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"bex.co/bex/test/bench"
)

// planeSample is the control plane's memory at one moment: the resident
// size of its kube-apiserver (its watch caches of every resource
// included) and of etcd, and etcd's database.
type planeSample struct {
	apiserverRSS, etcdRSS uint64
	// etcdDB is the size of etcd's database file, etcdDBInUse the part of
	// it that holds data (etcd_mvcc_db_total_size_in_bytes and
	// etcd_mvcc_db_total_size_in_use_in_bytes): the file does not shrink
	// when revisions are compacted.
	etcdDB, etcdDBInUse uint64
}

// samplePlane reads the kube-apiserver's and etcd's resident sizes from
// /proc and etcd's database size from its /metrics.
func (e *env) samplePlane(ctx context.Context) (planeSample, error) {
	var s planeSample
	var err error
	if s.apiserverRSS, err = bench.RSS(e.cp.APIServers()[0].PID()); err != nil {
		return s, fmt.Errorf("kube-apiserver: %w", err)
	}
	if s.etcdRSS, err = bench.RSS(e.cp.EtcdPID()); err != nil {
		return s, fmt.Errorf("etcd: %w", err)
	}
	m, err := e.etcdMetrics(ctx, "etcd_mvcc_db_total_size_in_bytes", "etcd_mvcc_db_total_size_in_use_in_bytes")
	if err != nil {
		return s, err
	}
	s.etcdDB, s.etcdDBInUse = uint64(m[0]), uint64(m[1])
	return s, nil
}

// etcdMetrics returns the values of the unlabelled metrics names from
// etcd's /metrics, in their order; a metric etcd does not give is an
// error.
func (e *env) etcdMetrics(ctx context.Context, names ...string) ([]float64, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: e.cp.EtcdTLSConfig()}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.cp.EtcdURL()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading etcd's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading etcd's metrics: %s", resp.Status)
	}
	want := map[string]int{}
	for i, n := range names {
		want[n] = i
	}
	out := make([]float64, len(names))
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		i, wanted := want[name]
		if !ok || !wanted {
			continue
		}
		if out[i], err = strconv.ParseFloat(strings.TrimSpace(value), 64); err != nil {
			return nil, fmt.Errorf("etcd's metric %s: %w", name, err)
		}
		delete(want, name)
		found++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading etcd's metrics: %w", err)
	}
	if found < len(names) {
		return nil, fmt.Errorf("etcd's /metrics lacks %s", strings.Join(slices.Sorted(maps.Keys(want)), ", "))
	}
	return out, nil
}
