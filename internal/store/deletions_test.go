package store_test

import (
	"errors"
	"fmt"
	"testing"

	"bex.co/bex/internal/store"
)

// pendingTargets lists the app's pending deletions as "kind target".
func pendingTargets(t *testing.T, s *store.Store, tenantID, app string) []string {
	t.Helper()
	pending, err := s.PendingDeletions(t.Context(), tenantID, app)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range pending {
		out = append(out, d.Kind+" "+d.Target)
	}
	return out
}

// Pruning records what to delete; a failed deletion stays pending with its
// error and one more attempt, a done one goes.
func TestPruneRecordsDeletionsUntilDone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	for i := 1; i <= 3; i++ {
		if _, err := s.CreateRelease(ctx, store.NewRelease{
			TenantID: acme.ID, App: "web", Image: fmt.Sprintf("r/acme/web@sha256:0%d", i), Kind: store.ReleaseKindDeploy, Description: "Deploy", CreatedBy: "dev",
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PruneReleases(ctx, acme.ID, "web", 1, 3); err != nil {
		t.Fatal(err)
	}
	want := "[release-directory 1 image r/acme/web@sha256:01 release-directory 2 image r/acme/web@sha256:02]"
	if got := fmt.Sprint(pendingTargets(t, s, acme.ID, "web")); got != want {
		t.Fatalf("pending after pruning v1 and v2: %s, want %s", got, want)
	}
	pending, err := s.PendingDeletions(ctx, acme.ID, "web")
	if err != nil {
		t.Fatal(err)
	}
	if pending[0].Reason != "release v1 pruned" {
		t.Errorf("reason = %q, want %q", pending[0].Reason, "release v1 pruned")
	}
	for i, d := range pending {
		var failure error
		if d.Kind == store.DeleteImage && d.Target == "r/acme/web@sha256:01" {
			failure = errors.New("the registry answered 503")
		}
		if err := s.FinishDeletion(ctx, pending[i].ID, failure); err != nil {
			t.Fatal(err)
		}
	}
	left, err := s.PendingDeletions(ctx, acme.ID, "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Target != "r/acme/web@sha256:01" || left[0].Attempts != 1 || left[0].LastError != "the registry answered 503" {
		t.Fatalf("pending after one failure = %+v, want only v1's image, 1 attempt, its error", left)
	}
	if got := pendingTargets(t, s, newTenant(t, s, "other").ID, "web"); len(got) != 0 {
		t.Errorf("another tenant's app named web has pending deletions %v", got)
	}
}

// A build's image recorded for deletion is dropped once a kept release
// runs it, and stays to do when none does; one deleted before and recorded
// again (the same digest built again) is to do again.
func TestQueueDeletion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	acme := newTenant(t, s, "acme")
	for _, image := range []string{"r/acme/web@sha256:released", "r/acme/web@sha256:failed-release"} {
		if err := s.QueueDeletion(ctx, acme.ID, "web", store.DeleteImage, image, "build 1 was not released"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateRelease(ctx, store.NewRelease{TenantID: acme.ID, App: "web", Image: "r/acme/web@sha256:released", Kind: store.ReleaseKindDeploy, Description: "Deploy", CreatedBy: "dev"}); err != nil {
		t.Fatal(err)
	}
	pending, err := s.PendingDeletions(ctx, acme.ID, "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].Target != "r/acme/web@sha256:failed-release" || pending[0].Reason != "build 1 was not released" {
		t.Fatalf("pending = %+v, want only the image no release runs", pending)
	}
	if err := s.FinishDeletion(ctx, pending[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	if got := pendingTargets(t, s, acme.ID, "web"); len(got) != 0 {
		t.Fatalf("pending after the deletion = %v, want nothing", got)
	}
	if err := s.QueueDeletion(ctx, acme.ID, "web", store.DeleteImage, "r/acme/web@sha256:failed-release", "build 2 was not released"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(pendingTargets(t, s, acme.ID, "web")); got != "[image r/acme/web@sha256:failed-release]" {
		t.Errorf("pending after the same image was built again = %s, want it to do again", got)
	}
	for _, bad := range []struct{ tenant, kind string }{{acme.ID, "volume"}, {"not-a-uuid", store.DeleteImage}} {
		if err := s.QueueDeletion(ctx, bad.tenant, "web", bad.kind, "x", "r"); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("QueueDeletion(%q, %q) = %v, want ErrInvalid", bad.tenant, bad.kind, err)
		}
	}
}
