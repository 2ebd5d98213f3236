package api_test

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// releaseDescriptions lists the app's releases as "v<N> <description>",
// newest first, through the API.
func releaseDescriptions(t *testing.T, e *apitest.Env, token, app string) []string {
	t.Helper()
	a := call(t, e, http.MethodGet, "/apps/"+app+"/releases", token, nil)
	wantStatus(t, "listing releases", a, http.StatusOK)
	var rs []apiclient.Release
	a.decode(t, &rs)
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, "v"+strconv.Itoa(r.Number)+" "+r.Description)
	}
	return out
}

// TestConfigReleases: a change of the env of an app with a release makes a
// new release that says which names changed, never a secret's value, and
// the answer names it; without a release, or with noRelease, the change is
// only stored; a release that fails answers 409 with why, and the change
// stays stored.
func TestConfigReleases(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "cfgrel")
	createApp(t, e, token, "web")

	// No release yet: stored, nothing released.
	a := call(t, e, http.MethodPatch, "/apps/web/env", token, apiclient.PatchEnvRequest{Set: map[string]string{"FOO": "1"}})
	wantStatus(t, "setting env before any release", a, http.StatusOK)
	if h := a.header.Get(apiclient.ReleaseHeader); h != "" {
		t.Errorf("an app without a release: %s %q, want none", apiclient.ReleaseHeader, h)
	}
	if got := releaseDescriptions(t, e, token, "web"); len(got) != 0 {
		t.Errorf("releases after setting env of an app without one: %q", got)
	}

	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "web", Image: "r/cfgrel/web@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git"}); err != nil {
		t.Fatal(err)
	}
	e.SetCurrentRelease(t, "cfgrel", "web", 1)
	const secretValue = "postgres://u:hunter2@db/x"
	for _, tc := range []struct {
		req  apiclient.PatchEnvRequest
		want string
	}{
		{apiclient.PatchEnvRequest{Set: map[string]string{"FOO": "2", "BAR": "x"}}, "v2 Set BAR, FOO"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"DATABASE_URL": secretValue}, Secret: true}, "v3 Set DATABASE_URL"},
		{apiclient.PatchEnvRequest{Unset: []string{"FOO"}}, "v4 Unset FOO"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"A": "1"}, Unset: []string{"BAR"}}, "v5 Set A; unset BAR"},
	} {
		a := call(t, e, http.MethodPatch, "/apps/web/env", token, tc.req)
		wantStatus(t, "changing env", a, http.StatusOK)
		if got := a.header.Get(apiclient.ReleaseHeader); got != strings.Fields(tc.want)[0][1:] {
			t.Errorf("%+v: %s %q, want the new release %s", tc.req, apiclient.ReleaseHeader, got, strings.Fields(tc.want)[0])
		}
		if got := releaseDescriptions(t, e, token, "web"); len(got) == 0 || got[0] != tc.want {
			t.Errorf("%+v: releases %q, want %q first", tc.req, got, tc.want)
		}
	}
	list := call(t, e, http.MethodGet, "/apps/web/releases", token, nil)
	if strings.Contains(string(list.body), "hunter2") {
		t.Errorf("the release list shows a secret's value: %s", list.body)
	}
	if calls := e.Releaser.ConfigReleases(); len(calls) != 5 || calls[2] != (apitest.ConfigRelease{Tenant: "cfgrel", App: "web", Description: "Set DATABASE_URL", Actor: "token:test"}) {
		t.Errorf("config releases asked = %+v", calls)
	}

	// noRelease stores without releasing.
	a = call(t, e, http.MethodPatch, "/apps/web/env", token, apiclient.PatchEnvRequest{Set: map[string]string{"LATER": "1"}, NoRelease: true})
	wantStatus(t, "setting env with noRelease", a, http.StatusOK)
	if h := a.header.Get(apiclient.ReleaseHeader); h != "" {
		t.Errorf("noRelease answered %s %q", apiclient.ReleaseHeader, h)
	}
	if got := releaseDescriptions(t, e, token, "web"); got[0] != "v5 Set A; unset BAR" {
		t.Errorf("noRelease made a release: %q", got)
	}
	if !strings.Contains(string(a.body), `"LATER"`) {
		t.Errorf("the env after noRelease lacks LATER: %s", a.body)
	}

	// A release that fails: 409 with why, the change stays stored, no
	// release is recorded.
	e.Releaser.FailRollouts(errors.New("web.0 exited during start-up: exit status 1"))
	a = call(t, e, http.MethodPatch, "/apps/web/env", token, apiclient.PatchEnvRequest{Set: map[string]string{"BROKEN": "1"}})
	if a.status != http.StatusConflict || !strings.Contains(a.err().Message, "the new environment of web is stored, but release v6 did not go out, v5 keeps serving: web.0 exited during start-up: exit status 1") {
		t.Errorf("a failed config release: %d %s, want 409 saying it is stored and why the release failed", a.status, a.body)
	}
	e.Releaser.FailRollouts(nil)
	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "cfgrel", Name: "web"}, app); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(app.Spec.Env, func(v platformv1alpha1.EnvVar) bool { return v.Name == "BROKEN" }) {
		t.Errorf("the change of a failed release is not stored: %+v", app.Spec.Env)
	}
	if got := releaseDescriptions(t, e, token, "web"); len(got) != 5 {
		t.Errorf("a failed release was recorded: %q", got)
	}

	// A refused change asks for no release.
	before := len(e.Releaser.ConfigReleases())
	a = call(t, e, http.MethodPatch, "/apps/web/env", token, apiclient.PatchEnvRequest{Set: map[string]string{"PORT": "80"}})
	if a.status != http.StatusUnprocessableEntity || len(e.Releaser.ConfigReleases()) != before {
		t.Errorf("a refused change: %d %s, %d config releases asked (want 422 and none)", a.status, a.body, len(e.Releaser.ConfigReleases())-before)
	}

	// The audit says what happened to each change, with names only.
	var sets []string
	for _, en := range auditActions(t, e, tenant.ID) {
		if strings.Contains(string(en.Details), "hunter2") {
			t.Errorf("audit entry %s %s shows a secret's value: %s", en.Action, en.Target, en.Details)
		}
		if en.Action == "env.set" || en.Action == "env.unset" {
			sets = append(sets, en.Action+" "+string(en.Details))
		}
	}
	for i, want := range []string{`"release": 2`, `"release": 3`, `"noRelease": true`, `"releaseFailed": true`} {
		if !slices.ContainsFunc(sets, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("audit check %d: no env entry with %s among %q", i, want, sets)
		}
	}
}

// TestRestart: a restart of an app's current release reaches the Releaser
// and is audited, and makes no release; an app without a release (409), a
// process it does not run or a malformed one (422) is refused, changing
// nothing; a restart whose instances never become healthy answers 409
// with why.
func TestRestart(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "restart")
	createApp(t, e, token, "web")
	e.Releaser.SetProcesses("web", "worker")
	auditBefore := countRows(t, e, "audit_log")

	a := call(t, e, http.MethodPost, "/apps/web/restart", token, nil)
	if a.status != http.StatusConflict || a.err().Message != `app "web" has no release to restart yet: push to its git remote first` {
		t.Errorf("restarting an app without a release: %d %s", a.status, a.body)
	}
	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "web", Image: "r/restart/web@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git"}); err != nil {
		t.Fatal(err)
	}
	e.SetCurrentRelease(t, "restart", "web", 1)
	for _, tc := range []struct {
		req  apiclient.RestartRequest
		want string
	}{
		{apiclient.RestartRequest{Process: "Web!"}, `process "Web!": a process type is a lowercase name such as web or worker`},
		{apiclient.RestartRequest{Process: "clock"}, `process "clock": release v1 of web has web, worker`},
	} {
		a := call(t, e, http.MethodPost, "/apps/web/restart", token, tc.req)
		if a.status != http.StatusUnprocessableEntity || a.err().Field != "process" || !strings.Contains(a.err().Message, tc.want) {
			t.Errorf("restart %+v: %d %s, want 422 on process saying %q", tc.req, a.status, a.body, tc.want)
		}
	}
	if n := countRows(t, e, "audit_log"); n != auditBefore {
		t.Errorf("audit_log has %d rows after refused restarts, want %d", n, auditBefore)
	}
	if calls := e.Releaser.Restarts(); len(calls) != 1 || calls[0].Process != "clock" {
		t.Errorf("restarts asked of the Releaser = %+v, want only clock's (which it refused)", calls)
	}

	a = call(t, e, http.MethodPost, "/apps/web/restart", token, nil)
	wantStatus(t, "restarting every process", a, http.StatusOK)
	var r apiclient.Restart
	a.decode(t, &r)
	if r.Release != 1 || !slices.Equal(r.Processes, []string{"web", "worker"}) {
		t.Errorf("restart = %+v, want release 1, web and worker", r)
	}
	a = call(t, e, http.MethodPost, "/apps/web/restart", token, apiclient.RestartRequest{Process: "worker"})
	wantStatus(t, "restarting the worker", a, http.StatusOK)
	a.decode(t, &r)
	if !slices.Equal(r.Processes, []string{"worker"}) {
		t.Errorf("restart of the worker = %+v", r)
	}
	if got := releaseDescriptions(t, e, token, "web"); len(got) != 1 {
		t.Errorf("a restart made a release: %q", got)
	}

	e.Releaser.FailRollouts(errors.New("web.0 failed its health check GET /healthz: 500 (3 of 3)"))
	a = call(t, e, http.MethodPost, "/apps/web/restart", token, apiclient.RestartRequest{Process: "web"})
	if a.status != http.StatusConflict || !strings.Contains(a.err().Message, "the old instances keep running: web.0 failed its health check GET /healthz: 500 (3 of 3)") {
		t.Errorf("a failed restart: %d %s, want 409 with why", a.status, a.body)
	}

	var restarts []string
	for _, en := range auditActions(t, e, tenant.ID) {
		if en.Action == "app.restart" {
			restarts = append(restarts, string(en.Details))
		}
	}
	if len(restarts) != 2 || !strings.Contains(restarts[0], `"processes": ["web", "worker"]`) || !strings.Contains(restarts[1], `"process": "worker"`) {
		t.Errorf("app.restart audit entries = %q, want the two restarts that were done", restarts)
	}
}
