package runtimetest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/runtimemetrics"
)

// Metrics is one scrape of the runtime's metrics of one driver label.
type Metrics struct {
	// Instances is bex_runtime_instances by state.
	Instances map[runtime.InstanceState]float64
	// Restarts is bex_runtime_restarts_total; HasRestarts says it was
	// there.
	Restarts    float64
	HasRestarts bool
	// ReadErrors is bex_runtime_read_errors_total, of a driver read at
	// each scrape.
	ReadErrors float64
}

// ReadMetrics scrapes c, as a registry serving it would, and returns its
// series of driver.
func ReadMetrics(t testing.TB, c prometheus.Collector, driver string) Metrics {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("registering the runtime's metrics: %v", err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering the runtime's metrics: %v", err)
	}
	m := Metrics{Instances: map[runtime.InstanceState]float64{}}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["driver"] != driver {
				continue
			}
			switch f.GetName() {
			case runtimemetrics.InstancesName:
				m.Instances[runtime.InstanceState(labels["state"])] = s.GetGauge().GetValue()
			case runtimemetrics.RestartsName:
				m.Restarts, m.HasRestarts = s.GetCounter().GetValue(), true
			case runtimemetrics.ReadErrorsName:
				m.ReadErrors = s.GetCounter().GetValue()
			}
		}
	}
	return m
}
