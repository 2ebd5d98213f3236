package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestMetricsCLI: bex metrics prints the app's series through the API: a
// summary and the points as a table, every point with -o json; a bad
// --since is refused with the API's reason and exit code 2 (usage).
func TestMetricsCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	_, token := e.TenantToken(t, "climx")
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	io := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string { return env[k] }}
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := bexRun(t, io, args...)
		if code != 0 {
			t.Fatalf("bex %q: exit %d: %s", args, code, stderr)
		}
		return stdout
	}
	run("apps", "create", "shop")
	if out := run("metrics", "shop"); !strings.HasPrefix(out, "No metrics of shop over the last 1h0m0s: no point yet") {
		t.Errorf("metrics before any sample printed %q", out)
	}

	e.RunTestApp(t, "climx", "shop", 1)
	t0 := time.Now().Add(-time.Minute)
	if err := e.Metrics.Sample(t.Context(), t0); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		e.Metrics.Observe("climx", "shop", http.StatusOK, 30*time.Millisecond)
	}
	if err := e.Metrics.Sample(t.Context(), t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	out := run("metrics", "shop", "--since", "15m")
	if !strings.HasPrefix(out, "shop over the last 15m0s: CPU peak ") || !strings.Contains(out, "4 requests (0 5xx), p99 peak 3") ||
		!strings.Contains(out, "TIME ") || strings.Count(out, "\n") != 4 {
		t.Errorf("bex metrics shop --since 15m printed\n%s", out)
	}
	var m apiclient.AppMetrics
	if err := json.Unmarshal([]byte(run("metrics", "shop", "-o", "json")), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Points) != 2 || m.Points[1].Requests != 4 || m.Points[1].MemoryBytes == nil {
		t.Errorf("-o json: %+v", m)
	}
	_, stderr, code := bexRun(t, io, "metrics", "shop", "--since", "3h")
	if code == 0 || !strings.Contains(stderr, "since") {
		t.Errorf("--since 3h: exit %d, stderr %q", code, stderr)
	}
}
