package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"bex.co/bex/internal/store"
)

// TestFailedReleases records releases whose rollout failed: they take
// their number, say why, stay as they are, never run and are never what
// serves or what a rollback goes back to.
func TestFailedReleases(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	create := func(nr store.NewRelease) store.Release {
		t.Helper()
		nr.TenantID, nr.App, nr.CreatedBy = acme.ID, "web", "git:dev"
		if nr.Kind == "" {
			nr.Kind = store.ReleaseKindDeploy
		}
		r, err := s.CreateRelease(ctx, nr)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	create(store.NewRelease{Image: "r/acme/web@sha256:01", Description: "Deploy 0000001"})
	v2 := create(store.NewRelease{Image: "r/acme/web@sha256:02", Description: "Deploy 0000002"})
	failure := "the release phase (./migrate) exited with status 1; its last lines:\n  no such table: users"
	v3 := create(store.NewRelease{Image: "r/acme/web@sha256:03", Description: "Deploy 0000003", Failure: failure})
	if v3.Number != 3 || v3.Status != store.ReleaseFailed || v3.Failure != failure {
		t.Fatalf("failed v3 = number %d, status %q, failure %q", v3.Number, v3.Status, v3.Failure)
	}
	if v2.Status != store.ReleaseSucceeded || v2.Failure != "" {
		t.Errorf("v2 = status %q, failure %q, want succeeded without failure", v2.Status, v2.Failure)
	}

	// What runs, or is about to, is v2; v3's number is taken.
	if latest, err := s.LatestRelease(ctx, acme.ID, "web"); err != nil || latest.Number != 2 {
		t.Errorf("LatestRelease = v%d, %v, want v2 (v3 failed)", latest.Number, err)
	}
	if cur, err := s.CurrentRelease(ctx, acme.ID, "web", 0); err != nil || cur.Number != 2 {
		t.Errorf("CurrentRelease(unset) = v%d, %v, want v2", cur.Number, err)
	}
	if newest, err := s.GetRelease(ctx, acme.ID, "web", 0); err != nil || newest.Number != 3 || newest.Status != store.ReleaseFailed {
		t.Errorf("GetRelease(0) = v%d %q, %v, want failed v3", newest.Number, newest.Status, err)
	}
	v4 := create(store.NewRelease{Kind: store.ReleaseKindConfig, Image: v2.Image, Description: "Set FOO", Failure: "instances of web never became healthy"})
	if v4.Number != 4 {
		t.Errorf("the failed config release after failed v3 is v%d, want v4", v4.Number)
	}
	if to, err := s.RollbackTarget(ctx, acme.ID, "web", 0); err != nil || to != 1 {
		t.Errorf("RollbackTarget(unset) = v%d, %v, want v1, the one before v2", to, err)
	}
	v5 := create(store.NewRelease{Kind: store.ReleaseKindConfig, Image: v2.Image, Description: "Set FOO"})
	if v5.Number != 5 {
		t.Errorf("the release after two failed ones is v%d, want v5", v5.Number)
	}
	if to, err := s.RollbackTarget(ctx, acme.ID, "web", 5); err != nil || to != 2 {
		t.Errorf("RollbackTarget(v5) = v%d, %v, want v2: v3 and v4 failed", to, err)
	}
	if prev, err := s.PreviousRelease(ctx, acme.ID, "web", 5); err != nil || prev.Number != 2 {
		t.Errorf("PreviousRelease(v5) = v%d, %v, want v2", prev.Number, err)
	}

	// A failed release never runs again.
	var failed *store.FailedError
	if err := v3.Runnable(); !errors.As(err, &failed) || !errors.Is(err, store.ErrInvalid) || failed.Number != 3 {
		t.Errorf("v3.Runnable() = %v, want a *FailedError (ErrInvalid)", err)
	}
	_, err := s.RunnableRelease(ctx, acme.ID, "web", 3)
	if want := "v3 failed (" + failure + "); roll back to a release that went out, e.g. v2"; err == nil || err.Error() != want {
		t.Errorf("RunnableRelease(v3) = %v, want %q", err, want)
	}
	if _, err := s.CreateRollbackRelease(ctx, acme.ID, "web", 3, "dev"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("CreateRollbackRelease(failed v3) = %v, want ErrInvalid", err)
	}
	if _, err := s.CreateRelease(ctx, store.NewRelease{TenantID: acme.ID, App: "web", Kind: store.ReleaseKindRollback, RollbackTo: 4,
		Image: v2.Image, Description: "Rollback to v4", CreatedBy: "dev"}); !errors.As(err, &failed) || failed.Number != 4 {
		t.Errorf("CreateRelease(rollback to failed v4) = %v, want a *FailedError", err)
	}
	if latest, err := s.GetRelease(ctx, acme.ID, "web", 0); err != nil || latest.Number != 5 {
		t.Errorf("after the refused rollbacks the newest release is v%d, %v, want v5", latest.Number, err)
	}

	// The list has them, as they were recorded.
	list, err := s.ListReleases(ctx, acme.ID, "web", store.ReleaseFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, r := range list {
		statuses = append(statuses, fmt.Sprintf("v%d %s", r.Number, r.Status))
	}
	if got := strings.Join(statuses, ", "); got != "v5 succeeded, v4 failed, v3 failed, v2 succeeded, v1 succeeded" {
		t.Errorf("ListReleases = %s", got)
	}

	// Immutable: a status is given once, at the insert, and tied to its
	// failure.
	for _, stmt := range []string{
		"UPDATE releases SET status = 'succeeded', failure = NULL WHERE number = 3",
		"UPDATE releases SET failure = 'other' WHERE number = 3",
	} {
		if _, err := s.Pool().Exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "releases are immutable") {
			t.Errorf("%s: err = %v, want it refused as immutable", stmt, err)
		}
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('bex.pruning_releases', 'on', true)"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE releases SET status = 'succeeded', failure = NULL, pruned_at = now(), pruned_retention = 1 WHERE number = 3"); err == nil {
		t.Error("a pruning transaction turned failed v3 into a succeeded one")
	}
	_ = tx.Rollback(ctx)
	for _, values := range []string{"'failed', NULL", "'failed', ''", "'succeeded', 'it failed'", "'pending', NULL"} {
		_, err := s.Pool().Exec(ctx, "INSERT INTO releases (tenant_id, app, number, kind, image, description, created_by, status, failure) "+
			"VALUES ($1, 'other', 1, 'deploy', 'r/acme/other@sha256:01', 'Deploy', 'dev', "+values+")", acme.ID)
		if err == nil || !strings.Contains(err.Error(), "releases_") {
			t.Errorf("a release with status and failure %s: err = %v, want a check refusing it", values, err)
		}
	}
	if got, err := s.GetRelease(ctx, acme.ID, "web", 3); err != nil || got.Status != store.ReleaseFailed || got.Failure != failure {
		t.Errorf("after the refused statements v3 = %q %q, %v, want it failed as recorded", got.Status, got.Failure, err)
	}
}

// TestPruneFailedReleases keeps the newest releases that went out: failed
// ones do not count among them, and are pruned at the first prune after
// them, their image deleted unless a kept release runs it.
func TestPruneFailedReleases(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	for i, failure := range []string{"", "", "release phase failed", "web never became healthy", ""} {
		image := fmt.Sprintf("r/acme/web@sha256:0%d", i+1)
		if i == 3 {
			image = "r/acme/web@sha256:02" // a failed config release of v2's image
		}
		if _, err := s.CreateRelease(ctx, store.NewRelease{TenantID: acme.ID, App: "web", Image: image,
			Kind: store.ReleaseKindDeploy, Description: "Deploy", CreatedBy: "dev", Failure: failure}); err != nil {
			t.Fatal(err)
		}
	}
	// The image of failed v3's build stays queued for deletion: a failed
	// release runs nothing.
	if err := s.QueueDeletion(ctx, acme.ID, "web", store.DeleteImage, "r/acme/web@sha256:03", "build 3 was not released"); err != nil {
		t.Fatal(err)
	}
	if pending, err := s.PendingDeletions(ctx, acme.ID, "web"); err != nil || len(pending) != 1 || pending[0].Target != "r/acme/web@sha256:03" {
		t.Errorf("pending deletions with failed v3 unpruned = %+v, %v; want its image", pending, err)
	}
	// Keep 2: v5 and v2, the newest two that went out; v3 and v4 failed.
	got, err := s.PruneReleases(ctx, acme.ID, "web", 2, 5)
	if err != nil {
		t.Fatal(err)
	}
	var numbers []int
	for _, r := range got.Releases {
		numbers = append(numbers, r.Number)
	}
	if fmt.Sprint(numbers) != "[1 3 4]" || fmt.Sprint(got.Images) != "[r/acme/web@sha256:01 r/acme/web@sha256:03]" {
		t.Errorf("PruneReleases = releases %v, images %v, want [1 3 4] and the images of v1 and v3", numbers, got.Images)
	}
	if _, err := s.CreateRollbackRelease(ctx, acme.ID, "web", 2, "dev"); err != nil {
		t.Errorf("rollback to kept v2: %v", err)
	}
}
