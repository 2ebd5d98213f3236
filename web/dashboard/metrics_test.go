package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestAppPageMetricsCharts: the app page draws the app's series from the
// API, CPU, memory, restarts and p50/p99, once it has points; before, it
// says that none were sampled yet.
func TestAppPageMetricsCharts(t *testing.T) {
	e, srv := startDashboard(t)
	_, token := e.TenantToken(t, "charts")
	a := newUser(t, srv.URL)
	signIn(t, a, token)
	apps := a.get("/apps")
	if p := a.post("/apps", url.Values{"name": {"shop"}, "csrf": {apps.csrf(t)}}); p.status != http.StatusSeeOther {
		t.Fatalf("creating shop = %d", p.status)
	}
	if p := a.get("/apps/shop"); p.status != http.StatusOK || strings.Contains(p.body, `id="app-metrics"`) ||
		!strings.Contains(p.body, `<p id="app-metrics-note">no point yet: apps are sampled every 10s</p>`) {
		t.Fatalf("the app page before any sample = %d:\n%s", p.status, p.body)
	}

	e.RunTestApp(t, "charts", "shop", 1)
	t0 := time.Now().Add(-time.Minute)
	for k := range 3 {
		e.Metrics.Observe("charts", "shop", http.StatusOK, time.Duration(k+1)*10*time.Millisecond)
		if err := e.Metrics.Sample(t.Context(), t0.Add(time.Duration(k)*10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	p := a.get("/apps/shop")
	if p.status != http.StatusOK {
		t.Fatalf("the app page = %d", p.status)
	}
	for _, want := range []string{`id="app-metrics"`, `<figcaption>CPU (cores)</figcaption><svg`, `<figcaption>Memory</figcaption><svg`,
		`<figcaption>Restarts per interval</figcaption><svg`, `<figcaption>Latency at the edge: p50 (blue) and p99 (red)</figcaption><svg`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the app page lacks %s:\n%s", want, p.body)
		}
	}
}
