package app

import (
	"bytes"
	"testing"
	"time"

	"bex.co/bex/web/api/apiclient"
)

// TestRenderMetrics: bex metrics writes a summary of the span (peaks and
// totals), the note, then the last points; "-" marks what was not
// measured, and an app without points says why.
func TestRenderMetrics(t *testing.T) {
	at := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	m := apiclient.AppMetrics{App: "shop", IntervalSeconds: 10, SinceSeconds: 900, Points: []apiclient.MetricPoint{
		{Time: at, Instances: 1, MemoryBytes: i(30 << 20)},
		{Time: at.Add(10 * time.Second), CPUCores: f(0.25), MemoryBytes: i(48 << 20), Instances: 2, Restarts: 1, Requests: 120, Errors: 3, P50Seconds: f(0.0125), P99Seconds: f(0.25)},
	}}
	var out bytes.Buffer
	st := &state{io: IO{Out: &out}}
	if err := st.renderMetrics(&out, m); err != nil {
		t.Fatal(err)
	}
	want := "shop over the last 15m0s: CPU peak 0.25 cores, memory peak 48.0MiB, 1 restarts, 120 requests (3 5xx), p99 peak 250.0ms\n" +
		"TIME      CPU   MEMORY   INSTANCES  RESTARTS  REQUESTS  5XX  P50     P99\n" +
		"12:00:00  -     30.0MiB  1          0         0         0    -       -\n" +
		"12:00:10  0.25  48.0MiB  2          1         120       3    12.5ms  250.0ms\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}

	out.Reset()
	kube := apiclient.AppMetrics{App: "shop", SinceSeconds: 3600, Note: "CPU and memory are not measured: cluster alpha: this runtime does not read its instances' CPU and memory",
		Points: []apiclient.MetricPoint{{Time: at, Instances: 2}}}
	if err := st.renderMetrics(&out, kube); err != nil {
		t.Fatal(err)
	}
	want = "shop over the last 1h0m0s: CPU peak - cores, memory peak -, 0 restarts, 0 requests (0 5xx), p99 peak -\n" +
		"Note: CPU and memory are not measured: cluster alpha: this runtime does not read its instances' CPU and memory\n" +
		"TIME      CPU  MEMORY  INSTANCES  RESTARTS  REQUESTS  5XX  P50  P99\n" +
		"12:00:00  -    -       2          0         0         0    -    -\n"
	if out.String() != want {
		t.Errorf("kube: got\n%s\nwant\n%s", out.String(), want)
	}

	out.Reset()
	if err := st.renderMetrics(&out, apiclient.AppMetrics{App: "shop", SinceSeconds: 3600, Note: "no point yet: apps are sampled every 10s"}); err != nil {
		t.Fatal(err)
	}
	if want := "No metrics of shop over the last 1h0m0s: no point yet: apps are sampled every 10s\n"; out.String() != want {
		t.Errorf("no points: got %q, want %q", out.String(), want)
	}
}
