package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard/dashboardtest"
)

// TestTeamAndTokens: in Chromium, an admin invites a developer from the
// Team page; the invitee opens the link, joins and is signed in with their
// first token shown once; they make a token on the Tokens page, see its
// secret once, and revoke it, after which the API refuses it; the admin
// makes them a viewer, and their app page then offers no change.
func TestTeamAndTokens(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	base := dashboardtest.Start(t, e).URL
	_, admin := e.TenantToken(t, "acme")
	api, err := apiclient.New(e.URL, admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateApp(t.Context(), apiclient.CreateAppRequest{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)

	// The admin invites ann as a developer.
	if st := b.signIn(base, admin); st != http.StatusOK {
		t.Fatalf("signing in: status %d", st)
	}
	b.open(base + "/team")
	invite(t, b, "ann@acme.test", "developer", "#invite-form button")
	link := eval[string](b, `document.querySelector("#join-link").value`)
	if !strings.Contains(link, "/join?code=bexinv_") || !strings.Contains(b.text("#invitation-list"), "ann@acme.test") {
		t.Fatalf("after inviting: link %q, page %q", link, b.text("main"))
	}
	b.screenshot("team-invited")
	b.signOut()

	// Ann opens the link and joins.
	b.open(link)
	if st := b.clickAndLoad("joining", "#join"); st != http.StatusOK || !strings.Contains(b.text("#joined"), "as ann@acme.test, developer") {
		t.Fatalf("joining: status %d: %q", st, b.text("main"))
	}
	first := eval[string](b, `document.querySelector("#first-token").value`)
	if !strings.HasPrefix(first, "bex_") {
		t.Fatalf("the first token shown: %q", first)
	}

	// A token of hers: its secret shown once, then revoked.
	b.open(base + "/tokens")
	b.do("filling in the token", chromedp.SetValue(chromedp.CSS(`#token-form input[name=name]`), "ci"),
		chromedp.SetValue(chromedp.CSS(`#token-form select[name=scope]`), "write"),
		chromedp.SetValue(chromedp.CSS(`#token-form select[name=expires]`), "30"))
	if st := b.clickAndLoad("making a token", "#token-form button"); st != http.StatusOK {
		t.Fatalf("making a token: status %d: %q", st, b.text("main"))
	}
	secret := eval[string](b, `document.querySelector("#token-secret").value`)
	if row := b.text(`tr[data-token="ci"]`); !strings.HasPrefix(secret, "bex_") || !strings.Contains(row, secret[:8]) || !strings.Contains(row, "write") || strings.Contains(row, secret) {
		t.Fatalf("the made token: secret %q, row %q", secret, row)
	}
	b.screenshot("tokens-created")
	ci, err := apiclient.New(e.URL, secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := ci.WhoAmI(t.Context()); err != nil || w.Role != "developer" || w.Scope != "write" {
		t.Fatalf("the token acts as %+v (%v)", w, err)
	}
	if st := b.clickAndLoad("revoking it", `button[data-revoke="ci"]`); st != http.StatusOK || !strings.Contains(b.text("#notice"), "Token revoked") {
		t.Fatalf("revoking: status %d: %q", st, b.text("main"))
	}
	if _, err := ci.WhoAmI(t.Context()); !apiclient.IsStatus(err, http.StatusUnauthorized) {
		t.Errorf("the revoked token: err = %v, want 401", err)
	}
	if b.text(`tr[data-token="ci"]`) != "" {
		t.Error("the revoked token is still listed")
	}
	b.signOut()

	// The admin makes her a viewer.
	b.signIn(base, admin)
	b.open(base + "/team")
	b.do("choosing viewer", chromedp.SetValue(chromedp.CSS(`tr[data-member="ann@acme.test"] select[name=role]`), "viewer"))
	if st := b.clickAndLoad("changing her role", `button[data-set-role="ann@acme.test"]`); st != http.StatusOK || !strings.Contains(b.text("#notice"), "ann@acme.test is now viewer") {
		t.Fatalf("changing the role: status %d: %q", st, b.text("main"))
	}
	if role := b.text(`tr[data-member="ann@acme.test"] td.role`); role != "viewer" {
		t.Errorf("ann's role on the page: %q", role)
	}
	b.screenshot("team")
	b.signOut()

	// As a viewer, her pages offer no change.
	b.signIn(base, first)
	b.open(base + "/apps/shop")
	if n := eval[int](b, `document.querySelectorAll("#restart-app, #scale-app, #env-form, form[action$='/delete']").length`); n != 0 {
		t.Errorf("the viewer's app page has %d forms that change the app", n)
	}
	if !strings.Contains(b.text("#env-hidden"), "Developers and admins") || !strings.Contains(b.text("header .who"), "viewer") {
		t.Errorf("the viewer's app page: %q", b.text("body"))
	}
	b.screenshot("viewer-app")
}
