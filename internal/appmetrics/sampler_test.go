package appmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/runtime"
)

// stubRuntime answers Status and Usage from maps a test sets; it stands
// for a driver in tests of the sampler's arithmetic only (the real
// drivers are in internal/runtime/process's TestUsageFeedsAppSeries).
type stubRuntime struct {
	runtime.Driver
	status map[string]runtime.Status
	usage  map[string][]runtime.Usage
}

func (s *stubRuntime) Status(_ context.Context, tenant, app string) (runtime.Status, error) {
	st, ok := s.status[tenant+"/"+app]
	if !ok {
		return runtime.Status{}, fmt.Errorf("%s/%s: %w", tenant, app, runtime.ErrNotFound)
	}
	return st, nil
}

func (s *stubRuntime) Usage(_ context.Context, tenant, app string) ([]runtime.Usage, error) {
	u, ok := s.usage[tenant+"/"+app]
	if !ok {
		return nil, fmt.Errorf("%s/%s: %w", tenant, app, runtime.ErrNotFound)
	}
	return u, nil
}

func (s *stubRuntime) Deploy(context.Context, runtime.Release, io.Writer) error { return nil }

// TestSampler: CPU seconds become cores over the interval (a counter that
// starts again after a restart counts from zero), restarts are counted in
// the interval they happen, latencies come from the interval's requests
// only, the ring keeps Keep points, and an app no longer listed is
// dropped with its points.
func TestSampler(t *testing.T) {
	rt := &stubRuntime{
		status: map[string]runtime.Status{"acme/shop": {Instances: []runtime.Instance{{ID: "1", Restarts: 0}}}},
		usage:  map[string][]runtime.Usage{"acme/shop": {{ID: "1", CPUSeconds: 10, MemoryBytes: 100}}},
	}
	apps := []appmetrics.Key{{Tenant: "acme", App: "shop"}}
	s, err := appmetrics.New(appmetrics.Options{Apps: func(context.Context) ([]appmetrics.Key, error) { return apps, nil }, Runtime: rt, Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	sample := func(at time.Time) appmetrics.Point {
		t.Helper()
		if err := s.Sample(t.Context(), at); err != nil {
			t.Fatal(err)
		}
		series, ok := s.Series("acme", "shop", time.Hour, at)
		if !ok || len(series.Points) == 0 {
			t.Fatalf("no series at %s", at)
		}
		return series.Points[len(series.Points)-1]
	}
	if p := sample(t0); p.CPUCores != nil || p.MemoryBytes == nil || *p.MemoryBytes != 100 || p.P50Seconds != nil {
		t.Errorf("first point: %+v", p)
	}

	rt.usage["acme/shop"] = []runtime.Usage{{ID: "1", CPUSeconds: 15, MemoryBytes: 200}}
	for range 99 {
		s.Observe("acme", "shop", http.StatusOK, 10*time.Millisecond)
	}
	s.Observe("acme", "shop", http.StatusServiceUnavailable, 3*time.Second)
	p := sample(t0.Add(10 * time.Second))
	if p.CPUCores == nil || *p.CPUCores != 0.5 || *p.MemoryBytes != 200 || p.Requests != 100 || p.Errors != 1 {
		t.Errorf("second point: %+v", p)
	}
	if *p.P50Seconds < 0.01 || *p.P50Seconds > 0.0125 || *p.P99Seconds < 0.01 || *p.P99Seconds > 0.0125 {
		t.Errorf("p50 %v and p99 %v: want both in 10-12.5 ms (99 of 100 requests took 10 ms)", *p.P50Seconds, *p.P99Seconds)
	}

	// The instance crashed twice and restarted: its counter started again.
	rt.status["acme/shop"] = runtime.Status{Instances: []runtime.Instance{{ID: "1", Restarts: 2}}}
	rt.usage["acme/shop"] = []runtime.Usage{{ID: "1", CPUSeconds: 1, MemoryBytes: 50}}
	p = sample(t0.Add(20 * time.Second))
	if p.Restarts != 2 || p.CPUCores == nil || *p.CPUCores != 0.1 || p.Requests != 0 || p.P99Seconds != nil {
		t.Errorf("after two restarts: %+v", p)
	}
	p = sample(t0.Add(30 * time.Second))
	if p.Restarts != 0 {
		t.Errorf("restarts counted again in the next interval: %+v", p)
	}
	if series, _ := s.Series("acme", "shop", time.Hour, t0.Add(30*time.Second)); len(series.Points) != 3 {
		t.Errorf("Keep 3 kept %d points", len(series.Points))
	}
	if series, _ := s.Series("acme", "shop", 5*time.Second, t0.Add(30*time.Second)); len(series.Points) != 1 {
		t.Errorf("since 5s: %d points, want the last one", len(series.Points))
	}

	// Requests for an app that does not exist are dropped at the next
	// sample, and so is the app once deleted.
	s.Observe("acme", "ghost", http.StatusOK, time.Millisecond)
	apps = nil
	sample2 := func(at time.Time) {
		if err := s.Sample(t.Context(), at); err != nil {
			t.Fatal(err)
		}
	}
	sample2(t0.Add(40 * time.Second))
	for _, app := range []string{"shop", "ghost"} {
		if _, ok := s.Series("acme", app, time.Hour, t0.Add(40*time.Second)); ok {
			t.Errorf("%s is kept after the Apps source stopped listing it", app)
		}
	}
}

// TestSamplerKube: a runtime that reads no usage answers restarts and
// requests, CPU and memory nil, and a note that says why.
func TestSamplerKube(t *testing.T) {
	type statusOnly struct{ runtime.Driver }
	rt := &stubRuntime{status: map[string]runtime.Status{"acme/shop": {Instances: []runtime.Instance{{ID: "p", Restarts: 1}}}}}
	s, err := appmetrics.New(appmetrics.Options{
		Apps: func(context.Context) ([]appmetrics.Key, error) {
			return []appmetrics.Key{{Tenant: "acme", App: "shop"}}, nil
		},
		Runtime: statusOnly{rt},
	})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	if err := s.Sample(t.Context(), t0); err != nil {
		t.Fatal(err)
	}
	series, _ := s.Series("acme", "shop", time.Hour, t0)
	if len(series.Points) != 1 || series.Points[0].CPUCores != nil || series.Points[0].MemoryBytes != nil || series.Points[0].Restarts != 1 ||
		series.UsageNote != "CPU and memory are not measured: "+runtime.ErrUsageNotSupported.Error() {
		t.Errorf("kube: %+v", series)
	}
}

// bulkRuntime reads apps together from its stubRuntime's maps, counting
// its calls and the stub's own; with fail set, ReadApps fails.
type bulkRuntime struct {
	*stubRuntime
	fail                   bool
	bulkCalls, statusCalls int
}

func (b *bulkRuntime) Status(ctx context.Context, tenant, app string) (runtime.Status, error) {
	b.statusCalls++
	return b.stubRuntime.Status(ctx, tenant, app)
}

func (b *bulkRuntime) ReadApps(ctx context.Context, apps []runtime.AppName) (map[runtime.AppName]runtime.AppReading, error) {
	b.bulkCalls++
	if b.fail {
		return nil, errors.New("listing pods: forbidden")
	}
	out := map[runtime.AppName]runtime.AppReading{}
	for _, a := range apps {
		var r runtime.AppReading
		r.Status, r.StatusErr = b.stubRuntime.Status(ctx, a.Tenant, a.App)
		r.Usage, r.UsageErr = b.stubRuntime.Usage(ctx, a.Tenant, a.App)
		out[a] = r
	}
	return out, nil
}

// TestSamplerReadsAppsAtOnce: a runtime that reads every app at once
// (runtime.AppsReader, the kube driver) is asked once a round, not app by
// app; when that fails the round reads app by app, and the points are the
// same either way.
func TestSamplerReadsAppsAtOnce(t *testing.T) {
	rt := &bulkRuntime{stubRuntime: &stubRuntime{
		status: map[string]runtime.Status{"acme/shop": {Instances: []runtime.Instance{{ID: "1", Restarts: 2}}}, "acme/blog": {}},
		usage:  map[string][]runtime.Usage{"acme/shop": {{ID: "1", CPUSeconds: 10, MemoryBytes: 100}}},
	}}
	apps := []appmetrics.Key{{Tenant: "acme", App: "shop"}, {Tenant: "acme", App: "blog"}, {Tenant: "acme", App: "gone"}}
	s, err := appmetrics.New(appmetrics.Options{Apps: func(context.Context) ([]appmetrics.Key, error) { return apps, nil }, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i, fail := range []bool{false, true} {
		rt.fail, rt.bulkCalls, rt.statusCalls = fail, 0, 0
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		if err := s.Sample(t.Context(), at); err != nil {
			t.Fatal(err)
		}
		wantStatus := 0
		if fail {
			wantStatus = len(apps)
		}
		if rt.bulkCalls != 1 || rt.statusCalls != wantStatus {
			t.Errorf("ReadApps failing %t: %d ReadApps and %d Status calls for %d apps, want 1 and %d", fail, rt.bulkCalls, rt.statusCalls, len(apps), wantStatus)
		}
		series, _ := s.Series("acme", "shop", time.Hour, at)
		last := series.Points[len(series.Points)-1]
		if last.Instances != 1 || last.MemoryBytes == nil || *last.MemoryBytes != 100 {
			t.Errorf("ReadApps failing %t: shop's point %+v, want one instance of 100 bytes", fail, last)
		}
	}
}
