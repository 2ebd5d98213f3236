package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apitest"
)

// TestReleasePage: in Chromium, a tenant sees each release's kind in the
// app page's release list and opens a config release from it: its page
// shows what changed by name (never a value), the image and the build;
// rolling back from it makes a release of kind rollback whose page links
// back to it.
func TestReleasePage(t *testing.T) {
	s := startShop(t, apitest.Options{})
	e, base, tenant, token, ctx := s.e, s.base, s.tenant, s.token, t.Context()
	var bld store.Build
	// v1 a push, v2 a config change, v3 another push.
	plain := func(v string) store.ConfigValue { return store.ConfigValue{Value: &v} }
	secret := store.ConfigValue{SecretKeyRef: &store.SecretRef{Name: "shop-env", Key: "STRIPE_KEY"}}
	v1 := map[string]store.ConfigValue{"DATABASE_URL": plain("postgres://shop:hunter2@db/shop"), "STRIPE_KEY": secret, "LEGACY_CHECKOUT": plain("1")}
	v2 := map[string]store.ConfigValue{"DATABASE_URL": plain("postgres://shop:hunter3@db/shop"), "STRIPE_KEY": secret, "GREETING": plain("hello-value")}
	for _, r := range []struct {
		commit, by string
		desc       string
		config     map[string]store.ConfigValue
	}{
		{"4f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39", "token:ci", "Deploy 4f2a9c1", v1},
		{"", "ann@acme.test", "Set GREETING, DATABASE_URL; unset LEGACY_CHECKOUT", v2},
		{"9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c", "token:ci", "Deploy 9b8c7d6", v2},
	} {
		kind := store.ReleaseKindConfig
		if r.commit != "" {
			kind = store.ReleaseKindDeploy
			b, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "shop", Commit: r.commit, Stack: "node"})
			if err != nil {
				t.Fatal(err)
			}
			bld = b
		}
		if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", Kind: kind, BuildID: bld.ID,
			Image: "registry.bex.test/acme/shop@sha256:" + strings.Repeat(bld.Commit[:2], 32), Description: r.desc, CreatedBy: r.by, Config: r.config}); err != nil {
			t.Fatal(err)
		}
	}
	e.SetCurrentRelease(t, "acme", "shop", 3)
	b := newBrowser(t)
	if st := b.signIn(base, token); st != http.StatusOK {
		t.Fatalf("signing in: status %d", st)
	}

	// The list says each release's kind.
	const kinds = `[...document.querySelectorAll('#release-list tr[data-release]')].map(tr => 'v' + tr.dataset.release + ' ' +
		tr.querySelector('[data-release-kind]').dataset.releaseKind).join(', ')`
	b.open(base + "/apps/shop")
	if got := eval[string](b, kinds); got != "v3 deploy, v2 config, v1 deploy" {
		t.Errorf("the release list's kinds: %q", got)
	}

	// The filter above the list toggles kinds, several at once, and shows
	// all again.
	const on = `[...document.querySelectorAll('#release-filter a[aria-current]')].map(a => a.dataset.releaseFilter).join(', ')`
	for _, tc := range []struct{ click, url, want, on, none string }{
		{"deploy", "/apps/shop?kind=deploy#releases", "v3 deploy, v1 deploy", "deploy", ""},
		{"config", "/apps/shop?kind=deploy,config#releases", "v3 deploy, v2 config, v1 deploy", "deploy, config", ""},
		{"deploy", "/apps/shop?kind=config#releases", "v2 config", "config", ""},
		{"rollback", "/apps/shop?kind=rollback,config#releases", "v2 config", "rollback, config", ""},
		{"config", "/apps/shop?kind=rollback#releases", "", "rollback", "No rollback release."},
		{"rollback", "/apps/shop#releases", "v3 deploy, v2 config, v1 deploy", "all", ""},
		{"rollback", "/apps/shop?kind=rollback#releases", "", "rollback", "No rollback release."},
		{"all", "/apps/shop#releases", "v3 deploy, v2 config, v1 deploy", "all", ""},
	} {
		if st := b.clickAndLoad("toggling "+tc.click, `#release-filter a[data-release-filter="`+tc.click+`"]`); st != http.StatusOK || b.location() != base+tc.url {
			t.Fatalf("toggling %s: status %d at %s, want %s", tc.click, st, b.location(), tc.url)
		}
		if got := eval[string](b, kinds); got != tc.want {
			t.Errorf("the release list at %s: %q, want %q", tc.url, got, tc.want)
		}
		if got := eval[string](b, on); got != tc.on {
			t.Errorf("at %s, the filter marks %q, want %q", tc.url, got, tc.on)
		}
		if got := b.text("#release-none"); tc.none != "" && got != tc.none {
			t.Errorf("at %s, of which there is none: the list says %q", tc.url, got)
		}
	}
	if st := b.open(base + "/apps/shop?kind=restart"); st != http.StatusUnprocessableEntity || !strings.Contains(b.text("main"), "want one of deploy, rollback, config") {
		t.Errorf("an unknown kind: status %d: %q", st, b.text("main"))
	}
	b.open(base + "/apps/shop")

	// v2, from the app page's list: a config change, superseded.
	if st := b.clickAndLoad("opening v2", `a[data-release-link="2"]`); st != http.StatusOK || b.location() != base+"/apps/shop/releases/2" {
		t.Fatalf("opening v2 from the list: status %d at %s", st, b.location())
	}
	for sel, want := range map[string]string{
		"#release-status":  "superseded",
		"#release-origin":  "a config change: Set GREETING, DATABASE_URL; unset LEGACY_CHECKOUT",
		"#release-by":      "ann@acme.test",
		"#release-image":   "registry.bex.test/acme/shop@sha256:" + strings.Repeat("4f", 32),
		"#release-changes": "from v1: the same image; added GREETING; changed DATABASE_URL; removed LEGACY_CHECKOUT",
		"#release-build":   "#1 of commit 4f2a9c1d, node",
	} {
		if got := b.text(sel); got != want {
			t.Errorf("v2's %s: %q, want %q", sel, got, want)
		}
	}
	if body := b.text("body"); strings.Contains(body, "hunter") || strings.Contains(body, "hello-value") {
		t.Errorf("v2's page shows a value:\n%s", body)
	}
	b.screenshot("release-page")

	// Rolling back from v2's page: v4 runs what v2 ran, and says so.
	if st := b.clickAndLoad("rolling back to v2", `#release-rollback button`); st != http.StatusOK {
		t.Fatalf("rolling back: status %d: %q", st, b.text("main"))
	}
	if notice := b.text("#notice"); notice != "Rolled back: release v4 runs what v2 ran." {
		t.Fatalf("after the rollback the page says %q", notice)
	}
	if st := b.clickAndLoad("opening v4", `a[data-release-link="4"]`); st != http.StatusOK {
		t.Fatalf("opening v4: status %d", st)
	}
	if got := b.text("#release-origin"); got != "a rollback to v2: its image and variables again" {
		t.Errorf("v4 was made by %q", got)
	}
	if got := b.text("#release-changes"); got != "from v3: a new image" {
		t.Errorf("v4's changes: %q", got)
	}
	if got := eval[string](b, `document.querySelector('#release-origin').dataset.releaseKind`); got != "rollback" {
		t.Errorf("v4's page gives the kind %q, want rollback", got)
	}
	if st := b.clickAndLoad("following v4's rollback link", `#release-origin a[data-release-link="2"]`); st != http.StatusOK || b.location() != base+"/apps/shop/releases/2" {
		t.Errorf("following v4's rollback link: status %d at %s", st, b.location())
	}
	b.open(base + "/apps/shop")
	if got := eval[string](b, kinds); got != "v4 rollback, v3 deploy, v2 config, v1 deploy" {
		t.Errorf("the release list's kinds after the rollback: %q", got)
	}
	if st := b.open(base + "/apps/shop/releases/9"); st != http.StatusNotFound {
		t.Errorf("an unknown release: status %d", st)
	}
}
