package dashboard

import (
	"strings"
	"testing"
	"time"

	"bex.co/bex/web/api/apiclient"
)

// TestMetricsCharts: an app's series make four charts (CPU, memory,
// restarts, p50/p99) scaled to their peak; a gap in a value breaks its
// line; a chart of values never measured (CPU and memory on kube) is left
// out, and a single point makes no chart.
func TestMetricsCharts(t *testing.T) {
	at := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	points := []apiclient.MetricPoint{
		{Time: at, MemoryBytes: i(32 << 20), Instances: 1},
		{Time: at.Add(10 * time.Second), CPUCores: f(0.5), MemoryBytes: i(64 << 20), Instances: 1, Requests: 10, P50Seconds: f(0.01), P99Seconds: f(0.2)},
		{Time: at.Add(20 * time.Second), CPUCores: f(0.25), MemoryBytes: i(48 << 20), Instances: 1, Restarts: 2},
		{Time: at.Add(30 * time.Second), CPUCores: f(0.1), MemoryBytes: i(40 << 20), Instances: 1, Requests: 5, P50Seconds: f(0.02), P99Seconds: f(0.4)},
	}
	charts := metricsCharts(apiclient.AppMetrics{Points: points})
	var captions []string
	for _, c := range charts {
		captions = append(captions, c.Caption)
	}
	if got := strings.Join(captions, "|"); got != "CPU (cores)|Memory|Restarts per interval|Latency at the edge: p50 (blue) and p99 (red)" {
		t.Fatalf("charts: %s", got)
	}
	for _, c := range []struct {
		chart int
		want  []string
	}{
		{0, []string{`>0.50</text>`, `<polyline fill="none" stroke="#1565c0" stroke-width="2" points="193.3,12.0 330.7,65.0 468.0,96.8"/>`}},
		{1, []string{`>64MiB</text>`}},
		{2, []string{`>2</text>`, `stroke="#ef6c00"`}},
		// p50 and p99 each break at the interval without requests: two
		// runs of one point per line.
		{3, []string{`>400ms</text>`, `stroke="#c62828" stroke-width="2" points="193.3,65.0"/>`, `stroke="#c62828" stroke-width="2" points="468.0,12.0"/>`}},
	} {
		svg := string(charts[c.chart].SVG)
		for _, w := range c.want {
			if !strings.Contains(svg, w) {
				t.Errorf("%s lacks %s:\n%s", charts[c.chart].Caption, w, svg)
			}
		}
	}

	kube := []apiclient.MetricPoint{{Time: at, Instances: 2}, {Time: at.Add(10 * time.Second), Instances: 2}}
	captions = nil
	for _, c := range metricsCharts(apiclient.AppMetrics{Points: kube}) {
		captions = append(captions, c.Caption)
	}
	if got := strings.Join(captions, "|"); got != "Restarts per interval" {
		t.Errorf("charts without CPU, memory or requests: %s", got)
	}
	if c := metricsCharts(apiclient.AppMetrics{Points: points[:1]}); len(c) != 0 {
		t.Errorf("one point made %d charts", len(c))
	}
}
