package pipeline_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/edge"
)

// TestMaintenanceMode, on a real build, store and process runtime behind
// the edge: maintenance on stops the app's instance (the release stays)
// and the edge answers 503 with the maintenance page; a push meanwhile is
// built and recorded and runs nothing; off runs the current release again,
// with its number and no new release, and the app serves.
func TestMaintenanceMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	e := newEnv(t)
	tenantID := mustTenantID(t, e.st, e.tenant)
	if v1 := e.deploy(t, e.a, e.commitEnvApp(t)); v1 != 1 {
		t.Fatalf("first deploy made v%d", v1)
	}
	// The edge as bex-edge runs it, its maintenance set fed from the App
	// as WatchMaintenance feeds it.
	table := &edge.Table{Defaults: &edge.DefaultHosts{Domain: "apps.test", Apps: e.rt}}
	proxy, err := edge.New(table, edge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ask := func() (int, string, http.Header) {
		if e.app(t).Spec.Suspended {
			table.SetMaintenance([]edge.MaintenanceApp{{Tenant: e.tenant, App: e.name}})
		} else {
			table.SetMaintenance(nil)
		}
		req := httptest.NewRequest(http.MethodGet, "http://"+edge.Hostname(e.tenant, e.name, "apps.test")+"/", nil)
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String(), rec.Header()
	}
	if code, body, _ := ask(); code != http.StatusOK || !strings.Contains(body, `"pid"`) {
		t.Fatalf("before maintenance: %d %q", code, body)
	}
	suspend := func(on bool) func(*platformv1alpha1.App) error {
		return func(a *platformv1alpha1.App) error { a.Spec.Suspended = on; return nil }
	}

	if n, err := e.a.Update(ctx, e.tenant, e.name, suspend(true)); err != nil || n != 1 {
		t.Fatalf("maintenance on: v%d, %v", n, err)
	}
	if pids := e.rt.PIDs(e.tenant, e.name); len(pids) != 0 {
		t.Errorf("in maintenance the runtime runs %v", pids)
	}
	code, body, h := ask()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "web is down for maintenance") || h.Get("Retry-After") == "" {
		t.Errorf("in maintenance the edge answers %d %q (Retry-After %q)", code, body, h.Get("Retry-After"))
	}
	if st, err := e.rt.Status(ctx, e.tenant, e.name); err != nil || st.Release != 1 || len(st.Instances) != 0 {
		t.Errorf("in maintenance the runtime has release v%d with %d instances, %v; want v1 with none", st.Release, len(st.Instances), err)
	}

	// A push in maintenance is released with no instance.
	if v2 := e.deploy(t, e.a, e.commit(t, "second version", "")); v2 != 2 {
		t.Fatalf("the push in maintenance made v%d", v2)
	}
	if pids := e.rt.PIDs(e.tenant, e.name); len(pids) != 0 {
		t.Errorf("after a push in maintenance the runtime runs %v", pids)
	}
	if code, body, _ := ask(); code != http.StatusServiceUnavailable || !strings.Contains(body, "maintenance") {
		t.Errorf("after a push in maintenance the edge answers %d %q", code, body)
	}

	if n, err := e.a.Update(ctx, e.tenant, e.name, suspend(false)); err != nil || n != 2 {
		t.Fatalf("maintenance off: v%d, %v", n, err)
	}
	if code, body, _ := ask(); code != http.StatusOK || body != "second version" {
		t.Errorf("after maintenance the edge answers %d %q, want v2's answer", code, body)
	}
	if pids := e.rt.PIDs(e.tenant, e.name); len(pids) != 1 {
		t.Errorf("after maintenance the runtime runs %v, want one web process", pids)
	}
	if latest, err := e.st.LatestRelease(ctx, tenantID, e.name); err != nil || latest.Number != 2 {
		t.Errorf("after maintenance the latest release is v%d, %v; want v2 still", latest.Number, err)
	}
	if app := e.app(t); app.Spec.Suspended || app.Status.CurrentRelease != 2 {
		t.Errorf("after maintenance the App says suspended %v, release v%d", app.Spec.Suspended, app.Status.CurrentRelease)
	}

	// Maintenance set on the App by hand (kubectl): the App controller's
	// EnsureRunning stops the instances, and keeps the release.
	app := e.app(t)
	base := app.DeepCopy()
	app.Spec.Suspended = true
	if err := e.kube.Patch(ctx, app, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := e.a.EnsureRunning(ctx, e.app(t)); err != nil {
		t.Fatalf("EnsureRunning of a suspended app: %v", err)
	}
	if st, err := e.rt.Status(ctx, e.tenant, e.name); err != nil || st.Release != 2 || len(st.Instances) != 0 {
		t.Errorf("after EnsureRunning of a suspended app the runtime has v%d with %d instances, %v; want v2 with none", st.Release, len(st.Instances), err)
	}
	if err := e.a.EnsureRunning(ctx, e.app(t)); err != nil {
		t.Errorf("EnsureRunning of a suspended app that runs nothing: %v", err)
	}
}
