package app_test

import (
	"encoding/json"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestAppsSetCLI: bex apps set prints each setting that changed, from
// what to what, and when it applies; usage mistakes are refused before
// any request, the API's refusals name the field, and -o json prints the
// app.
func TestAppsSetCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "cliset")
	dir := t.TempDir()
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	if _, err := bex(t, dir, env, "", "apps", "create", "shop"); err != nil {
		t.Fatal(err)
	}
	e.Releaser.SetProcesses("web", "worker")
	for _, tc := range []cliCase{
		{name: "before any release", args: []string{"apps", "set", "shop", "web=2", "--plan", "standard"},
			want: "Changed shop:\n  Processes:    default -> web=2\n  Plan:         starter -> standard\nIt has no release yet: its first push runs with these settings.\n"},
		{name: "maintenance on", before: func(t *testing.T) {
			if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", Image: "r/cliset/shop@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git"}); err != nil {
				t.Fatal(err)
			}
			e.SetCurrentRelease(t, "cliset", "shop", 1)
		}, args: []string{"apps", "set", "shop", "--maintenance", "on"},
			want: "Changed shop:\n  Maintenance:  off -> on\nMaintenance mode is on: shop runs no instance and its URL answers 503 with a maintenance page; `bex apps set shop --maintenance off` brings release v1 back.\n"},
		{name: "the same again", args: []string{"apps", "set", "shop", "--maintenance", "on"},
			want: "Nothing changed: shop has these settings already.\n"},
		{name: "health check and branch", args: []string{"apps", "set", "shop", "--health-path", "/healthz", "--health-timeout", "3s", "--branch", "prod", "--maintenance", "off"},
			want: "Changed shop:\n  Health check: none -> GET /healthz every 10s, timeout 3s, healthy after 1, unhealthy after 3 in a row\n  Branch:       main -> prod\n  Maintenance:  on -> off\n" +
				"Maintenance mode is off: release v1 runs and serves again.\nThe branch applies from the next push.\n"},
		{name: "port and thresholds", args: []string{"apps", "set", "shop", "--health-port", "8081", "--health-success", "2", "--health-failure", "4"},
			want: "Changed shop:\n  Health check: GET /healthz every 10s, timeout 3s, healthy after 1, unhealthy after 3 in a row -> GET /healthz every 10s, timeout 3s, port 8081, healthy after 2, unhealthy after 4 in a row\nRelease v1 rolled: each new instance passed the new health check before it took traffic.\n"},
		{name: "json", args: []string{"apps", "set", "shop", "worker=1", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var a apiclient.App
			if err := json.Unmarshal(out, &a); err != nil || a.Processes["worker"] != 1 || a.Processes["web"] != 2 || a.Branch != "prod" || a.HealthCheck == nil || a.Maintenance {
				t.Errorf("apps set -o json = %s, %v", out, err)
			}
		}},
		{name: "remove the health check", args: []string{"apps", "set", "shop", "--no-health-check"},
			want: "Changed shop:\n  Health check: GET /healthz every 10s, timeout 3s, port 8081, healthy after 2, unhealthy after 4 in a row -> none\nRelease v1 rolled with no health check.\n"},
		{name: "nothing", args: []string{"apps", "set", "shop"}, wantErr: "nothing to change: give PROCESS=COUNT"},
		{name: "maintenance maybe", args: []string{"apps", "set", "shop", "--maintenance", "maybe"}, wantErr: `--maintenance "maybe": give on or off`},
		{name: "fraction of a second", args: []string{"apps", "set", "shop", "--health-timeout", "1500ms"}, wantErr: "--health-timeout 1.5s: give whole seconds"},
		{name: "threshold past 10", args: []string{"apps", "set", "shop", "--health-failure", "11"}, wantErr: "--health-failure 11: give 1 to 10"},
		{name: "remove and set", args: []string{"apps", "set", "shop", "--no-health-check", "--health-path", "/up"}, wantErr: "--no-health-check removes the health check"},
		{name: "timeout too long", args: []string{"apps", "set", "shop", "--health-path", "/up", "--health-timeout", "2m"}, wantErr: "1 to 60 (field healthCheck.timeoutSeconds)"},
		{name: "bad branch", args: []string{"apps", "set", "shop", "--branch", "a..b"}, wantErr: `branch "a..b" is not a branch name`},
		{name: "unknown process", args: []string{"apps", "set", "shop", "clock=1"}, wantErr: "process clock: release v1 of shop has web, worker (field processes)"},
		{name: "over the limit", args: []string{"apps", "set", "shop", "web=50"}, wantErr: "instancesPerProcess quota (20) is reached"},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, dir, env) })
	}
	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "cliset", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.Suspended || app.Spec.Plan != "standard" || app.Spec.Source.Branch != "prod" || app.Spec.HealthCheck != nil || len(app.Spec.Processes) != 2 {
		t.Errorf("after the refused changes the App's spec is %+v", app.Spec)
	}
}
