package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestRollbackToPrunedRelease: releases pruned past the retention are
// listed as such, and a rollback to one (named, or the default one before
// the current) is refused with 422 naming the retention, without reaching
// the Releaser.
func TestRollbackToPrunedRelease(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "prune")
	createApp(t, e, token, "web")
	for _, img := range []string{"r/prune/web@sha256:1", "r/prune/web@sha256:2", "r/prune/web@sha256:3"} {
		if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "web", Image: img, Kind: store.ReleaseKindDeploy, Description: "Deploy", CreatedBy: "git"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Store.PruneReleases(ctx, tenant.ID, "web", 1, 3); err != nil {
		t.Fatal(err)
	}

	a := call(t, e, http.MethodGet, "/apps/web/releases", token, nil)
	wantStatus(t, "listing releases", a, http.StatusOK)
	var releases []apiclient.Release
	a.decode(t, &releases)
	if len(releases) != 3 || releases[0].PrunedAt != nil || releases[1].PrunedAt == nil || releases[2].PrunedAt == nil {
		t.Errorf("releases = %s, want v1 and v2 with prunedAt, v3 without", a.body)
	}

	for _, tc := range []struct {
		body apiclient.RollbackRequest
		want string
	}{
		{apiclient.RollbackRequest{Release: 1}, "release v1 was pruned: the platform keeps the last release of an app"},
		{apiclient.RollbackRequest{}, "release v2 was pruned: the platform keeps the last release of an app"},
	} {
		a := call(t, e, http.MethodPost, "/apps/web/rollback", token, tc.body)
		if a.status != http.StatusUnprocessableEntity || a.err().Field != "release" || a.err().Message != tc.want {
			t.Errorf("rollback %+v: %d %s, want 422 on release saying %q", tc.body, a.status, a.body, tc.want)
		}
	}
	if calls := e.Releaser.Calls(); len(calls) != 0 {
		t.Errorf("Releaser calls = %+v, want none", calls)
	}
	if latest, err := e.Store.LatestRelease(ctx, tenant.ID, "web"); err != nil || latest.Number != 3 {
		t.Errorf("latest release after the refused rollbacks: v%d, %v, want v3", latest.Number, err)
	}
}

// TestReleaseKinds: the release list and a release's page say what made
// each release in a kind field — deploy, config (an env change through the
// API), rollback with the release it runs again — whatever its
// description says.
func TestReleaseKinds(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "relkind")
	createApp(t, e, token, "web")
	// A description that reads like a rollback, on a push: the kind says
	// what it is.
	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "web", Image: "r/relkind/web@sha256:1",
		Kind: store.ReleaseKindDeploy, Description: "Rollback to v1 of the old app", CreatedBy: "git"}); err != nil {
		t.Fatal(err)
	}
	e.SetCurrentRelease(t, "relkind", "web", 1)
	a := call(t, e, http.MethodPatch, "/apps/web/env", token, apiclient.PatchEnvRequest{Set: map[string]string{"FOO": "1"}})
	wantStatus(t, "setting FOO", a, http.StatusOK)
	e.SetCurrentRelease(t, "relkind", "web", 2)
	a = call(t, e, http.MethodPost, "/apps/web/rollback", token, apiclient.RollbackRequest{Release: 1})
	wantStatus(t, "rolling back to v1", a, http.StatusCreated)

	a = call(t, e, http.MethodGet, "/apps/web/releases", token, nil)
	wantStatus(t, "listing releases", a, http.StatusOK)
	// The wire form, as a script reads it.
	var raw []map[string]any
	if err := json.Unmarshal(a.body, &raw); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range raw {
		got = append(got, fmt.Sprintf("v%v %v %v", r["number"], r["kind"], r["rollbackTo"]))
	}
	if want := "v3 rollback 1, v2 config <nil>, v1 deploy <nil>"; strings.Join(got, ", ") != want {
		t.Errorf("releases = %s, want %s:\n%s", strings.Join(got, ", "), want, a.body)
	}
	for n, want := range map[int]apiclient.Release{
		1: {Kind: apiclient.ReleaseKindDeploy},
		2: {Kind: apiclient.ReleaseKindConfig},
		3: {Kind: apiclient.ReleaseKindRollback, RollbackTo: 1},
	} {
		a := call(t, e, http.MethodGet, fmt.Sprintf("/apps/web/releases/%d", n), token, nil)
		wantStatus(t, "release info", a, http.StatusOK)
		var r apiclient.ReleaseInfo
		a.decode(t, &r)
		if r.Kind != want.Kind || r.RollbackTo != want.RollbackTo {
			t.Errorf("release v%d: kind %q, rollbackTo %d; want %q, %d", n, r.Kind, r.RollbackTo, want.Kind, want.RollbackTo)
		}
	}
}

// TestListReleasesByKind: kind=… lists the releases of the kinds given,
// separated by commas, newest first, the limit counting only them, and
// before=N those older than N, through the API and its client; an unknown
// kind, an empty one or kind given twice is a 422 on kind that names the
// kinds, a before that is no release number a 422 on before.
func TestListReleasesByKind(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "relfilter")
	createApp(t, e, token, "web")
	for _, nr := range []store.NewRelease{
		{Kind: store.ReleaseKindDeploy},
		{Kind: store.ReleaseKindConfig},
		{Kind: store.ReleaseKindDeploy},
		{Kind: store.ReleaseKindRollback, RollbackTo: 1},
		{Kind: store.ReleaseKindDeploy},
	} {
		nr.TenantID, nr.App, nr.Image, nr.Description, nr.CreatedBy = tenant.ID, "web", "r/relfilter/web@sha256:1", "d", "git"
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	numbers := func(rs []apiclient.Release) string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("v%d %s", r.Number, r.Kind))
		}
		return strings.Join(out, ", ")
	}
	for query, want := range map[string]string{
		"":                                "v5 deploy, v4 rollback, v3 deploy, v2 config, v1 deploy",
		"?kind=":                          "v5 deploy, v4 rollback, v3 deploy, v2 config, v1 deploy",
		"?kind=deploy":                    "v5 deploy, v3 deploy, v1 deploy",
		"?kind=rollback,config":           "v4 rollback, v2 config",
		"?kind=deploy&limit=2":            "v5 deploy, v3 deploy",
		"?kind=config,deploy,rollback":    "v5 deploy, v4 rollback, v3 deploy, v2 config, v1 deploy",
		"?kind=deploy%2C%20rollback":      "v5 deploy, v4 rollback, v3 deploy, v1 deploy",
		"?limit=1&kind=rollback,rollback": "v4 rollback",
		"?before=4&limit=2":               "v3 deploy, v2 config",
		"?before=v2":                      "v1 deploy",
		"?before=1":                       "",
		"?before=5&kind=deploy":           "v3 deploy, v1 deploy",
	} {
		a := call(t, e, http.MethodGet, "/apps/web/releases"+query, token, nil)
		wantStatus(t, "listing releases "+query, a, http.StatusOK)
		var rs []apiclient.Release
		a.decode(t, &rs)
		if numbers(rs) != want {
			t.Errorf("releases%s = %s, want %s", query, numbers(rs), want)
		}
	}
	for query, want := range map[string]string{
		"?kind=restart":            `release kind "restart": want one of deploy, rollback, config`,
		"?kind=deploy,Config":      `release kind "Config": want one of deploy, rollback, config`,
		"?kind=deploy,,config":     "an empty kind; give kinds separated by commas, from deploy, rollback, config",
		"?kind=deploy&kind=config": "kind given 2 times: give the kinds once, separated by commas, such as kind=deploy,config",
	} {
		a := call(t, e, http.MethodGet, "/apps/web/releases"+query, token, nil)
		if a.status != http.StatusUnprocessableEntity || a.err().Field != "kind" || !strings.Contains(a.err().Message, want) {
			t.Errorf("releases%s: %d %s, want 422 on kind saying %q", query, a.status, a.body, want)
		}
	}
	for _, query := range []string{"?before=0", "?before=-3", "?before=x", "?before=v"} {
		a := call(t, e, http.MethodGet, "/apps/web/releases"+query, token, nil)
		if a.status != http.StatusUnprocessableEntity || a.err().Field != "before" || !strings.Contains(a.err().Message, "is not a release number") {
			t.Errorf("releases%s: %d %s, want 422 on before", query, a.status, a.body)
		}
	}

	c, err := apiclient.New(e.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := c.ListReleases(ctx, "web", apiclient.ReleaseKindRollback, apiclient.ReleaseKindDeploy)
	if want := "v5 deploy, v4 rollback, v3 deploy, v1 deploy"; err != nil || numbers(rs) != want {
		t.Errorf("client ListReleases(rollback, deploy) = %s, %v, want %s", numbers(rs), err, want)
	}
	rs, err = c.ListReleasesPage(ctx, "web", apiclient.ReleasePage{Before: 5, Limit: 2, Kinds: []string{apiclient.ReleaseKindDeploy, apiclient.ReleaseKindConfig}})
	if want := "v3 deploy, v2 config"; err != nil || numbers(rs) != want {
		t.Errorf("client ListReleasesPage(before 5, limit 2, deploy and config) = %s, %v, want %s", numbers(rs), err, want)
	}
	if rs, err := c.ListReleases(ctx, "web", "restart"); err == nil || !strings.Contains(err.Error(), "want one of deploy, rollback, config") {
		t.Errorf("client ListReleases(restart) = %s, %v, want the 422 naming the kinds", numbers(rs), err)
	}
}

// TestListReleasesByStatus: status=… lists the releases that went out
// (succeeded: current, superseded or pruned) or those that failed, newest
// first, with kind and before as without it, through the API and its
// client; an unknown status, an empty one or status given twice is a 422
// on status that names the statuses.
func TestListReleasesByStatus(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "relstatus")
	createApp(t, e, token, "web")
	for _, nr := range []store.NewRelease{
		{Kind: store.ReleaseKindDeploy},
		{Kind: store.ReleaseKindDeploy, Failure: "web.0 exited during start-up"},
		{Kind: store.ReleaseKindConfig},
		{Kind: store.ReleaseKindConfig, Failure: "web.0 never became healthy"},
		{Kind: store.ReleaseKindDeploy},
	} {
		nr.TenantID, nr.App, nr.Image, nr.Description, nr.CreatedBy = tenant.ID, "web", "r/relstatus/web@sha256:1", "d", "git"
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	e.SetCurrentRelease(t, tenant.Name, "web", 5)
	numbers := func(rs []apiclient.Release) string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("v%d %s %s", r.Number, r.Kind, r.Status))
		}
		return strings.Join(out, ", ")
	}
	for query, want := range map[string]string{
		"?status=":                          "v5 deploy current, v4 config failed, v3 config superseded, v2 deploy failed, v1 deploy superseded",
		"?status=failed":                    "v4 config failed, v2 deploy failed",
		"?status=succeeded":                 "v5 deploy current, v3 config superseded, v1 deploy superseded",
		"?status=succeeded,failed&limit=2":  "v5 deploy current, v4 config failed",
		"?status=%20failed%20,failed":       "v4 config failed, v2 deploy failed",
		"?status=failed&limit=1":            "v4 config failed",
		"?status=failed&before=v4":          "v2 deploy failed",
		"?status=succeeded&before=3":        "v1 deploy superseded",
		"?status=failed&before=2":           "",
		"?status=failed&kind=deploy":        "v2 deploy failed",
		"?kind=config,deploy&status=failed": "v4 config failed, v2 deploy failed",
		"?status=succeeded&kind=config":     "v3 config superseded",
	} {
		a := call(t, e, http.MethodGet, "/apps/web/releases"+query, token, nil)
		wantStatus(t, "listing releases "+query, a, http.StatusOK)
		var rs []apiclient.Release
		a.decode(t, &rs)
		if numbers(rs) != want {
			t.Errorf("releases%s = %s, want %s", query, numbers(rs), want)
		}
	}
	for query, want := range map[string]string{
		"?status=pending":                 `release status "pending": want one of succeeded, failed`,
		"?status=superseded":              `release status "superseded": want one of succeeded, failed`,
		"?status=failed,Succeeded":        `release status "Succeeded": want one of succeeded, failed`,
		"?status=failed,":                 "an empty status; give statuses separated by commas, from succeeded, failed",
		"?status=failed&status=succeeded": "status given 2 times: give the statuses once, separated by commas, such as status=failed,succeeded",
		"?kind=deploy&status=failure":     `release status "failure": want one of succeeded, failed`,
	} {
		a := call(t, e, http.MethodGet, "/apps/web/releases"+query, token, nil)
		if a.status != http.StatusUnprocessableEntity || a.err().Field != "status" || !strings.Contains(a.err().Message, want) {
			t.Errorf("releases%s: %d %s, want 422 on status saying %q", query, a.status, a.body, want)
		}
	}

	c, err := apiclient.New(e.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := c.ListReleasesPage(ctx, "web", apiclient.ReleasePage{Statuses: []string{apiclient.ReleaseFailed}})
	if want := "v4 config failed, v2 deploy failed"; err != nil || numbers(rs) != want {
		t.Errorf("client ListReleasesPage(failed) = %s, %v, want %s", numbers(rs), err, want)
	}
	rs, err = c.ListReleasesPage(ctx, "web", apiclient.ReleasePage{Before: 5, Limit: 1, Kinds: []string{apiclient.ReleaseKindConfig},
		Statuses: []string{apiclient.ReleaseSucceeded}})
	if want := "v3 config superseded"; err != nil || numbers(rs) != want {
		t.Errorf("client ListReleasesPage(before 5, limit 1, succeeded config) = %s, %v, want %s", numbers(rs), err, want)
	}
	if rs, err := c.ListReleasesPage(ctx, "web", apiclient.ReleasePage{Statuses: []string{"current"}}); err == nil || !strings.Contains(err.Error(), "want one of succeeded, failed") {
		t.Errorf("client ListReleasesPage(current) = %s, %v, want the 422 naming the statuses", numbers(rs), err)
	}

	// The OpenAPI document describes the parameter.
	a := call(t, e, http.MethodGet, "/openapi.json", "", nil)
	wantStatus(t, "reading the OpenAPI document", a, http.StatusOK)
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name, In, Description string } `json:"parameters"`
		} `json:"paths"`
	}
	a.decode(t, &doc)
	described := false
	for _, p := range doc.Paths["/api/v1/apps/{app}/releases"]["get"].Parameters {
		described = described || p.Name == "status" && p.In == "query" && strings.Contains(p.Description, "succeeded") && strings.Contains(p.Description, "failed")
	}
	if !described {
		t.Errorf("the OpenAPI document's GET /api/v1/apps/{app}/releases does not describe status: %+v", doc.Paths["/api/v1/apps/{app}/releases"])
	}
}

// TestFailedReleaseFields: a release whose rollout failed is listed and
// shown with status failed and its failure, the release that serves stays
// current, and a rollback to it, named or by default, is refused or
// skips it, without reaching the Releaser for the refusal.
func TestFailedReleaseFields(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "relfailed")
	createApp(t, e, token, "web")
	failure := "the release phase (./migrate) exited with status 3; its last lines:\n  relation users already exists"
	ptr := func(s string) *string { return &s }
	for _, nr := range []store.NewRelease{
		{Image: "r/relfailed/web@sha256:1", Config: map[string]store.ConfigValue{"FOO": {Value: ptr("1")}}},
		{Image: "r/relfailed/web@sha256:2", Config: map[string]store.ConfigValue{"FOO": {Value: ptr("2")}}},
		{Image: "r/relfailed/web@sha256:3", Config: map[string]store.ConfigValue{"BAR": {Value: ptr("3")}}, Failure: failure},
	} {
		nr.TenantID, nr.App, nr.Kind, nr.Description, nr.CreatedBy = tenant.ID, "web", store.ReleaseKindDeploy, "Deploy", "git"
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	e.SetCurrentRelease(t, tenant.Name, "web", 2)

	a := call(t, e, http.MethodGet, "/apps/web/releases", token, nil)
	wantStatus(t, "listing releases", a, http.StatusOK)
	var list []apiclient.Release
	a.decode(t, &list)
	if len(list) != 3 || list[0].Status != apiclient.ReleaseFailed || list[0].Failure != failure || list[0].Current ||
		list[1].Status != apiclient.ReleaseCurrent || list[1].Failure != "" || list[2].Status != apiclient.ReleaseSuperseded {
		t.Errorf("releases = %s, want failed v3 with its failure, current v2, superseded v1", a.body)
	}
	var wire []map[string]any
	if err := json.Unmarshal(a.body, &wire); err != nil || len(wire) != 3 || wire[0]["failure"] != failure || wire[0]["status"] != "failed" {
		t.Errorf("the wire list = %s, want status and failure fields", a.body)
	} else if _, ok := wire[1]["failure"]; ok {
		t.Errorf("a succeeded release has a failure field: %s", a.body)
	}

	a = call(t, e, http.MethodGet, "/apps/web/releases/3", token, nil)
	wantStatus(t, "showing failed v3", a, http.StatusOK)
	var v3 apiclient.ReleaseInfo
	a.decode(t, &v3)
	// Its changes are from v2, which served when it was tried.
	if v3.Status != apiclient.ReleaseFailed || v3.Failure != failure || v3.Changes.Previous != 2 ||
		strings.Join(v3.Changes.Added, ",") != "BAR" || strings.Join(v3.Changes.Removed, ",") != "FOO" {
		t.Errorf("v3 = %s, want failed with its failure, changes from v2", a.body)
	}

	// A release after it compares with v2 too, and rolls back to v2 by
	// default.
	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "web", Kind: store.ReleaseKindConfig,
		Image: "r/relfailed/web@sha256:2", Config: map[string]store.ConfigValue{"FOO": {Value: ptr("4")}}, Description: "Set FOO", CreatedBy: "dev"}); err != nil {
		t.Fatal(err)
	}
	e.SetCurrentRelease(t, tenant.Name, "web", 4)
	a = call(t, e, http.MethodGet, "/apps/web/releases/4", token, nil)
	var v4 apiclient.ReleaseInfo
	a.decode(t, &v4)
	if v4.Status != apiclient.ReleaseCurrent || v4.Changes.Previous != 2 || strings.Join(v4.Changes.Changed, ",") != "FOO" {
		t.Errorf("v4 = %s, want current with changes from v2", a.body)
	}

	a = call(t, e, http.MethodPost, "/apps/web/rollback", token, apiclient.RollbackRequest{Release: 3})
	if want := "v3 failed (" + failure + "); roll back to a release that went out, e.g. v2"; a.status != http.StatusUnprocessableEntity ||
		a.err().Field != "release" || a.err().Message != want {
		t.Errorf("rollback to failed v3: %d %s, want 422 on release saying %q", a.status, a.body, want)
	}
	if calls := e.Releaser.Calls(); len(calls) != 0 {
		t.Errorf("Releaser calls after the refusal = %+v, want none", calls)
	}
	a = call(t, e, http.MethodPost, "/apps/web/rollback", token, apiclient.RollbackRequest{})
	wantStatus(t, "rolling back by default", a, http.StatusCreated)
	var rb apiclient.Rollback
	a.decode(t, &rb)
	if rb.RolledBackTo != 2 || rb.Release != 5 {
		t.Errorf("the default rollback from v4 = %s, want v5 back to v2 (v3 failed)", a.body)
	}
}
