package api_test

import (
	"net/http"
	"testing"
	"time"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestAppMetrics: GET /apps/{app}/metrics answers the app's series: the
// instances and memory the runtime reports, the requests the edge saw in
// each interval with their p50 and p99; since bounds the answer, and a
// since outside the interval to the retention is a 400; another tenant's
// app is not found.
func TestAppMetrics(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	_, token := e.TenantToken(t, "mxacme")
	_, other := e.TenantToken(t, "mxother")
	createApp(t, e, token, "shop")

	var m apiclient.AppMetrics
	a := call(t, e, http.MethodGet, "/apps/shop/metrics", token, nil)
	wantStatus(t, "metrics before any sample", a, http.StatusOK)
	a.decode(t, &m)
	if m.App != "shop" || len(m.Points) != 0 || m.Note == "" || m.IntervalSeconds != 10 || m.SinceSeconds != 3600 {
		t.Errorf("before any sample: %+v", m)
	}

	e.RunTestApp(t, "mxacme", "shop", 1, "worker")
	t0 := time.Now().Add(-time.Minute)
	if err := e.Metrics.Sample(t.Context(), t0); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{10, 20, 30, 40, 2000} {
		e.Metrics.Observe("mxacme", "shop", http.StatusOK, d*time.Millisecond)
	}
	e.Metrics.Observe("mxacme", "shop", http.StatusBadGateway, time.Millisecond)
	if err := e.Metrics.Sample(t.Context(), t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}

	a = call(t, e, http.MethodGet, "/apps/shop/metrics?since=5m", token, nil)
	wantStatus(t, "metrics", a, http.StatusOK)
	m = apiclient.AppMetrics{}
	a.decode(t, &m)
	if len(m.Points) != 2 || m.SinceSeconds != 300 {
		t.Fatalf("two samples: %+v", m)
	}
	p := m.Points[1]
	if p.Requests != 6 || p.Errors != 1 || p.Instances != 2 || p.MemoryBytes == nil || *p.MemoryBytes <= 0 || p.CPUCores == nil {
		t.Errorf("second point: %+v", p)
	}
	if p.P50Seconds == nil || *p.P50Seconds < 0.02 || *p.P50Seconds > 0.025 || p.P99Seconds == nil || *p.P99Seconds < 2 || *p.P99Seconds > 2.5 {
		t.Errorf("second point's latencies: p50 %v p99 %v, want 20-25 ms and 2-2.5 s", p.P50Seconds, p.P99Seconds)
	}
	if m.Points[0].P50Seconds != nil || m.Points[0].Requests != 0 {
		t.Errorf("first point, without requests: %+v", m.Points[0])
	}

	a = call(t, e, http.MethodGet, "/apps/shop/metrics?since=30s", token, nil)
	m = apiclient.AppMetrics{}
	a.decode(t, &m)
	if len(m.Points) != 0 {
		t.Errorf("since=30s, both points older: %+v", m.Points)
	}

	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{"/apps/shop/metrics?since=2h", token, http.StatusBadRequest},
		{"/apps/shop/metrics?since=1s", token, http.StatusBadRequest},
		{"/apps/shop/metrics?since=soon", token, http.StatusBadRequest},
		{"/apps/nope/metrics", token, http.StatusNotFound},
		{"/apps/shop/metrics", other, http.StatusNotFound},
		{"/apps/shop/metrics", "", http.StatusUnauthorized},
		{"/apps/shop/metrics", e.OperatorToken, http.StatusForbidden},
	} {
		if a := call(t, e, http.MethodGet, tc.path, tc.token, nil); a.status != tc.status {
			t.Errorf("GET %s: %d %s, want %d", tc.path, a.status, a.body, tc.status)
		}
	}
}
