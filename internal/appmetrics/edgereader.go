package appmetrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// TotalsPath is where an edge's process serves its Totals, behind a bearer
// token (bex-edge: on --metrics-listen, with --app-metrics-token-file).
const TotalsPath = "/appmetrics"

// maxTotals bounds one edge's Totals read: 10,000 apps with every bucket
// counted take about 8 MB of JSON.
const maxTotals = 64 << 20

// EdgeReaderOptions configure an EdgeReader.
type EdgeReaderOptions struct {
	// Addrs returns the host:port of every edge process to read, each
	// round (DNSAddrs: a headless Service's name). Required.
	Addrs func(ctx context.Context) ([]string, error)
	// Token is sent as the bearer token. Required: the edges' Totals hold
	// every tenant's traffic and are served to no one without it.
	Token string
	// Client reads the edges [an http.Client with a 5 s timeout].
	Client *http.Client
	// Interval is how often Run reads [the Sampler's Interval].
	Interval time.Duration
	Log      logr.Logger
}

// EdgeReader brings the requests of edges that run in processes of their
// own (bex-edge, several replicas) to a Sampler: every Interval it reads
// each edge's Totals (cumulative counts per app) and adds the difference
// from its previous read to the Sampler's current interval, as Observe
// would have. The counts are cumulative, so any number of readers (each
// bex-web replica has its own Sampler) read the same edges without
// disturbing one another.
//
// An edge read for the first time is a baseline (its counts cover its
// whole life), unless it started after the previous round: then all it
// counted is new. An edge that answers with another Boot restarted: all
// its counts are new. An app whose counts went down was forgotten by the
// edge and counted again: its counts are new. Requests land in the
// interval in which they are read, at most one Interval after they were
// served; an edge that does not answer loses the requests it served
// since its last read only if it is gone by the next round.
type EdgeReader struct {
	sampler *Sampler
	opts    EdgeReaderOptions

	edges     map[string]*edgeState // by address; used by one Read at a time
	lastRound time.Time
}

type edgeState struct {
	boot string
	apps map[Key]histogram
}

// NewEdgeReader checks the options.
func NewEdgeReader(s *Sampler, opts EdgeReaderOptions) (*EdgeReader, error) {
	switch {
	case s == nil:
		return nil, errors.New("appmetrics: the EdgeReader's Sampler is nil")
	case opts.Addrs == nil:
		return nil, errors.New("appmetrics: EdgeReaderOptions.Addrs is nil")
	case opts.Token == "":
		return nil, errors.New("appmetrics: EdgeReaderOptions.Token is empty: the edges serve their Totals to no one without it")
	case opts.Interval < 0:
		return nil, errors.New("appmetrics: EdgeReaderOptions.Interval may not be negative")
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if opts.Interval == 0 {
		opts.Interval = s.Interval()
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &EdgeReader{sampler: s, opts: opts, edges: map[string]*edgeState{}}, nil
}

// DNSAddrs returns an Addrs that resolves each host:port's host to all
// its addresses (a headless Service names every Pod), each with that
// port.
func DNSAddrs(hostports []string) (func(context.Context) ([]string, error), error) {
	type hp struct{ host, port string }
	var hps []hp
	for _, s := range hostports {
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("%q is not host:port", s)
		}
		hps = append(hps, hp{host, port})
	}
	return func(ctx context.Context) ([]string, error) {
		var out []string
		for _, h := range hps {
			ips, err := net.DefaultResolver.LookupHost(ctx, h.host)
			if err != nil {
				return nil, fmt.Errorf("resolving the edges' %s: %w", h.host, err)
			}
			for _, ip := range ips {
				out = append(out, net.JoinHostPort(ip, h.port))
			}
		}
		sort.Strings(out)
		return slices.Compact(out), nil
	}, nil
}

// finalReadTimeout bounds the read Run makes once its context ends.
const finalReadTimeout = 5 * time.Second

// Run reads the edges every Interval until ctx ends, then once more (at
// most 5 s, on a context of ctx's values), so that the Sampler's last
// sample, after Run returns, has the requests the edges served since.
func (r *EdgeReader) Run(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalReadTimeout)
			defer cancel()
			if err := r.Read(rctx, time.Now()); err != nil {
				r.opts.Log.Error(err, "Reading the edges' requests a last time")
			}
			return
		case now := <-t.C:
			if err := r.Read(ctx, now); err != nil {
				r.opts.Log.Error(err, "Reading the edges' requests")
			}
		}
	}
}

// Read reads every edge once and adds what each served since its last
// read to the Sampler. An edge that fails is named in the error; the
// others are read. Calls must not overlap.
func (r *EdgeReader) Read(ctx context.Context, now time.Time) error {
	addrs, err := r.opts.Addrs(ctx)
	if err != nil {
		return err
	}
	var errs []error
	seen := make(map[string]bool, len(addrs))
	for _, addr := range addrs {
		seen[addr] = true
		snap, err := r.fetch(ctx, addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("edge %s: %w", addr, err))
			continue
		}
		prev := r.edges[addr]
		baseline := prev == nil && (r.lastRound.IsZero() || !snap.Started.After(r.lastRound))
		if prev != nil && prev.boot != snap.Boot {
			prev = nil
		}
		cur := make(map[Key]histogram, len(snap.Apps))
		for _, at := range snap.Apps {
			k := Key{at.Tenant, at.App}
			c := histogramOf(at)
			cur[k] = c
			if baseline {
				continue
			}
			var p histogram
			if prev != nil {
				p = prev.apps[k]
			}
			d, ok := c.minus(p)
			if !ok {
				d = c
			}
			if d.requests > 0 {
				r.sampler.add(k, d)
			}
		}
		r.edges[addr] = &edgeState{boot: snap.Boot, apps: cur}
	}
	for addr := range r.edges {
		if !seen[addr] {
			delete(r.edges, addr)
		}
	}
	r.lastRound = now
	return errors.Join(errs...)
}

// fetch reads one edge's Totals.
func (r *EdgeReader) fetch(ctx context.Context, addr string) (*TotalsSnapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+TotalsPath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.opts.Token)
	resp, err := r.opts.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", TotalsPath, resp.Status, strings.TrimSpace(string(b)))
	}
	var snap TotalsSnapshot
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxTotals)).Decode(&snap); err != nil {
		return nil, fmt.Errorf("reading %s: %w", TotalsPath, err)
	}
	if snap.Boot == "" {
		return nil, fmt.Errorf("%s names no boot", TotalsPath)
	}
	for _, at := range snap.Apps {
		for _, b := range at.Buckets {
			if b[0] >= bucketCount {
				return nil, fmt.Errorf("%s: app %s/%s has bucket %d, want 0 to %d", TotalsPath, at.Tenant, at.App, b[0], bucketCount-1)
			}
		}
	}
	return &snap, nil
}

func histogramOf(at AppTotals) histogram {
	c := histogram{requests: at.Requests, errors: at.Errors}
	for _, b := range at.Buckets {
		c.buckets[b[0]] = b[1]
	}
	return c
}

// add counts an edge's requests of an app into its current interval, as
// Observe does one at a time.
func (s *Sampler) add(k Key, c histogram) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.tracked(k); a != nil {
		a.cur.add(c)
	}
}
