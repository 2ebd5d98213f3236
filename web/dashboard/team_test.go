package dashboard_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"bex.co/bex/web/api/apiclient"
)

var (
	joinLink  = regexp.MustCompile(`id="join-link" readonly value="([^"]+)"`)
	firstTok  = regexp.MustCompile(`id="first-token" readonly value="(bex_[a-z2-7]+)"`)
	secretTok = regexp.MustCompile(`id="token-secret" readonly value="(bex_[a-z2-7]+)"`)
)

// TestTeamAndTokensPages: an admin invites from the Team page, which shows
// the link once; the invitee joins through it, is signed in and shown
// their first token once, and the code then fails; the admin makes them a
// viewer, whose pages offer no changes and whose forged changes the API
// refuses; a member makes a token, sees its secret once, and revokes it; a
// removed member's session ends.
func TestTeamAndTokensPages(t *testing.T) {
	e, srv := startDashboard(t)
	_, machine := e.TenantToken(t, "dashteam")
	admin := newUser(t, srv.URL)
	signIn(t, admin, machine)
	if p := admin.post("/apps", url.Values{"csrf": {admin.get("/apps").csrf(t)}, "name": {"shop"}}); p.status != http.StatusSeeOther {
		t.Fatalf("creating shop: %d\n%s", p.status, p.body)
	}

	p := admin.get("/team")
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="invite-form"`) || !strings.Contains(p.body, "No members yet") {
		t.Fatalf("the admin's team page: %d\n%s", p.status, p.body)
	}
	csrf := p.csrf(t)
	if p := admin.post("/team/invitations", url.Values{"csrf": {csrf}, "email": {"nobody"}, "role": {"developer"}}); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, `id="invite-error"`) || !strings.Contains(p.body, `value="nobody"`) {
		t.Errorf("inviting a bad email: %d\n%s", p.status, p.body)
	}
	p = admin.post("/team/invitations", url.Values{"csrf": {csrf}, "email": {"ann@dashteam.test"}, "role": {"developer"}})
	m := joinLink.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil || !strings.Contains(p.body, `data-invitation="ann@dashteam.test"`) {
		t.Fatalf("inviting ann: %d\n%s", p.status, p.body)
	}
	link, err := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
	if err != nil || link.Path != "/join" || !strings.HasPrefix(link.Query().Get("code"), "bexinv_") {
		t.Fatalf("join link %q (%v)", m[1], err)
	}
	code := link.Query().Get("code")
	if p := admin.get("/team"); strings.Contains(p.body, code) {
		t.Error("the team page shows the invitation's code again")
	}

	// Ann joins through the link.
	ann := newUser(t, srv.URL)
	form := ann.anonymousForm("/join?code="+url.QueryEscape(code), "bex_join", "/join")
	if !strings.Contains(newUser(t, srv.URL).get("/join?code="+url.QueryEscape(code)).body, `value="`+code+`"`) {
		t.Error("the join page does not fill in the link's code")
	}
	if p := newUser(t, srv.URL).post("/join", url.Values{"code": {code}}); p.status != http.StatusForbidden {
		t.Errorf("joining without the form's CSRF secret: %d, want 403", p.status)
	}
	form.Set("code", code)
	p = ann.post("/join", form)
	tm := firstTok.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || tm == nil || !strings.Contains(p.body, "You joined dashteam as ann@dashteam.test, developer") {
		t.Fatalf("joining: %d\n%s", p.status, p.body)
	}
	ann.keepSession(p)
	if p := ann.get("/apps"); p.status != http.StatusOK || !strings.Contains(p.body, `id="create-app"`) {
		t.Errorf("the new developer's apps page: %d\n%s", p.status, p.body)
	}
	again := newUser(t, srv.URL)
	form = again.anonymousForm("/join", "bex_join", "/join")
	form.Set("code", code)
	if p := again.post("/join", form); p.status != http.StatusNotFound || !strings.Contains(p.body, "unknown, used, revoked or expired") {
		t.Errorf("joining with the used code: %d\n%s", p.status, p.body)
	}

	// A developer sees the team, changes nothing of it.
	p = ann.get("/team")
	if !strings.Contains(p.body, `data-member="ann@dashteam.test"`) || strings.Contains(p.body, `id="invite-form"`) || strings.Contains(p.body, "data-set-role") {
		t.Errorf("the developer's team page:\n%s", p.body)
	}
	if p := ann.post("/team/invitations", url.Values{"csrf": {p.csrf(t)}, "email": {"eve@dashteam.test"}, "role": {"admin"}}); p.status != http.StatusForbidden || !strings.Contains(p.body, "needs the admin role") {
		t.Errorf("a developer inviting: %d\n%s", p.status, p.body)
	}

	// Tokens: made, shown once, listed without it, revoked.
	p = ann.get("/tokens")
	p = ann.post("/tokens", url.Values{"csrf": {p.csrf(t)}, "name": {"laptop"}, "scope": {"write"}, "expires": {"30"}})
	sm := secretTok.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || sm == nil || !strings.Contains(p.body, `data-token="laptop"`) {
		t.Fatalf("making a token: %d\n%s", p.status, p.body)
	}
	laptop := sm[1]
	if p := ann.get("/tokens"); strings.Contains(p.body, laptop) || !strings.Contains(p.body, "<code>"+laptop[:8]+"…</code>") {
		t.Errorf("the token list shows the secret, or not its prefix:\n%s", p.body)
	}
	if p := ann.post("/tokens", url.Values{"csrf": {csrf}, "name": {""}}); p.status != http.StatusForbidden {
		t.Errorf("a form with another session's CSRF secret: %d", p.status)
	}
	cl, err := apiclient.New(e.URL, laptop, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := cl.ListTokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, tk := range ts {
		if tk.Name == "laptop" {
			id = tk.ID
		}
	}
	p = ann.get("/tokens")
	if p := ann.post("/tokens/"+id+"/revoke", url.Values{"csrf": {p.csrf(t)}}); p.status != http.StatusSeeOther {
		t.Fatalf("revoking: %d\n%s", p.status, p.body)
	}
	if _, err := cl.WhoAmI(t.Context()); !apiclient.IsStatus(err, http.StatusUnauthorized) {
		t.Errorf("the revoked token: err = %v, want 401", err)
	}

	// The admin makes ann a viewer: her pages offer no change, and the API
	// refuses a forged one.
	p = admin.get("/team")
	if !strings.Contains(p.body, `data-set-role="ann@dashteam.test"`) {
		t.Fatalf("the admin's team page lacks ann's role form:\n%s", p.body)
	}
	if p := admin.post("/team/members/ann@dashteam.test/role", url.Values{"csrf": {csrf}, "role": {"viewer"}}); p.status != http.StatusSeeOther {
		t.Fatalf("setting ann's role: %d\n%s", p.status, p.body)
	}
	p = ann.get("/apps/shop")
	for _, form := range []string{`id="restart-app"`, `id="scale-app"`, `id="app-settings"`, `id="env-form"`, `action="/apps/shop/delete"`} {
		if strings.Contains(p.body, form) {
			t.Errorf("the viewer's app page offers %s", form)
		}
	}
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="env-hidden"`) {
		t.Errorf("the viewer's app page: %d\n%s", p.status, p.body)
	}
	if p := ann.get("/apps"); strings.Contains(p.body, `id="create-app"`) || !strings.Contains(p.body, "dashteam · viewer") {
		t.Errorf("the viewer's apps page:\n%s", p.body)
	}
	if p := ann.post("/apps/shop/restart", url.Values{"csrf": {p.csrf(t)}}); p.status != http.StatusForbidden || !strings.Contains(p.body, "needs the developer role") {
		t.Errorf("a viewer's forged restart: %d\n%s", p.status, p.body)
	}

	// Removed, her session ends.
	if p := admin.post("/team/members/ann@dashteam.test/remove", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("removing ann: %d\n%s", p.status, p.body)
	}
	if p := ann.get("/apps"); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "Sign in again") {
		t.Errorf("the removed member's next page: %d\n%s", p.status, p.body)
	}
}
