package api_test

import (
	"net/http"
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
