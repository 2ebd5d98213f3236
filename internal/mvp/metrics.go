package mvp

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// Metric names the proxy exports (see mvp-facts.md). A counter with no
// samples is absent from /metrics, so a missing name reads as zero.
const (
	MetricRerouted          = "apiserver_rerouted_request_total"
	MetricPeerProxyErrors   = "apiserver_peer_proxy_errors_total"
	MetricPeerDiscoveryErrs = "apiserver_peer_discovery_sync_errors_total"
)

// Sample is one counter sample.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Metrics is a scrape of the named counters, by name.
type Metrics map[string][]Sample

// Sum adds the samples of name whose labels include every pair in match.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	total := 0.0
	for _, s := range m[name] {
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.Value
		}
	}
	return total
}

// Scrape reads /metrics from the server cfg points at and keeps the counters
// named.
func Scrape(ctx context.Context, cfg *rest.Config, names ...string) (Metrics, error) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	out := Metrics{}
	for _, name := range names {
		fam, ok := families[name]
		if !ok {
			continue
		}
		for _, m := range fam.GetMetric() {
			out[name] = append(out[name], Sample{Labels: labels(m), Value: value(m)})
		}
	}
	return out, nil
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}
