package edge

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestTrafficRecorder(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	shop := Route{Tenant: "acme", App: "shop", Host: "shop.test"}
	serve := func(route Route, status, n int) {
		for range n {
			m.observe(Observation{Matched: true, Route: route, Status: status})
		}
	}
	r := NewTrafficRecorder(reg, 2)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	serve(shop, 200, 5)
	if err := r.Sample(t0); err != nil {
		t.Fatal(err)
	}
	if got := r.Traffic("acme", "shop"); len(got) != 0 {
		t.Fatalf("points after one sample = %+v, want none: a rate needs two", got)
	}
	serve(shop, 200, 30)
	serve(shop, 502, 10)
	m.observe(Observation{Status: 404}) // no route: not an app's
	serve(Route{Tenant: "other", App: "shop", Host: "x.test"}, 500, 7)
	if err := r.Sample(t0.Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got := r.Traffic("acme", "shop")
	if len(got) != 1 || got[0].Requests != 4 || got[0].Errors != 0.25 {
		t.Fatalf("acme/shop = %+v, want 4 requests/s with 25%% errors", got)
	}
	if other := r.Traffic("other", "shop"); len(other) != 1 || other[0].Errors != 1 {
		t.Errorf("other/shop = %+v, want its own 100%% errors", other)
	}
	for i := 2; i <= 4; i++ {
		if err := r.Sample(t0.Add(time.Duration(i) * 10 * time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.Traffic("acme", "shop"); len(got) != 2 || got[1].Requests != 0 {
		t.Errorf("after more samples = %+v, want the last 2 points, idle", got)
	}
}
