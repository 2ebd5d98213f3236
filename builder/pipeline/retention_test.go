package pipeline_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

// TestReleaseRetention: with a retention of 2, four deploys leave v1 and
// v2 pruned (directory and image gone, rows listed as pruned) and v3 and
// v4 whole; a rollback to v3 serves it and keeps its image (v5 runs it),
// and a rollback to v1 is refused, saying why, and changes nothing.
func TestReleaseRetention(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	pl, releasesDir := e.retaining(2)
	var out strings.Builder
	for i, body := range []string{"v1", "v2", "v3", "v4"} {
		res, err := pl.Deploy(ctx, e.commit(t, body, ""), &out)
		if err != nil {
			t.Fatalf("deploying %s: %v", body, err)
		}
		if res.Release != i+1 {
			t.Fatalf("deploy of %s made release v%d", body, res.Release)
		}
	}
	if want := "-----> Pruned v2: the platform keeps the last 2 releases of an app"; !strings.Contains(out.String(), want) {
		t.Errorf("the push output does not say %q:\n%s", want, out.String())
	}
	tenantID := mustTenantID(t, e.st, e.tenant)
	images := map[int]string{}
	for n := 1; n <= 4; n++ {
		r, err := e.st.GetRelease(ctx, tenantID, e.name, n)
		if err != nil {
			t.Fatal(err)
		}
		images[n] = r.Image
	}
	dirOf := func(n int) string { return filepath.Join(releasesDir, e.tenant, e.name, "v"+strconv.Itoa(n)) }
	wantKept := func(kept map[int]bool, imageKept map[int]bool) {
		t.Helper()
		for n := range kept {
			_, err := os.Stat(dirOf(n))
			if kept[n] != (err == nil) {
				t.Errorf("v%d's directory: stat %v, want it there %v", n, err, kept[n])
			}
			r, err := e.st.GetRelease(ctx, tenantID, e.name, n)
			if err != nil {
				t.Fatal(err)
			}
			if kept[n] != (r.PrunedAt == nil) {
				t.Errorf("v%d: prunedAt %v, want it kept %v", n, r.PrunedAt, kept[n])
			}
		}
		for n, want := range imageKept {
			if got := e.imageExists(t, images[n]); got != want {
				t.Errorf("v%d's image %s in the registry: %v, want %v", n, images[n], got, want)
			}
		}
	}
	wantKept(map[int]bool{1: false, 2: false, 3: true, 4: true}, map[int]bool{1: false, 2: false, 3: true, 4: true})

	// A rollback to a kept release serves it; v3 is then past the newest
	// two (v4, v5) and pruned, but v5 runs its image, which stays.
	n, err := pl.Rollback(ctx, e.tenant, e.name, 3, "user:test")
	if err != nil || n != 5 {
		t.Fatalf("rolling back to kept v3: v%d, %v, want v5", n, err)
	}
	if got := e.serving(t); got != 5 {
		t.Errorf("after the rollback to v3 the runtime serves v%d, want v5", got)
	}
	wantKept(map[int]bool{3: false, 4: true, 5: true}, map[int]bool{3: true, 4: true})

	// A rollback to a pruned release is refused and changes nothing.
	_, err = pl.Rollback(ctx, e.tenant, e.name, 1, "user:test")
	if want := "release v1 was pruned: the platform keeps the last 2 releases of an app"; err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("rolling back to pruned v1: %v, want %q (ErrInvalid)", err, want)
	}
	if latest, err := e.st.LatestRelease(ctx, tenantID, e.name); err != nil || latest.Number != 5 {
		t.Errorf("after the refused rollback the latest release is v%d, %v, want v5", latest.Number, err)
	}
	if got := e.app(t).Status.CurrentRelease; got != 5 {
		t.Errorf("after the refused rollback the App's current release is v%d, want v5", got)
	}
	if got := e.serving(t); got != 5 {
		t.Errorf("after the refused rollback the runtime serves v%d, want v5", got)
	}
}

// imageExists reports whether the platform registry has image (by
// digest).
func (e *env) imageExists(t *testing.T, image string) bool {
	t.Helper()
	ref, err := name.NewDigest(image)
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Head(ref, remote.WithAuth(registry.Auth(registryToken)), remote.WithContext(t.Context()))
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return false
	}
	if err != nil {
		t.Fatalf("looking %s up: %v", image, err)
	}
	return true
}

// TestPruneTriesFailedDeletionsAgain: a deletion the registry refused is
// tried again at the next prune, and the image of a build whose release
// failed goes too (the failed release, v2, is pruned at the next prune).
func TestPruneTriesFailedDeletionsAgain(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	pl, _ := e.retaining(1)
	tenantID := mustTenantID(t, e.st, e.tenant)
	if _, err := pl.Deploy(ctx, e.commit(t, "v1", ""), io.Discard); err != nil {
		t.Fatalf("deploying v1: %v", err)
	}

	// A push whose build succeeds and whose release does not start.
	push := e.commit(t, "broken", "")
	if err := os.WriteFile(filepath.Join(e.repo, "server.js"), []byte("process.exit(1);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	platformtest.Git(t, e.repo, "commit", "-q", "-am", "exit at once")
	platformtest.Git(t, e.repo, "push", "-q", e.bare, "main")
	push.New = platformtest.Git(t, e.repo, "rev-parse", "HEAD")[:40]
	if _, err := pl.Deploy(ctx, push, io.Discard); err == nil {
		t.Fatal("a release whose web process exits at once went live")
	}
	pending, err := e.st.PendingDeletions(ctx, tenantID, e.name)
	if err != nil || len(pending) != 1 || pending[0].Kind != store.DeleteImage || pending[0].Reason != "build 2 was not released" {
		t.Fatalf("pending deletions after the failed release: %+v, %v, want the broken build's image", pending, err)
	}
	unreleased := pending[0].Target
	if failed, err := e.st.GetRelease(ctx, tenantID, e.name, 2); err != nil || failed.Status != store.ReleaseFailed || failed.Image != unreleased {
		t.Fatalf("release v2 after the failed push: %+v, %v, want it failed with the broken build's image", failed, err)
	}
	if !e.imageExists(t, unreleased) {
		t.Fatalf("the broken build's image %s is not in the registry", unreleased)
	}

	e.refuseDeletes.Store(true)
	if res, err := pl.Deploy(ctx, e.commit(t, "v2", ""), io.Discard); err != nil || res.Release != 3 {
		t.Fatalf("deploying v2: release v%d, %v; want v3, after failed v2", res.Release, err)
	}
	v1, err := e.st.GetRelease(ctx, tenantID, e.name, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v1.PrunedAt == nil {
		t.Fatal("v1 is not pruned after v3 with a retention of 1")
	}
	if failed, err := e.st.GetRelease(ctx, tenantID, e.name, 2); err != nil || failed.PrunedAt == nil {
		t.Fatalf("failed v2 after v3: %+v, %v, want it pruned", failed, err)
	}
	if !e.imageExists(t, v1.Image) || !e.imageExists(t, unreleased) {
		t.Fatal("an image was deleted while the registry refused deletions")
	}

	e.refuseDeletes.Store(false)
	if _, err := pl.Deploy(ctx, e.commit(t, "v3", ""), io.Discard); err != nil {
		t.Fatalf("deploying v3: %v", err)
	}
	v3, err := e.st.GetRelease(ctx, tenantID, e.name, 3)
	if err != nil {
		t.Fatal(err)
	}
	v4, err := e.st.GetRelease(ctx, tenantID, e.name, 4)
	if err != nil {
		t.Fatal(err)
	}
	for what, image := range map[string]string{"v1's image, refused once": v1.Image, "the unreleased build's image": unreleased, "v3's image": v3.Image} {
		if e.imageExists(t, image) {
			t.Errorf("%s (%s) is still in the registry", what, image)
		}
	}
	if !e.imageExists(t, v4.Image) {
		t.Errorf("v4's image, which serves, was deleted")
	}
	if pending, err := e.st.PendingDeletions(ctx, tenantID, e.name); err != nil || len(pending) != 0 {
		t.Errorf("pending deletions after the registry came back: %+v, %v, want none", pending, err)
	}
}
