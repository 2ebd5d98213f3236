package process_test

import (
	"context"
	"testing"
	"time"

	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/process"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
)

// TestUsageFeedsAppSeries runs an app with a web instance and a worker
// that burns CPU, sends requests through an edge that hands its
// observations to an appmetrics.Sampler, and waits for a point with the
// requests and their latency, and CPU and memory above zero: read from
// /proc on the host, from the container's cgroup in a sandbox.
func TestUsageFeedsAppSeries(t *testing.T) {
	t.Run("host", func(t *testing.T) { testUsage(t, newDriver(t, process.Options{})) })
	t.Run("sandbox", func(t *testing.T) {
		sandboxtest.Require(t)
		testUsage(t, newDriver(t, process.Options{Sandbox: sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})}))
	})
}

func testUsage(t *testing.T, d *process.Driver) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const app = "burner"
	rel := webRelease(t, app, 1, 1, "v1", nil)
	rel.Processes["burn"] = runtime.Process{Command: "while :; do :; done", Replicas: 1}
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatal(err)
	}
	s, err := appmetrics.New(appmetrics.Options{
		Apps: func(context.Context) ([]appmetrics.Key, error) {
			return []appmetrics.Key{{Tenant: tenant, App: app}}, nil
		},
		Runtime: d,
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := edge.New(&edge.DefaultHosts{Domain: domain, Apps: d}, edge.Options{Observe: func(o edge.Observation) {
		if o.Matched {
			s.Observe(o.Route.Tenant, o.Route.App, o.Status, o.Duration)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sample(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		for range 3 {
			if _, err := get(p, app, "/"); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-ctx.Done():
			series, _ := s.Series(tenant, app, time.Hour, time.Now())
			t.Fatalf("no point with requests, latency, CPU and memory: %+v", series)
		case <-tick.C:
		}
		if err := s.Sample(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		series, ok := s.Series(tenant, app, time.Hour, time.Now())
		if !ok || len(series.Points) == 0 {
			t.Fatal("the sampler keeps no series of the app")
		}
		last := series.Points[len(series.Points)-1]
		if last.Requests == 3 && last.P50Seconds != nil && last.P99Seconds != nil && *last.P99Seconds > 0 &&
			last.CPUCores != nil && *last.CPUCores > 0.1 && last.MemoryBytes != nil && *last.MemoryBytes > 0 && last.Instances == 2 {
			return
		}
	}
}
