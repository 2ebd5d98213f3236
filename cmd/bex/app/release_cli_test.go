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
			if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", Image: "r/clirel/shop@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git"}); err != nil {
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
			match: `^RELEASE  KIND +STATUS +DESCRIPTION +BY +CREATED\n\*v4 +config +\S+ +Unset BAR +token:test .*\nv3 +config +\S+ +Set API_KEY +token:test .*\nv2 +config +\S+ +Set BAR, FOO +token:test .*\nv1 +deploy +\S+ +Deploy abc1234 +git .*\n$`},
		{name: "releases a page", args: []string{"releases", "shop", "-n", "2"},
			match: `^RELEASE  KIND +STATUS +DESCRIPTION +BY +CREATED\n\*v4 +config .*\nv3 +config .*\nOlder releases: bex releases shop --before v3\n$`},
		{name: "releases the next page", args: []string{"releases", "shop", "--before", "v3", "--limit", "2"},
			match: `^RELEASE  KIND +STATUS +DESCRIPTION +BY +CREATED\nv2 +config .*\nv1 +deploy .*\n$`},
		{name: "releases before what is no release", args: []string{"releases", "shop", "--before", "latest"},
			wantErr: `--before "latest": give a release number, such as v51 (the last one a page listed)`},
		{name: "releases limit out of range", args: []string{"releases", "shop", "-n", "1001"}, wantErr: "--limit 1001: give 1 to 1000"},

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

// TestReleasesByStatusCLI: bex releases --status lists the releases that
// went out or those that failed, with --kind and --before as without it,
// in a table whose next-page command keeps the filters and in -o json as
// the whole list has them; a status bex does not know is refused before
// the API is asked.
func TestReleasesByStatusCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "clirelstatus")
	dir := t.TempDir()
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	if _, err := bex(t, dir, env, "", "apps", "create", "shop"); err != nil {
		t.Fatal(err)
	}
	for _, nr := range []store.NewRelease{
		{Kind: store.ReleaseKindDeploy, Description: "Deploy 0000001"},
		{Kind: store.ReleaseKindDeploy, Description: "Deploy 0000002", Failure: "web.0 exited during start-up: exit status 1"},
		{Kind: store.ReleaseKindConfig, Description: "Set FOO"},
		{Kind: store.ReleaseKindConfig, Description: "Set BAR", Failure: "web.0 never became healthy"},
		{Kind: store.ReleaseKindDeploy, Description: "Deploy 0000005"},
	} {
		nr.TenantID, nr.App, nr.Image, nr.CreatedBy = tenant.ID, "shop", "r/clirelstatus/shop@sha256:1", "git"
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	e.SetCurrentRelease(t, tenant.Name, "shop", 5)
	wantNumbers := func(want ...int) func(t *testing.T, out []byte) {
		return func(t *testing.T, out []byte) {
			var rs []apiclient.Release
			if err := json.Unmarshal(out, &rs); err != nil || len(rs) != len(want) {
				t.Fatalf("releases -o json = %s, %v, want releases %v", out, err, want)
			}
			for i, r := range rs {
				if r.Number != want[i] {
					t.Errorf("releases -o json [%d] = v%d, want v%d", i, r.Number, want[i])
				}
			}
		}
	}
	for _, tc := range []cliCase{
		{name: "failed", args: []string{"releases", "shop", "--status", "failed"},
			match: `^RELEASE  KIND +STATUS +DESCRIPTION +BY +CREATED\nv4 +config +failed +Set BAR +git .*\nv2 +deploy +failed +Deploy 0000002 +git .*\n$`},
		{name: "succeeded", args: []string{"releases", "shop", "--status", "succeeded"},
			match: `^RELEASE  KIND +STATUS +DESCRIPTION +BY +CREATED\n\*v5 +deploy +current .*\nv3 +config +superseded .*\nv1 +deploy +superseded .*\n$`},
		{name: "both, repeated", args: []string{"releases", "shop", "--status", "failed", "--status", "succeeded", "-o", "json"}, json: wantNumbers(5, 4, 3, 2, 1)},
		{name: "failed json", args: []string{"releases", "shop", "--status", "failed", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var rs []map[string]any
			if err := json.Unmarshal(out, &rs); err != nil || len(rs) != 2 {
				t.Fatalf("releases --status failed -o json = %s, %v", out, err)
			}
			if rs[0]["number"] != 4.0 || rs[0]["kind"] != "config" || rs[0]["status"] != "failed" || rs[0]["failure"] != "web.0 never became healthy" || rs[0]["current"] != false {
				t.Errorf("releases --status failed -o json, v4 = %v, want the release's fields as without --status", rs[0])
			}
		}},
		{name: "with a kind", args: []string{"releases", "shop", "--status", "succeeded", "--kind", "config", "-o", "json"}, json: wantNumbers(3)},
		{name: "a page", args: []string{"releases", "shop", "--status", "failed", "-n", "1"},
			match: `^RELEASE  KIND +STATUS +DESCRIPTION +BY +CREATED\nv4 +config +failed .*\nOlder releases: bex releases shop --status failed --before v4\n$`},
		{name: "a page of a kind", args: []string{"releases", "shop", "--kind", "deploy", "--status", "succeeded", "-n", "1"},
			match: `\nOlder releases: bex releases shop --kind deploy --status succeeded --before v5\n$`},
		{name: "the next page", args: []string{"releases", "shop", "--status", "failed", "--before", "v4", "-o", "json"}, json: wantNumbers(2)},
		{name: "none of a status and a kind", args: []string{"releases", "shop", "--status", "failed", "--kind", "rollback"},
			want: "No failed rollback releases of shop\n"},
		{name: "a status bex does not know", args: []string{"releases", "shop", "--status", "superseded"},
			wantErr: `--status "superseded": give succeeded or failed; comma-separated or repeated`},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, dir, env) })
	}
}

// TestScaleCLI: bex scale says what runs now, or that an app without a
// release only stored the counts; it refuses, changing nothing, what is
// not a count, a process the release does not run and a count over the
// limit, naming the quota.
func TestScaleCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "cliscale")
	dir := t.TempDir()
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	if _, err := bex(t, dir, env, "", "apps", "create", "shop"); err != nil {
		t.Fatal(err)
	}
	e.Releaser.SetProcesses("web", "worker")
	for _, tc := range []cliCase{
		{name: "before any release", args: []string{"scale", "shop", "web=2"},
			want: "Stored: shop has no release yet; its first push runs web=2 on plan starter.\n"},
		{name: "scale", before: func(t *testing.T) {
			if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", Image: "r/cliscale/shop@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git"}); err != nil {
				t.Fatal(err)
			}
			app := &platformv1alpha1.App{}
			if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "cliscale", Name: "shop"}, app); err != nil {
				t.Fatal(err)
			}
			app.Status.CurrentRelease = 1
			if err := e.Kube.Status().Update(ctx, app); err != nil {
				t.Fatal(err)
			}
		}, args: []string{"scale", "shop", "web=3", "worker=1", "--plan", "standard"},
			want: "Scaled shop to web=3 worker=1 on plan standard: release v1 runs it now.\n"},
		{name: "scale json", args: []string{"scale", "shop", "worker=0", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var r apiclient.Scale
			if err := json.Unmarshal(out, &r); err != nil || r.Release != 1 || r.Processes["web"] != 3 || r.Processes["worker"] != 0 || r.Plan != "standard" {
				t.Errorf("scale = %s, %v", out, err)
			}
		}},
		{name: "not a count", args: []string{"scale", "shop", "web=many"}, wantErr: `"web=many": the count of instances is a whole number, such as web=2`},
		{name: "nothing", args: []string{"scale", "shop"}, wantErr: "nothing to scale: give PROCESS=COUNT (web=2), --plan, or both"},
		{name: "negative", args: []string{"scale", "shop", "web=-1"}, wantErr: "web=-1: the count of instances is 0 or more (0 stops the process) (field processes)"},
		{name: "unknown process", args: []string{"scale", "shop", "clock=1"}, wantErr: "process clock: release v1 of shop has web, worker (field processes)"},
		{name: "over the limit", args: []string{"scale", "shop", "web=50"}, wantErr: "not allowed: the tenant's instancesPerProcess quota (20) is reached: web=50 asks for more instances of one process than any plan runs; ask for 20 or fewer"},
		{name: "unknown plan", args: []string{"scale", "shop", "--plan", "huge"}, wantErr: `plan "huge": the plans are starter, standard, pro (field plan)`},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, dir, env) })
	}
	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "cliscale", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	got := map[string]int32{}
	for _, p := range app.Spec.Processes {
		got[p.Name] = *p.Replicas
	}
	if app.Spec.Plan != "standard" || got["web"] != 3 || got["worker"] != 0 {
		t.Errorf("after the refused scales the App has plan %q, %v; want standard, web 3, worker 0", app.Spec.Plan, got)
	}
}
