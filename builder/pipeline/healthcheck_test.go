package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/test/platformtest"
)

// healthAppJS answers its pid, and 503 on /down.
const healthAppJS = `require("http").createServer((req, res) => {
  if (req.url === "/down") { res.statusCode = 503; res.end("down"); return; }
  res.end(JSON.stringify({pid: process.pid}));
}).listen(process.env.PORT);
`

// TestHealthCheckChangeRolls, on a real build, store and process runtime:
// a new health check rolls the current release at once, each new instance
// passing it before it takes traffic, with no request lost and no release
// recorded; a check the app does not pass leaves the instances that serve
// and the App's spec as they were; in maintenance the check is stored and
// runs when maintenance ends.
func TestHealthCheckChangeRolls(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	e := newEnv(t)
	platformtest.WriteNodeApp(t, e.repo, "unused", "")
	if err := os.WriteFile(filepath.Join(e.repo, "server.js"), []byte(healthAppJS), 0o644); err != nil {
		t.Fatal(err)
	}
	if v1 := e.deploy(t, e.a, e.pushWork(t, "health app")); v1 != 1 {
		t.Fatalf("first deploy made v%d", v1)
	}
	pid := func() int {
		t.Helper()
		got, err := e.get()
		if err != nil {
			t.Fatal(err)
		}
		return got.PID
	}
	checkPath := func(path string) func(*platformv1alpha1.App) error {
		return func(a *platformv1alpha1.App) error {
			a.Spec.HealthCheck = &platformv1alpha1.HealthCheck{Path: path}
			return nil
		}
	}
	storedPath := func() string {
		if hc := e.app(t).Spec.HealthCheck; hc != nil {
			return hc.Path
		}
		return ""
	}
	first := pid()

	stop := e.keepAsking()
	n, err := e.a.Update(ctx, e.tenant, e.name, checkPath("/healthz"))
	served, failures := stop()
	if err != nil || n != 1 {
		t.Fatalf("setting a health check: v%d, %v", n, err)
	}
	if len(failures) > 0 || served == 0 {
		t.Errorf("while the health check rolled the app, %d requests were answered and %d failed: %q", served, len(failures), failures)
	}
	second := pid()
	if second == first {
		t.Errorf("the new health check did not roll the instance: pid %d still serves", first)
	}
	if got := storedPath(); got != "/healthz" {
		t.Errorf("the App's health check path is %q, want /healthz", got)
	}

	// A check the app fails: refused, what serves keeps serving.
	_, err = e.a.Update(ctx, e.tenant, e.name, checkPath("/down"))
	var nd *runtime.NotDeployedError
	if !errors.As(err, &nd) || !strings.Contains(err.Error(), "what ran keeps running") {
		t.Fatalf("a health check the app fails: %v; want a NotDeployedError saying what ran keeps running", err)
	}
	t.Logf("the refused health check says: %v", err)
	if now := pid(); now != second {
		t.Errorf("after the refused health check pid %d serves, want %d", now, second)
	}
	if got := storedPath(); got != "/healthz" {
		t.Errorf("after the refused health check the App's path is %q, want /healthz still", got)
	}

	// In maintenance: stored, run when maintenance ends.
	suspend := func(on bool) func(*platformv1alpha1.App) error {
		return func(a *platformv1alpha1.App) error { a.Spec.Suspended = on; return nil }
	}
	if _, err := e.a.Update(ctx, e.tenant, e.name, suspend(true)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.Update(ctx, e.tenant, e.name, checkPath("/")); err != nil || storedPath() != "/" {
		t.Fatalf("a health check in maintenance: %v, path %q stored", err, storedPath())
	}
	if pids := e.rt.PIDs(e.tenant, e.name); len(pids) != 0 {
		t.Errorf("a health check in maintenance started %v", pids)
	}
	if _, err := e.a.Update(ctx, e.tenant, e.name, suspend(false)); err != nil {
		t.Fatal(err)
	}
	if now := pid(); now == second {
		t.Errorf("maintenance off serves the old pid %d", now)
	}
	if latest, err := e.st.LatestRelease(ctx, mustTenantID(t, e.st, e.tenant), e.name); err != nil || latest.Number != 1 {
		t.Errorf("the latest release is v%d, %v; want v1: a setting records no release", latest.Number, err)
	}
}
