package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// instancesOf reads the app's instances through the API.
func instancesOf(t *testing.T, e *apitest.Env, token, app string) apiclient.Instances {
	t.Helper()
	a := call(t, e, http.MethodGet, "/apps/"+app+"/instances", token, nil)
	wantStatus(t, "listing instances of "+app, a, http.StatusOK)
	var is apiclient.Instances
	a.decode(t, &is)
	return is
}

// TestInstances: GET /apps/{app}/instances shows what the runtime runs of
// the app: each instance's process, release, state and uptime, and the
// restarts of a crashed one, counted as the runtime restarts it in place;
// an app that runs nothing has no instances and says why; another
// tenant's app is not found, and a tenant's app of the same name shows
// only its own.
func TestInstances(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	_, token := e.TenantToken(t, "psacme")
	_, other := e.TenantToken(t, "psother")
	createApp(t, e, token, "shop")

	is := instancesOf(t, e, token, "shop")
	if len(is.Instances) != 0 || is.Release != 0 || is.App != "shop" || is.Message != "shop has no release yet: push to its git remote" {
		t.Errorf("an app that runs nothing: %+v", is)
	}

	e.RunTestApp(t, "psacme", "shop", 1, "worker")
	is = instancesOf(t, e, token, "shop")
	if is.Release != 1 || !is.Ready || len(is.Instances) != 2 {
		t.Fatalf("instances of release 1: %+v", is)
	}
	web, worker := is.Instances[0], is.Instances[1]
	if web.Name != "web.0" || web.Process != "web" || web.State != apiclient.InstanceUp || web.Release != 1 || web.Restarts != 0 || web.ID == "" || web.Since.IsZero() {
		t.Errorf("web instance: %+v", web)
	}
	if worker.Name != "worker.0" || worker.Process != "worker" || worker.State != apiclient.InstanceUp || worker.Restarts != 0 {
		t.Errorf("worker instance: %+v", worker)
	}

	crashedAt := time.Now()
	e.CrashTestApp(t, "psacme", "shop")
	platformtest.Eventually(t, time.Minute, "the crashed web instance is up again, its restart counted", func(context.Context) error {
		is = instancesOf(t, e, token, "shop")
		if len(is.Instances) != 2 {
			return fmt.Errorf("instances %+v", is.Instances)
		}
		if w := is.Instances[0]; w.Restarts != 1 || w.State != apiclient.InstanceUp {
			return fmt.Errorf("web.0 is %s with %d restarts", w.State, w.Restarts)
		}
		return nil
	})
	if w := is.Instances[0]; w.ID != web.ID || w.Since.Before(crashedAt) {
		t.Errorf("after the crash web.0 is %+v: want the same ID %s, up since the restart (after %s)", w, web.ID, crashedAt)
	}
	if w := is.Instances[1]; w.ID != worker.ID || w.Restarts != 0 {
		t.Errorf("the worker, which did not crash: %+v", w)
	}

	// Another tenant neither reaches the app nor sees its instances under
	// an app of the same name.
	if a := call(t, e, http.MethodGet, "/apps/shop/instances", other, nil); a.status != http.StatusNotFound {
		t.Errorf("another tenant's app: %d %s, want 404", a.status, a.body)
	}
	createApp(t, e, other, "shop")
	if is := instancesOf(t, e, other, "shop"); len(is.Instances) != 0 {
		t.Errorf("another tenant's app of the same name shows instances %+v", is.Instances)
	}
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{"/apps/nope/instances", token, http.StatusNotFound},
		{"/apps/shop/instances", "", http.StatusUnauthorized},
		{"/apps/shop/instances", e.OperatorToken, http.StatusForbidden},
	} {
		if a := call(t, e, http.MethodGet, tc.path, tc.token, nil); a.status != tc.status {
			t.Errorf("GET %s: %d %s, want %d", tc.path, a.status, a.body, tc.status)
		}
	}
}

// TestReleaseInfo: GET /apps/{app}/releases/{release} shows one release in
// full: its build and commit, who and when, whether it serves or was
// pruned, its variables by name and what it changed from the one before;
// never a value. A release that does not exist, or is not a number, is
// not found, as is another tenant's.
func TestReleaseInfo(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "relinfo")
	_, other := e.TenantToken(t, "relother")
	createApp(t, e, token, "shop")
	const plain1, plain2 = "value-one-7f3a", "value-two-9c1b"
	secret := store.ConfigValue{SecretKeyRef: &store.SecretRef{Name: "shop-env", Key: "API_KEY"}}
	build := func(commit, image string) store.Build {
		b, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "shop", Commit: commit})
		if err != nil {
			t.Fatal(err)
		}
		if b, err = e.Store.FinishBuild(ctx, b.ID, store.BuildResult{Status: store.BuildSucceeded, Stack: "go", Image: image}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	b1, b2 := build("abc1234ffff", "r/relinfo/shop@sha256:1"), build("def5678eeee", "r/relinfo/shop@sha256:2")
	v1, v2 := plain1, plain2
	for _, nr := range []store.NewRelease{
		{BuildID: b1.ID, Image: b1.Image, Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git",
			Config: map[string]store.ConfigValue{"FOO": {Value: &v1}, "API_KEY": secret}},
		{BuildID: b2.ID, Image: b2.Image, Kind: store.ReleaseKindDeploy, Description: "Deploy def5678", CreatedBy: "dev@acme.test",
			Config: map[string]store.ConfigValue{"FOO": {Value: &v2}, "BAR": {Value: &v1}, "API_KEY": secret}},
	} {
		nr.TenantID, nr.App = tenant.ID, "shop"
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Store.CreateRollbackRelease(ctx, tenant.ID, "shop", 1, "token:test"); err != nil {
		t.Fatal(err)
	}
	e.SetCurrentRelease(t, "relinfo", "shop", 3)
	if _, err := e.Store.PruneReleases(ctx, tenant.ID, "shop", 2, 3); err != nil {
		t.Fatal(err)
	}

	info := func(ref string) apiclient.ReleaseInfo {
		t.Helper()
		a := call(t, e, http.MethodGet, "/apps/shop/releases/"+ref, token, nil)
		wantStatus(t, "release "+ref, a, http.StatusOK)
		for _, v := range []string{plain1, plain2} {
			if strings.Contains(string(a.body), v) {
				t.Errorf("release %s shows the value %q: %s", ref, v, a.body)
			}
		}
		var r apiclient.ReleaseInfo
		a.decode(t, &r)
		return r
	}
	names := func(env []apiclient.ReleaseEnvVar) []string {
		var out []string
		for _, v := range env {
			out = append(out, fmt.Sprintf("%s:%v", v.Name, v.Secret))
		}
		return out
	}

	r2 := info("2")
	if r2.Number != 2 || r2.Status != apiclient.ReleaseSuperseded || r2.Current || r2.Build != 2 || r2.Commit != "def5678eeee" || r2.Stack != "go" ||
		r2.CreatedBy != "dev@acme.test" || r2.Description != "Deploy def5678" || r2.Image != b2.Image || r2.CreatedAt.IsZero() {
		t.Errorf("release 2: %+v", r2)
	}
	if got := names(r2.Env); !slices.Equal(got, []string{"API_KEY:true", "BAR:false", "FOO:false"}) {
		t.Errorf("release 2 env %v", got)
	}
	if c := r2.Changes; c.Previous != 1 || !c.Image || !slices.Equal(c.Added, []string{"BAR"}) || !slices.Equal(c.Changed, []string{"FOO"}) || len(c.Removed) != 0 {
		t.Errorf("release 2 changes %+v: want a new image, BAR added, FOO changed", c)
	}

	r3 := info("v3")
	if r3.Status != apiclient.ReleaseCurrent || !r3.Current || r3.Description != "Rollback to v1" || r3.Build != 1 || r3.Commit != "abc1234ffff" || r3.Image != b1.Image {
		t.Errorf("release 3: %+v", r3)
	}
	if c := r3.Changes; c.Previous != 2 || !c.Image || len(c.Added) != 0 || !slices.Equal(c.Changed, []string{"FOO"}) || !slices.Equal(c.Removed, []string{"BAR"}) {
		t.Errorf("release 3 changes %+v: want v1's image again, FOO changed back, BAR removed", c)
	}

	r1 := info("1")
	if r1.Status != apiclient.ReleasePruned || r1.PrunedAt == nil {
		t.Errorf("release 1: %+v, want pruned", r1)
	}
	if c := r1.Changes; c.Previous != 0 || !c.Image || !slices.Equal(c.Added, []string{"API_KEY", "FOO"}) {
		t.Errorf("release 1 changes %+v: want its variables added", c)
	}

	for _, tc := range []struct {
		path, token, message string
	}{
		{"/apps/shop/releases/9", token, `app "shop" has no release v9: bex releases shop lists them`},
		{"/apps/shop/releases/latest", token, `release "latest" of app "shop" not found: give its number, such as 3`},
		{"/apps/shop/releases/0", token, `release "0" of app "shop" not found`},
		{"/apps/shop/releases/1", other, `app "shop" not found`},
	} {
		a := call(t, e, http.MethodGet, tc.path, tc.token, nil)
		if a.status != http.StatusNotFound || !strings.Contains(a.err().Message, tc.message) {
			t.Errorf("GET %s: %d %s, want 404 saying %q", tc.path, a.status, a.body, tc.message)
		}
	}
}

// TestInstancesRuns: GET /apps/{app}/instances lists the app's one-off
// runs that run after its instances (runs: [] when none), oldest first, as
// run.N with its command, release, who started it, since when, attached
// or detached, and stopping with who asked once a stop was asked; a run
// that ended, one lost and another app's are not listed.
func TestInstancesRuns(t *testing.T) {
	e, tenant, token, c := runsEnv(t, "psruns")
	ctx := t.Context()
	if a := call(t, e, http.MethodGet, "/apps/web/instances", token, nil); a.status != http.StatusOK || !strings.Contains(string(a.body), `"runs":[]`) {
		t.Fatalf("instances of an app that runs no run: %d %s; want runs: []", a.status, a.body)
	}

	// An ended run, a lost one (its server last seen an hour ago) and
	// another app's running one: none is listed.
	if exit, _, _, err := runOf(t, c, "web", apiclient.RunRequest{Command: []string{"true"}}, nil); err != nil || exit.ExitCode != 0 {
		t.Fatalf("a run of true: %+v, %v", exit, err)
	}
	dead := uuid.NewString()
	lost, err := e.Store.CreateRun(ctx, store.NewRun{TenantID: tenant.ID, App: "web", Release: 3, Command: []string{"sleep", "600"}, CreatedBy: "a@psruns.test", ServerID: dead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Pool().Exec(ctx, "UPDATE run_servers SET last_seen = now() - interval '1 hour' WHERE id = $1", dead); err != nil {
		t.Fatal(err)
	}
	if swept, err := e.Store.MarkLostRuns(ctx, 10*time.Minute); err != nil || len(swept) != 1 || swept[0].ID != lost.ID {
		t.Fatalf("marking run.%d lost: %+v, %v", lost.Number, swept, err)
	}
	createApp(t, e, token, "api")
	if _, err := e.Store.CreateRun(ctx, store.NewRun{TenantID: tenant.ID, App: "api", Release: 1, Command: []string{"sleep", "600"}, CreatedBy: "a@psruns.test"}); err != nil {
		t.Fatal(err)
	}

	detached, _ := runPID(t, c, "web")
	attached, done := runAttached(t, c, "web")
	// A run recorded by a server that does not run it here (another
	// replica's): a stop asked of it stays asked.
	held, err := e.Store.CreateRun(ctx, store.NewRun{TenantID: tenant.ID, App: "web", Release: 3, Command: []string{"rake", "db:migrate"}, CreatedBy: "a@psruns.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StopRun(ctx, "web", held.Number); err != nil {
		t.Fatal(err)
	}

	records := map[int]apiclient.Run{}
	for _, r := range listRuns(t, c, "web") {
		records[r.Number] = r
	}
	is := instancesOf(t, e, token, "web")
	var names []string
	for _, r := range is.Runs {
		names = append(names, r.Name)
	}
	want := []string{fmt.Sprintf("run.%d", detached.Number), fmt.Sprintf("run.%d", attached), fmt.Sprintf("run.%d", held.Number)}
	if !slices.Equal(names, want) {
		t.Fatalf("runs in the instances: %q, want %q (neither the ended run.1, the lost run.%d nor api's)", names, want, lost.Number)
	}
	for i, tc := range []struct {
		number             int
		detached           bool
		by, state, stopper string
	}{
		{detached.Number, true, "token:test", apiclient.RunUp, ""},
		{attached, false, "token:test", apiclient.RunUp, ""},
		{held.Number, false, "a@psruns.test", apiclient.RunStopping, "token:test"},
	} {
		r, rec := is.Runs[i], records[tc.number]
		if r.Number != tc.number || r.Release != 3 || !slices.Equal(r.Command, rec.Command) || r.CreatedBy != tc.by || r.Detached != tc.detached ||
			r.State != tc.state || r.StopRequestedBy != tc.stopper || (r.StopRequestedAt == nil) != (tc.stopper == "") || !r.Since.Equal(rec.StartedAt) {
			t.Errorf("%s in the instances: %+v; want by %s, detached %t, %s (stop asked by %q), since %s", r.Name, r, tc.by, tc.detached, tc.state, tc.stopper, rec.StartedAt)
		}
	}

	// Ended, a run leaves the list.
	if _, err := c.StopRun(ctx, "web", detached.Number); err != nil {
		t.Fatal(err)
	}
	waitRunEnded(t, c, "web", detached.Number)
	if _, err := c.StopRun(ctx, "web", attached); err != nil {
		t.Fatal(err)
	}
	done()
	waitRunEnded(t, c, "web", attached)
	if is := instancesOf(t, e, token, "web"); len(is.Runs) != 1 || is.Runs[0].Number != held.Number {
		t.Errorf("runs in the instances once two ended: %+v; want run.%d alone", is.Runs, held.Number)
	}
}

// TestInstancesRuntimeDown: when the runtime does not answer,
// GET /apps/{app}/instances still answers the app's runs, which come from
// the store, with a 200 whose instancesError says the instances could not
// be read and why; a runtime that answers gives no instancesError.
func TestInstancesRuntimeDown(t *testing.T) {
	e, tenant, token, _ := runsEnv(t, "psdown")
	ctx := t.Context()
	held, err := e.Store.CreateRun(ctx, store.NewRun{TenantID: tenant.ID, App: "web", Release: 3, Command: []string{"rake", "db:migrate"}, CreatedBy: "a@psdown.test"})
	if err != nil {
		t.Fatal(err)
	}
	down := e.AnotherServerWith(t, func(o *api.Options) { o.Instances = api.RuntimeInstances{Driver: apitest.UnreachableRuntime(t)} })
	a := callAt(t, down, http.MethodGet, "/apps/web/instances", token, nil)
	wantStatus(t, "instances while the runtime does not answer", a, http.StatusOK)
	var is apiclient.Instances
	a.decode(t, &is)
	const why = `the runtime that runs app "web" does not answer now: try again in a moment`
	if is.InstancesError != why || is.Message != "the instances could not be read: "+why || is.App != "web" || is.Release != 0 || is.Ready || !strings.Contains(string(a.body), `"instances":[]`) {
		t.Errorf("instances while the runtime does not answer: %s", a.body)
	}
	if len(is.Runs) != 1 || is.Runs[0].Number != held.Number || is.Runs[0].Name != fmt.Sprintf("run.%d", held.Number) || is.Runs[0].CreatedBy != "a@psdown.test" || is.Runs[0].State != apiclient.RunUp {
		t.Errorf("runs while the runtime does not answer: %+v, want run.%d up", is.Runs, held.Number)
	}

	a = call(t, e, http.MethodGet, "/apps/web/instances", token, nil)
	wantStatus(t, "instances from a runtime that answers", a, http.StatusOK)
	if strings.Contains(string(a.body), "instancesError") || !strings.Contains(string(a.body), fmt.Sprintf(`"name":"run.%d"`, held.Number)) {
		t.Errorf("instances from a runtime that answers: %s", a.body)
	}
}
