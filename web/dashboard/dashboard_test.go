package dashboard_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard/dashboardtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// user is a browser without JavaScript: a cookie jar that does not follow
// redirects.
type user struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newUser(t *testing.T, base string) *user {
	jar, _ := cookiejar.New(nil)
	return &user{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	body   string
	header http.Header
}

func (u *user) get(path string) page {
	u.t.Helper()
	resp, err := u.c.Get(u.base + path)
	if err != nil {
		u.t.Fatal(err)
	}
	return read(u.t, resp)
}

func (u *user) post(path string, form url.Values) page {
	u.t.Helper()
	return u.postWith(path, form, nil)
}

// postWith sends a form with extra headers, such as the ones a browser
// adds to a cross-site request.
func (u *user) postWith(path string, form url.Values, header http.Header) page {
	u.t.Helper()
	req, err := http.NewRequest(http.MethodPost, u.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		u.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := u.c.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	return read(u.t, resp)
}

// signInForm opens the sign-in page as a browser does and returns the
// form's fields: its CSRF secret, whose cookie u now holds, and next.
func (u *user) signInForm(next string) url.Values {
	u.t.Helper()
	form := u.anonymousForm("/signin?next="+url.QueryEscape(next), "bex_signin", "/signin")
	form.Set("next", next)
	return form
}

// anonymousForm opens a page whose form has no session yet (sign-in,
// join) as a browser does and returns the form's CSRF secret, whose
// cookie (name, for path) u now holds (sent by hand over plain HTTP, as a
// browser does to a loopback address).
func (u *user) anonymousForm(page, name, path string) url.Values {
	u.t.Helper()
	p := u.get(page)
	for _, ck := range (&http.Response{Header: p.header}).Cookies() {
		if ck.Name == name {
			u.c.Jar.SetCookies(mustURL(u.t, u.base+path), []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: path}})
		}
	}
	return url.Values{"csrf": {p.csrf(u.t)}}
}

// sessionCookie keeps the session cookie a sign-in answered with.
func (u *user) keepSession(p page) string {
	u.t.Helper()
	ck := strings.TrimPrefix(strings.Split(p.header.Get("Set-Cookie"), ";")[0], "bex_session=")
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "bex_session" {
			ck = c.Value
		}
	}
	u.c.Jar.SetCookies(mustURL(u.t, u.base), []*http.Cookie{{Name: "bex_session", Value: ck}})
	return ck
}

func read(t *testing.T, resp *http.Response) page {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{status: resp.StatusCode, body: string(b), header: resp.Header}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF secret from a page's forms.
func (p page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF field on the page:\n%s", p.body)
	}
	return m[1]
}

// startDashboard runs the API on a fresh control plane and the dashboard
// in front of it.
func startDashboard(t *testing.T) (*apitest.Env, *httptest.Server) {
	t.Helper()
	e := apitest.Start(t, cptest.Start(t))
	return e, dashboardtest.Start(t, e)
}

func TestDashboard(t *testing.T) {
	e, srv := startDashboard(t)
	ctx := t.Context()
	_, ann := e.TenantToken(t, "ann")
	_, bob := e.TenantToken(t, "bob")

	anon := newUser(t, srv.URL)
	if p := anon.get("/apps/shop"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/signin?next=%2Fapps%2Fshop" {
		t.Errorf("an anonymous GET /apps/shop = %d to %q, want 303 to the sign-in page", p.status, p.header.Get("Location"))
	}
	form := anon.signInForm("")
	form.Set("token", "bex_nope")
	if p := anon.post("/signin", form); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "refused") {
		t.Errorf("signing in with an unknown token = %d", p.status)
	}

	a := newUser(t, srv.URL)
	form = a.signInForm("https://evil.test/")
	form.Set("token", ann)
	p := a.post("/signin", form)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/apps" {
		t.Fatalf("signing in = %d to %q, want 303 to /apps (not the foreign next)", p.status, p.header.Get("Location"))
	}
	ck := p.header.Get("Set-Cookie")
	for _, attr := range []string{"bex_session=", "HttpOnly", "Secure", "SameSite=Lax", "Path=/"} {
		if !strings.Contains(ck, attr) {
			t.Errorf("the session cookie lacks %s: %s", attr, ck)
		}
	}
	if strings.Contains(ck, ann) {
		t.Error("the session cookie holds the token pasted")
	}
	// Secure cookies are not sent back over plain HTTP by a jar; send it
	// by hand, as a browser does to a loopback address.
	a.c.Jar, _ = cookiejar.New(nil)
	annCookie := a.keepSession(p)

	apps := a.get("/apps")
	if apps.status != http.StatusOK || !strings.Contains(apps.body, "No apps yet") {
		t.Fatalf("the apps page = %d:\n%s", apps.status, apps.body)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options"} {
		if apps.header.Get(h) == "" {
			t.Errorf("the page lacks %s", h)
		}
	}
	// A change without the session's CSRF secret is refused and changes
	// nothing.
	if p := a.post("/apps", url.Values{"name": {"shop"}}); p.status != http.StatusForbidden {
		t.Errorf("creating an app without the CSRF field = %d, want 403", p.status)
	}
	if p := a.post("/apps", url.Values{"name": {"shop"}, "csrf": {"forged"}}); p.status != http.StatusForbidden {
		t.Errorf("creating an app with a forged CSRF field = %d, want 403", p.status)
	}
	var list platformv1alpha1.AppList
	if err := e.Kube.List(ctx, &list, client.InNamespace("ann")); err != nil || len(list.Items) != 0 {
		t.Fatalf("apps after refused forms: %d, %v", len(list.Items), err)
	}
	csrf := apps.csrf(t)
	if p := a.post("/apps", url.Values{"name": {"Shop!"}, "csrf": {csrf}}); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, `id="create-error"`) {
		t.Errorf("a bad app name = %d, want 422 with the API's message on the form", p.status)
	}
	if p := a.post("/apps", url.Values{"name": {"shop"}, "csrf": {csrf}}); p.status != http.StatusSeeOther || p.header.Get("Location") != "/apps/shop" {
		t.Fatalf("creating shop = %d to %q", p.status, p.header.Get("Location"))
	}

	// The app page reads without JavaScript: remote, releases, builds.
	shop := a.get("/apps/shop")
	if shop.status != http.StatusOK || !strings.Contains(shop.body, apitest.GitBase+"/ann/shop.git") {
		t.Fatalf("the app page = %d:\n%s", shop.status, shop.body)
	}
	// Where the app runs and why, in the CLI's words: pending until the
	// scheduler looks, then the cluster and the Placed condition's message.
	for _, tc := range []struct {
		name    string
		place   func()
		cluster string
		why     string
	}{
		{name: "before the scheduler looked", place: func() {}, cluster: `<span class="badge pending" id="app-cluster">pending</span>`},
		{name: "placed", place: func() { e.PlaceApp(t, "ann", "shop", "alpha", true, "placed on alpha/workers (score 80, BinPack)") },
			cluster: `<span class="badge placed" id="app-cluster">alpha</span>`, why: "placed on alpha/workers (score 80, BinPack)"},
		{name: "no cluster fits", place: func() {
			e.PlaceApp(t, "ann", "shop", "", false, "No workload cluster can take the app: no pool has 4 CPU free")
		}, cluster: `<span class="badge not placed" id="app-cluster">none</span>`, why: "No workload cluster can take the app: no pool has 4 CPU free"},
	} {
		tc.place()
		p := a.get("/apps/shop")
		if want := tc.cluster + ` <span id="app-placement">` + tc.why + `</span>`; p.status != http.StatusOK || !strings.Contains(p.body, want) {
			t.Errorf("the app page %s = %d, want it to show %s:\n%s", tc.name, p.status, want, p.body)
		}
	}

	// Bob sees nothing of ann's; tenants get 403 on the console, and an
	// operator 403 on tenants' pages.
	b := newUser(t, srv.URL)
	signIn(t, b, bob)
	if p := b.get("/apps/shop"); p.status != http.StatusNotFound {
		t.Errorf("bob opening ann's app = %d, want 404", p.status)
	}
	if p := b.get("/apps"); strings.Contains(p.body, "shop") {
		t.Error("bob's app list shows ann's app")
	}
	if p := b.get("/apps/shop/builds/1"); p.status != http.StatusNotFound {
		t.Errorf("bob opening ann's build = %d, want 404", p.status)
	}
	bobApps := b.get("/apps")
	if p := b.post("/apps/shop/delete", url.Values{"confirm": {"shop"}, "csrf": {bobApps.csrf(t)}}); p.status != http.StatusNotFound {
		t.Errorf("bob deleting ann's app = %d, want 404", p.status)
	}
	if err := e.Kube.List(ctx, &list, client.InNamespace("ann")); err != nil || len(list.Items) != 1 {
		t.Fatalf("ann's apps after bob's attempt: %d, %v", len(list.Items), err)
	}
	if p := b.get("/console"); p.status != http.StatusForbidden {
		t.Errorf("a tenant opening the console = %d, want 403", p.status)
	}
	op := newUser(t, srv.URL)
	signIn(t, op, e.OperatorToken)
	if p := op.get("/apps"); p.status != http.StatusForbidden {
		t.Errorf("an operator opening /apps = %d, want 403", p.status)
	}
	console := op.get("/console")
	if console.status != http.StatusOK {
		t.Fatalf("the console = %d:\n%s", console.status, console.body)
	}

	// Pages are small: the heaviest page with its stylesheet and script
	// stays under 100 KB.
	assets := len(a.get("/static/style.css").body) + len(a.get("/static/app.js").body)
	for name, pg := range map[string]page{"apps": apps, "app": shop, "console": console, "audit": op.get("/console/audit")} {
		n := len(pg.body) + assets
		if n > 100<<10 {
			t.Errorf("the %s page weighs %d bytes with its assets, want under 100 KB", name, n)
		}
		t.Logf("the %s page: %d bytes, %d with its stylesheet and script", name, len(pg.body), n)
	}

	// Deleting needs the app's name typed again.
	if p := a.post("/apps/shop/delete", url.Values{"confirm": {"nope"}, "csrf": {csrf}}); p.status != http.StatusUnprocessableEntity {
		t.Errorf("deleting without the name = %d, want 422", p.status)
	}
	if p := a.post("/apps/shop/delete", url.Values{"confirm": {"shop"}, "csrf": {csrf}}); p.status != http.StatusSeeOther {
		t.Errorf("deleting = %d, want 303", p.status)
	}
	e.FinishAppDeletion(t, "ann", "shop")
	// A revoked token ends its session: the next page says so and drops
	// the cookie.
	tok, err := e.Store.AuthenticateToken(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.RevokeToken(ctx, tok.TenantID, tok.ID); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/apps"); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "no longer takes your token") || !strings.Contains(p.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("a page after the token was revoked = %d, cookie %q:\n%s", p.status, p.header.Get("Set-Cookie"), p.body)
	}

	// Signing out ends the session in the browser, and at the API: a
	// copy of the cookie no longer opens a page.
	if p := a.post("/signout", url.Values{"csrf": {csrf}}); p.status != http.StatusSeeOther || !strings.Contains(p.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("signing out = %d, cookie %q", p.status, p.header.Get("Set-Cookie"))
	}
	thief := newUser(t, srv.URL)
	thief.c.Jar.SetCookies(mustURL(t, srv.URL), []*http.Cookie{{Name: "bex_session", Value: annCookie}})
	if p := thief.get("/apps"); p.status == http.StatusOK || strings.Contains(p.body, "No apps yet") {
		t.Errorf("a copy of the cookie after signing out opened /apps: %d", p.status)
	}
	if p := thief.post("/apps", url.Values{"name": {"stolen"}, "csrf": {csrf}}); p.status == http.StatusSeeOther {
		t.Errorf("a copy of the cookie after signing out created an app: %d", p.status)
	}
	if err := e.Kube.List(ctx, &list, client.InNamespace("ann")); err != nil || len(list.Items) != 0 {
		t.Fatalf("ann's apps after the stolen cookie's attempt: %d, %v", len(list.Items), err)
	}
}

// TestSignInForgery: a sign-in sent from another site, or without the
// sign-in page's CSRF secret, opens no session; a next= that leads off
// the site falls back to the apps page.
func TestSignInForgery(t *testing.T) {
	e, srv := startDashboard(t)
	_, ann := e.TenantToken(t, "ann")

	u := newUser(t, srv.URL)
	form := u.signInForm("")
	form.Set("token", ann)
	for name, header := range map[string]http.Header{
		"a cross-site POST":                 {"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}},
		"a POST from another origin":        {"Origin": {"https://evil.example"}},
		"a POST from a same-site subdomain": {"Sec-Fetch-Site": {"same-site"}},
	} {
		if p := u.postWith("/signin", form, header); p.status != http.StatusForbidden || strings.Contains(p.header.Get("Set-Cookie"), "bex_session=") {
			t.Errorf("%s to /signin = %d, cookie %q; want 403 and no session", name, p.status, p.header.Get("Set-Cookie"))
		}
	}
	// Without the form's secret, or with another one.
	noCSRF := newUser(t, srv.URL)
	if p := noCSRF.post("/signin", url.Values{"token": {ann}}); p.status != http.StatusForbidden || strings.Contains(p.header.Get("Set-Cookie"), "bex_session=") {
		t.Errorf("a sign-in without the form's CSRF secret = %d, want 403 and no session", p.status)
	}
	forged := url.Values{"token": {ann}, "csrf": {"forged"}}
	if p := u.post("/signin", forged); p.status != http.StatusForbidden {
		t.Errorf("a sign-in with a forged CSRF secret = %d, want 403", p.status)
	}

	for _, next := range []string{"/%09/evil.example", "/\t/evil.example", "//evil.example", "/\\evil.example", "https://evil.example", "/%5C/evil.example"} {
		u := newUser(t, srv.URL)
		form := u.signInForm(next)
		form.Set("token", ann)
		if p := u.post("/signin", form); p.status != http.StatusSeeOther || p.header.Get("Location") != "/apps" {
			t.Errorf("signing in with next=%q = %d to %q, want 303 to /apps", next, p.status, p.header.Get("Location"))
		}
	}
	u = newUser(t, srv.URL)
	form = u.signInForm("/apps/shop?tab=env")
	form.Set("token", ann)
	if p := u.post("/signin", form); p.header.Get("Location") != "/apps/shop?tab=env" {
		t.Errorf("signing in with a next of this site went to %q", p.header.Get("Location"))
	}
}

// signIn signs u in with token and keeps the session cookie.
func signIn(t *testing.T, u *user, token string) {
	t.Helper()
	form := u.signInForm("")
	form.Set("token", token)
	p := u.post("/signin", form)
	if p.status != http.StatusSeeOther {
		t.Fatalf("signing in = %d:\n%s", p.status, p.body)
	}
	u.keepSession(p)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
