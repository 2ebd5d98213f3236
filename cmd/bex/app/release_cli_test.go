package app_test

import (
	"encoding/json"
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestConfigReleaseAndRestartCLI: bex env set and unset release the change
// and say which release runs it, the release list names what changed and
// never a secret's value, --no-release only stores; bex restart says what
// it restarted, and refuses with what to do an app without a release or a
// process it does not run.
func TestConfigReleaseAndRestartCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "clirel")
	dir := t.TempDir()
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	if _, err := bex(t, dir, env, "", "apps", "create", "shop"); err != nil {
		t.Fatal(err)
	}
	e.Releaser.SetProcesses("web", "worker")

	for _, tc := range []cliCase{
		{name: "env set before any release", args: []string{"env", "set", "shop", "FOO=1"}, want: "" +
			"Stored: shop has no release yet; its first push runs with it.\n" +
			"NAME  VALUE\n" +
			"FOO   1\n"},
		{name: "restart without a release", args: []string{"restart", "shop"}, wantErr: `app "shop" has no release to restart yet: push to its git remote first`},
		{name: "env set releases", before: func(t *testing.T) {
			if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", Image: "r/clirel/shop@sha256:1", Description: "Deploy abc1234", CreatedBy: "git"}); err != nil {
				t.Fatal(err)
			}
			app := &platformv1alpha1.App{}
			if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "clirel", Name: "shop"}, app); err != nil {
				t.Fatal(err)
			}
			app.Status.CurrentRelease = 1
			if err := e.Kube.Status().Update(ctx, app); err != nil {
				t.Fatal(err)
			}
		}, args: []string{"env", "set", "shop", "FOO=2", "BAR=3"}, want: "" +
			"Released shop v2 with the new environment.\n" +
			"NAME  VALUE\n" +
			"BAR   3\n" +
			"FOO   2\n"},
		{name: "env set secret releases", args: []string{"env", "set", "shop", "API_KEY=hunter2", "--secret"},
			match: `^Released shop v3 with the new environment\.\n(?s:.*)API_KEY  \(secret\)\n`, absent: "hunter2"},
		{name: "env unset releases json", args: []string{"env", "unset", "shop", "BAR", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var vs []apiclient.EnvVar
			if err := json.Unmarshal(out, &vs); err != nil || len(vs) != 2 || vs[0].Name != "API_KEY" || vs[1].Name != "FOO" {
				t.Errorf("env = %s, %v", out, err)
			}
		}},
		{name: "env set no release", args: []string{"env", "set", "shop", "LATER=1", "--no-release"},
			match: `^Stored without a release: the change goes out with the next release of shop\.\n`},
		{name: "releases say what changed", args: []string{"releases", "shop"}, absent: "hunter2",
			match: `^RELEASE  DESCRIPTION +BY +CREATED\n\*v4 +Unset BAR +token:test .*\nv3 +Set API_KEY +token:test .*\nv2 +Set BAR, FOO +token:test .*\nv1 +Deploy abc1234 +git .*\n$`},

		{name: "restart", args: []string{"restart", "shop"}, want: "Restarted web, worker of shop: new instances of release v4.\n"},
		{name: "restart a process json", args: []string{"restart", "shop", "worker", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var r apiclient.Restart
			if err := json.Unmarshal(out, &r); err != nil || r.Release != 4 || len(r.Processes) != 1 || r.Processes[0] != "worker" {
				t.Errorf("restart = %s, %v", out, err)
			}
		}},
		{name: "restart a process it does not run", args: []string{"restart", "shop", "clock"}, wantErr: `invalid process "clock": release v4 of shop has web, worker (field process)`},
		{name: "env set whose release fails", before: func(t *testing.T) {
			e.Releaser.FailRollouts(errors.New("web.0 exited during start-up: exit status 1"))
			t.Cleanup(func() { e.Releaser.FailRollouts(nil) })
		}, args: []string{"env", "set", "shop", "BROKEN=1"},
			wantErr: "the new environment of shop is stored, but release v5 did not go out, v4 keeps serving: web.0 exited during start-up: exit status 1"},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, dir, env) })
	}
}
