package edge

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TrafficPoint is an app's traffic over one sampling interval.
type TrafficPoint struct {
	At time.Time
	// Requests is requests per second over the interval before At.
	Requests float64
	// Errors is the share of those answered 5xx, from 0 to 1.
	Errors float64
}

// TrafficRecorder samples the edge's request counters
// (bex_edge_requests_total) from a Prometheus gatherer at a fixed interval
// and keeps each app's recent request and 5xx rates, for pictures such as
// the dashboard's. It keeps the last Keep intervals per app.
type TrafficRecorder struct {
	gatherer prometheus.Gatherer
	keep     int

	mu    sync.Mutex
	last  map[appKey]counts
	lastT time.Time
	rates map[appKey][]TrafficPoint
}

type appKey struct{ tenant, app string }

type counts struct{ total, errors float64 }

// NewTrafficRecorder returns a recorder of g's edge counters that keeps the
// last keep intervals per app.
func NewTrafficRecorder(g prometheus.Gatherer, keep int) *TrafficRecorder {
	return &TrafficRecorder{gatherer: g, keep: max(keep, 2), last: map[appKey]counts{}, rates: map[appKey][]TrafficPoint{}}
}

// Run samples every interval until ctx ends.
func (r *TrafficRecorder) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_ = r.Sample(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample reads the counters once and, from the second sample on, adds a
// point per app: the rates since the previous sample.
func (r *TrafficRecorder) Sample(now time.Time) error {
	families, err := r.gatherer.Gather()
	if err != nil {
		return fmt.Errorf("gathering the edge's metrics: %w", err)
	}
	cur := map[appKey]counts{}
	for _, f := range families {
		if f.GetName() != "bex_edge_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var k appKey
			var code string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "tenant":
					k.tenant = l.GetValue()
				case "app":
					k.app = l.GetValue()
				case "class":
					code = l.GetValue()
				}
			}
			if k.app == "" {
				continue // no route claimed the request
			}
			c := cur[k]
			v := m.GetCounter().GetValue()
			c.total += v
			if strings.HasPrefix(code, "5") {
				c.errors += v
			}
			cur[k] = c
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.lastT.IsZero() && now.After(r.lastT) {
		secs := now.Sub(r.lastT).Seconds()
		for k, c := range cur {
			prev := r.last[k]
			d := counts{total: max(c.total-prev.total, 0), errors: max(c.errors-prev.errors, 0)}
			p := TrafficPoint{At: now, Requests: d.total / secs}
			if d.total > 0 {
				p.Errors = d.errors / d.total
			}
			pts := append(r.rates[k], p)
			if len(pts) > r.keep {
				pts = pts[len(pts)-r.keep:]
			}
			r.rates[k] = pts
		}
	}
	r.last, r.lastT = cur, now
	return nil
}

// Traffic returns an app's points, oldest first.
func (r *TrafficRecorder) Traffic(tenant, app string) []TrafficPoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]TrafficPoint(nil), r.rates[appKey{tenant, app}]...)
}
