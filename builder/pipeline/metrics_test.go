package pipeline_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestPipelineMetrics deploys, fails a build and rolls back through a
// pipeline whose metrics a /metrics endpoint serves, and reads the counts
// back from a scrape: each is what happened, with the stack and outcome
// labels.
func TestPipelineMetrics(t *testing.T) {
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	if err := reg.Register(e.rt.Collector()); err != nil {
		t.Fatal(err)
	}
	pl := e.metered(reg)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)

	e.deploy(t, pl, e.commit(t, "v1", ""))
	e.deploy(t, pl, e.commit(t, "v2", ""))
	if _, err := pl.Deploy(t.Context(), e.commit(t, "v3", `process.exit(3)`), io.Discard); err == nil {
		t.Fatal("a build whose build step exits 3 deployed")
	}
	if _, err := pl.Rollback(t.Context(), e.tenant, e.name, 1, "user:test"); err != nil {
		t.Fatal(err)
	}

	got := scrape(t, srv.URL)
	for _, c := range []struct {
		metric string
		want   float64
	}{
		{`bex_builds_total{outcome="succeeded",stack="node"}`, 2},
		{`bex_builds_total{outcome="failed",stack="node"}`, 1},
		{`bex_build_duration_seconds_count{outcome="succeeded"}`, 2},
		{`bex_build_duration_seconds_count{outcome="failed"}`, 1},
		{`bex_push_duration_seconds_count{outcome="succeeded"}`, 2},
		{`bex_push_duration_seconds_count{outcome="failed"}`, 1},
		{`bex_releases_total{kind="deploy"}`, 2},
		{`bex_releases_total{kind="rollback"}`, 1},
		{`bex_runtime_instances{driver="process",state="Running"}`, 1},
		{`bex_runtime_restarts_total{driver="process"}`, 0},
	} {
		if v, ok := got[c.metric]; !ok || v != c.want {
			t.Errorf("%s = %v (present %v), want %v", c.metric, v, ok, c.want)
		}
	}
}

// scrape reads url's text exposition into "name{labels}" → value, labels
// sorted by name as the exposition writes them.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[strings.Replace(key, name, name+"_count", 1)] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}
