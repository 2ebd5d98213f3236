package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// AppMetrics answers GET /api/v1/apps/{app}/metrics: the app's series over
// the last since, one point per interval, oldest first (docs/metrics.md).
type AppMetrics struct {
	App string `json:"app"`
	// IntervalSeconds is the series' resolution; SinceSeconds how far back
	// the answer goes.
	IntervalSeconds float64 `json:"intervalSeconds"`
	SinceSeconds    float64 `json:"sinceSeconds"`
	// Note, when set, says what is missing and why: CPU and memory on a
	// runtime that does not read them, no point yet.
	Note   string        `json:"note,omitempty"`
	Points []MetricPoint `json:"points"`
}

// MetricPoint is one interval of an app, ending at Time. A null field was
// not measured.
type MetricPoint struct {
	Time time.Time `json:"time"`
	// CPUCores is the CPU the app's instances used over the interval, in
	// cores (1 = one core busy all the time).
	CPUCores *float64 `json:"cpuCores"`
	// MemoryBytes is the memory the app's instances use at Time.
	MemoryBytes *int64 `json:"memoryBytes"`
	// Instances is how many instances ran at Time.
	Instances int `json:"instances"`
	// Restarts is how many crashed instances were restarted in the
	// interval.
	Restarts int `json:"restarts"`
	// Requests and Errors (answered 5xx) are the edge's requests for the
	// app in the interval.
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"`
	// P50Seconds and P99Seconds are the median and 99th percentile of the
	// edge's request durations in the interval, null without requests.
	P50Seconds *float64 `json:"p50Seconds"`
	P99Seconds *float64 `json:"p99Seconds"`
}

// Metrics returns app's series over the last since ("15m"; empty: the
// whole retention, an hour).
func (c *Client) Metrics(ctx context.Context, app, since string) (AppMetrics, error) {
	var m AppMetrics
	var q url.Values
	if since != "" {
		q = url.Values{"since": {since}}
	}
	return m, c.call(ctx, http.MethodGet, "/apps/"+seg(app)+"/metrics", q, nil, &m)
}
