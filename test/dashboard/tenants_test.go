package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard/dashboardtest"
)

// TestConsoleTenantMembers: in Chromium, the operator opens the console's
// Tenants page, follows a tenant's link and reads its members — by email,
// with their roles and when they joined, and no token — but not another
// tenant's; an unknown tenant is a 404, and a tenant gets 403.
func TestConsoleTenantMembers(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	base := dashboardtest.Start(t, e).URL
	_, machine := e.TenantToken(t, "acme")
	_, other := e.TenantToken(t, "globex")
	ann := e.Member(t, machine, "ann@acme.test", "admin")
	bob := e.Member(t, ann, "bob@acme.test", "developer")
	e.Member(t, ann, "cat@acme.test", "viewer")
	e.Member(t, other, "dan@globex.test", "admin")

	b := newBrowser(t)
	if st := b.signIn(base, e.OperatorToken); st != http.StatusOK {
		t.Fatalf("signing in as the operator: status %d", st)
	}
	if st := b.clickAndLoad("opening Tenants from the console's menu", `nav a[href="/console/tenants"]`); st != http.StatusOK {
		t.Fatalf("the Tenants page: status %d", st)
	}
	if got := b.text("#tenants tbody"); !strings.Contains(got, "acme") || !strings.Contains(got, "globex") {
		t.Errorf("the Tenants page lists %q, want acme and globex", got)
	}
	if st := b.clickAndLoad("opening acme", `#tenants tr[data-tenant="acme"] a`); st != http.StatusOK || b.location() != base+"/console/tenants/acme" {
		t.Fatalf("acme's view: status %d at %s", st, b.location())
	}
	const rows = `[...document.querySelectorAll('#members tbody tr')].map(tr => [...tr.cells].slice(0, 3).map(c => c.innerText.trim()).join(' | ')).join('\n')`
	lines := strings.Split(eval[string](b, rows), "\n")
	want := []string{"ann@acme.test | admin | ", "bob@acme.test | developer | ", "cat@acme.test | viewer | "}
	if len(lines) != len(want) {
		t.Fatalf("acme's members:\n%s\nwant %d rows", strings.Join(lines, "\n"), len(want))
	}
	for i, w := range want {
		joined, ok := strings.CutPrefix(lines[i], w)
		if !ok || !strings.HasSuffix(joined, " UTC") {
			t.Errorf("member row %q, want it to start %q and end with when they joined", lines[i], w)
		}
	}
	if h := b.text("#members-heading"); h != "Members (3)" {
		t.Errorf("the members' heading %q", h)
	}
	page := b.text("main")
	for _, secret := range []string{machine, ann, bob, ann[:12], "dan@globex.test"} {
		if strings.Contains(page, secret) {
			t.Errorf("acme's view shows %q", secret)
		}
	}
	if html := eval[string](b, "document.documentElement.outerHTML"); strings.Contains(html, "bex_") {
		t.Error("acme's view holds a token")
	}
	b.screenshot("console-tenant-members")

	if st := b.open(base + "/console/tenants/nope"); st != http.StatusNotFound {
		t.Errorf("an unknown tenant's view: status %d, want 404", st)
	}
	b.signOut()
	if st := b.signIn(base, ann); st != http.StatusOK {
		t.Fatalf("signing in as ann: status %d", st)
	}
	for _, path := range []string{"/console/tenants", "/console/tenants/acme"} {
		if st := b.open(base + path); st != http.StatusForbidden {
			t.Errorf("a tenant opening %s: status %d, want 403", path, st)
		}
	}
}
