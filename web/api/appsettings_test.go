package api_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// appSpec reads the App's spec.
func appSpec(t *testing.T, e *apitest.Env, tenant, name string) platformv1alpha1.AppSpec {
	t.Helper()
	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(t.Context(), client.ObjectKey{Namespace: tenant, Name: name}, app); err != nil {
		t.Fatal(err)
	}
	return app.Spec
}

// TestAppSettings: PATCH /apps/{app} checks every field before it writes
// anything (each bad one a 422 naming it, counts over the limit a 403, a
// viewer a 403, none of them changing the spec or the audit log), then
// stores the health check, counts, plan, branch and maintenance mode in
// the App's spec, answers the app as GET does, and audits app.update with
// the names of what changed.
func TestAppSettings(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "settings")
	createApp(t, e, token, "web")
	e.Releaser.SetProcesses("web", "worker")
	viewer := e.Member(t, token, "vic@settings.test", "viewer")

	// Without a release the settings are only stored.
	a := call(t, e, http.MethodPatch, "/apps/web", token, map[string]any{"processes": map[string]int{"web": 2}, "maintenance": true})
	wantStatus(t, "setting an app without a release", a, http.StatusOK)
	var got apiclient.App
	a.decode(t, &got)
	if !got.Maintenance || got.Processes["web"] != 2 || got.Plan != "starter" || got.Branch != "main" {
		t.Errorf("answer = %+v, want maintenance, web 2, starter, main", got)
	}
	if spec := appSpec(t, e, "settings", "web"); !spec.Suspended || len(spec.Processes) != 1 || *spec.Processes[0].Replicas != 2 {
		t.Errorf("the App's spec: %+v", spec)
	}

	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "web", Image: "r/settings/web@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git"}); err != nil {
		t.Fatal(err)
	}
	e.SetCurrentRelease(t, "settings", "web", 1)
	auditBefore := countRows(t, e, "audit_log")
	specBefore := appSpec(t, e, "settings", "web")
	for _, tc := range []struct {
		name   string
		body   any
		status int
		field  string
		want   string
	}{
		{"nothing", map[string]any{}, 422, "", "nothing to change"},
		{"unknown setting", map[string]any{"plan": "pro", "colour": "red"}, 422, "colour", `unknown setting "colour": the settings are healthCheck, processes, plan, branch, maintenance`},
		{"unknown health field", map[string]any{"healthCheck": map[string]any{"path": "/up", "method": "POST"}}, 422, "healthCheck.method", `unknown health-check field "method"`},
		{"empty health check", map[string]any{"healthCheck": map[string]any{}}, 422, "healthCheck", "healthCheck is empty"},
		{"health check not an object", map[string]any{"healthCheck": "/up"}, 422, "healthCheck", "healthCheck is an object"},
		{"relative path", map[string]any{"healthCheck": map[string]any{"path": "healthz"}}, 422, "healthCheck.path", "starting with '/'"},
		{"path with a space", map[string]any{"healthCheck": map[string]any{"path": "/a b"}}, 422, "healthCheck.path", "without spaces"},
		{"long path", map[string]any{"healthCheck": map[string]any{"path": "/" + strings.Repeat("a", 1024)}}, 422, "healthCheck.path", "at most 1024 bytes"},
		{"no path", map[string]any{"healthCheck": map[string]any{"timeoutSeconds": 5}}, 422, "healthCheck.path", "app web has no health check yet: give its path"},
		{"timeout 0", map[string]any{"healthCheck": map[string]any{"path": "/up", "timeoutSeconds": 0}}, 422, "healthCheck.timeoutSeconds", "1 to 60"},
		{"timeout 61", map[string]any{"healthCheck": map[string]any{"path": "/up", "timeoutSeconds": 61}}, 422, "healthCheck.timeoutSeconds", "1 to 60"},
		{"timeout as a duration", map[string]any{"healthCheck": map[string]any{"path": "/up", "timeoutSeconds": "5s"}}, 422, "healthCheck.timeoutSeconds", "whole number"},
		{"interval", map[string]any{"healthCheck": map[string]any{"path": "/up", "intervalSeconds": 301}}, 422, "healthCheck.intervalSeconds", "1 to 300"},
		{"port", map[string]any{"healthCheck": map[string]any{"path": "/up", "port": 70000}}, 422, "healthCheck.port", "0 to 65535"},
		{"failure threshold", map[string]any{"healthCheck": map[string]any{"path": "/up", "failureThreshold": 11}}, 422, "healthCheck.failureThreshold", "1 to 10"},
		{"negative count", map[string]any{"processes": map[string]any{"web": -1}}, 422, "processes", "web=-1: the count of instances is 0 or more"},
		{"processes not an object", map[string]any{"processes": 2}, 422, "processes", "processes is an object"},
		{"unknown process", map[string]any{"processes": map[string]any{"clock": 1}}, 422, "processes", "process clock: release v1 of web has web, worker"},
		{"unknown plan", map[string]any{"plan": "huge"}, 422, "plan", `plan "huge": the plans are starter, standard, pro`},
		{"plan not a string", map[string]any{"plan": 3}, 422, "plan", "the plans are"},
		{"branch with ..", map[string]any{"branch": "a..b"}, 422, "branch", `branch "a..b" is not a branch name`},
		{"branch starting with -", map[string]any{"branch": "-x"}, 422, "branch", "is not a branch name"},
		{"branch .lock", map[string]any{"branch": "x.lock"}, 422, "branch", "is not a branch name"},
		{"long branch", map[string]any{"branch": strings.Repeat("b", 256)}, 422, "branch", "at most 255"},
		{"maintenance yes", map[string]any{"maintenance": "yes"}, 422, "maintenance", "maintenance is true (on) or false (off)"},
		{"a bad field after good ones", map[string]any{"plan": "pro", "maintenance": false, "branch": "a b"}, 422, "branch", "is not a branch name"},
		{"over the limit", map[string]any{"plan": "pro", "processes": map[string]any{"web": 21}}, 403, "", "the tenant's instancesPerProcess quota (20) is reached: web=21"},
	} {
		a := call(t, e, http.MethodPatch, "/apps/web", token, tc.body)
		if a.status != tc.status || a.err().Field != tc.field || !strings.Contains(a.err().Message, tc.want) {
			t.Errorf("%s: %d %s, want %d on %q saying %q", tc.name, a.status, a.body, tc.status, tc.field, tc.want)
		}
	}
	a = call(t, e, http.MethodPatch, "/apps/web", viewer, map[string]any{"maintenance": false})
	if a.status != http.StatusForbidden || a.err().Role != "developer" {
		t.Errorf("a viewer's PATCH: %d %s, want 403 naming the developer role", a.status, a.body)
	}
	if spec := appSpec(t, e, "settings", "web"); !reflect.DeepEqual(spec, specBefore) {
		t.Errorf("refused changes changed the spec: %+v, want %+v", spec, specBefore)
	}
	if n := countRows(t, e, "audit_log"); n != auditBefore {
		t.Errorf("audit_log has %d rows after refused changes, want %d", n, auditBefore)
	}

	// Everything at once.
	off := false
	a = call(t, e, http.MethodPatch, "/apps/web", token, apiclient.UpdateAppRequest{
		HealthCheck: &apiclient.HealthCheck{Path: "/healthz", TimeoutSeconds: 3},
		Processes:   map[string]int{"web": 3, "worker": 1}, Plan: "standard", Branch: "release/2026", Maintenance: &off,
	})
	wantStatus(t, "changing every setting", a, http.StatusOK)
	a.decode(t, &got)
	wantHC := &apiclient.HealthCheck{Path: "/healthz", TimeoutSeconds: 3, IntervalSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	if got.Maintenance || !reflect.DeepEqual(got.Processes, map[string]int{"web": 3, "worker": 1}) || got.Plan != "standard" ||
		got.Branch != "release/2026" || !reflect.DeepEqual(got.HealthCheck, wantHC) || got.CurrentRelease != 1 {
		t.Errorf("answer = %+v (health check %+v)", got, got.HealthCheck)
	}
	var get apiclient.App
	call(t, e, http.MethodGet, "/apps/web", token, nil).decode(t, &get)
	if !reflect.DeepEqual(get, got) {
		t.Errorf("GET answers %+v, PATCH %+v", get, got)
	}
	spec := appSpec(t, e, "settings", "web")
	if spec.Suspended || spec.Plan != "standard" || spec.Source.Branch != "release/2026" || spec.HealthCheck == nil || spec.HealthCheck.Path != "/healthz" || spec.HealthCheck.TimeoutSeconds != 3 {
		t.Errorf("the App's spec: %+v", spec)
	}

	// The health check changes field by field, and null removes it.
	a = call(t, e, http.MethodPatch, "/apps/web", token, map[string]any{"healthCheck": map[string]any{"timeoutSeconds": 7, "port": 9000}})
	wantStatus(t, "changing the health check's timeout", a, http.StatusOK)
	a.decode(t, &got)
	if hc := got.HealthCheck; hc == nil || hc.Path != "/healthz" || hc.TimeoutSeconds != 7 || hc.Port != 9000 {
		t.Errorf("health check after a timeout change: %+v", hc)
	}
	a = call(t, e, http.MethodPatch, "/apps/web", token, map[string]any{"healthCheck": nil})
	wantStatus(t, "removing the health check", a, http.StatusOK)
	if spec := appSpec(t, e, "settings", "web"); spec.HealthCheck != nil {
		t.Errorf("health check after null: %+v", spec.HealthCheck)
	}
	// The same value again changes nothing and is not audited.
	a = call(t, e, http.MethodPatch, "/apps/web", token, map[string]any{"plan": "standard"})
	wantStatus(t, "the same plan again", a, http.StatusOK)

	var updates []string
	for _, en := range auditActions(t, e, tenant.ID) {
		if en.Action == "app.update" {
			updates = append(updates, string(en.Details))
		}
	}
	if len(updates) != 4 || !strings.Contains(updates[0], `"changed": ["processes", "maintenance"]`) ||
		!strings.Contains(updates[1], `"changed": ["healthCheck", "processes", "plan", "branch", "maintenance"]`) || !strings.Contains(updates[1], `"release": 1`) ||
		!strings.Contains(updates[3], `"changed": ["healthCheck"]`) {
		t.Errorf("app.update audit entries = %q", updates)
	}

	// In maintenance mode a restart has nothing to restart.
	on := true
	wantStatus(t, "maintenance on", call(t, e, http.MethodPatch, "/apps/web", token, apiclient.UpdateAppRequest{Maintenance: &on}), http.StatusOK)
	a = call(t, e, http.MethodPost, "/apps/web/restart", token, apiclient.RestartRequest{})
	if a.status != http.StatusConflict || !strings.Contains(a.err().Message, "maintenance mode") {
		t.Errorf("a restart in maintenance: %d %s, want 409 saying why", a.status, a.body)
	}
	var app apiclient.App
	call(t, e, http.MethodGet, "/apps/web", viewer, nil).decode(t, &app)
	if !app.Maintenance {
		t.Errorf("a viewer reads %+v, want maintenance", app)
	}
}
