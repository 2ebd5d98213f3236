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

// memberRows is the text of the console's member table, a line per member:
// email and role.
const memberRows = `[...document.querySelectorAll('#members tbody tr')].map(tr => tr.dataset.member + ' ' + tr.querySelector('.role').innerText.trim()).join(', ')`

// TestConsoleTenantMemberChanges: in Chromium, the operator recovers a tenant
// whose only admin is gone. Demoting and removing that admin come back on
// the page with why, on the member's row, and change nothing; an invite
// of a malformed email comes back under the email field with what was
// typed; the operator invites a new admin and gets the code once, the
// invitee joins with it; an invitation sent by mistake is revoked on its
// row and its code no longer joins; the operator removes the old admin.
func TestConsoleTenantMemberChanges(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	base := dashboardtest.Start(t, e).URL
	_, machine := e.TenantToken(t, "acme")
	e.Member(t, machine, "ann@acme.test", "admin")

	b := newBrowser(t)
	if st := b.signIn(base, e.OperatorToken); st != http.StatusOK {
		t.Fatalf("signing in as the operator: status %d", st)
	}
	if st := b.open(base + "/console/tenants/acme"); st != http.StatusOK {
		t.Fatalf("acme's view: status %d", st)
	}
	if got := eval[string](b, memberRows); got != "ann@acme.test admin" {
		t.Fatalf("acme's members: %q", got)
	}

	// The last admin stays admin, and stays.
	const lastAdmin = "ann@acme.test is the tenant's last admin: make another member admin first"
	b.do("choosing developer for ann", chromedp.SetValue(chromedp.CSS(`tr[data-member="ann@acme.test"] select[name=role]`), "developer"))
	if st := b.clickAndLoad("demoting ann", `button[data-set-role="ann@acme.test"]`); st != http.StatusConflict {
		t.Errorf("demoting the last admin: status %d, want 409", st)
	}
	if got := b.text("#member-error"); got != "Role not changed: "+lastAdmin {
		t.Errorf("the page's error %q", got)
	}
	if got := b.text(`[data-member-error="ann@acme.test"]`); got != lastAdmin {
		t.Errorf("ann's row says %q", got)
	}
	if st := b.clickAndLoad("removing ann", `button[data-remove="ann@acme.test"]`); st != http.StatusConflict || b.text("#member-error") != "Not removed: "+lastAdmin {
		t.Errorf("removing the last admin: status %d, page error %q", st, b.text("#member-error"))
	}
	if got := eval[string](b, memberRows); got != "ann@acme.test admin" {
		t.Errorf("refusals changed the members: %q", got)
	}

	// A malformed email comes back under its field; nobody is invited.
	b.do("typing a malformed email", chromedp.SetAttributeValue(chromedp.CSS(`#invite-form input[name=email]`), "type", "text"),
		chromedp.SetValue(chromedp.CSS(`#invite-form input[name=email]`), "cat"))
	if st := b.clickAndLoad("inviting cat", "#invite"); st != http.StatusUnprocessableEntity {
		t.Errorf("inviting %q: status %d, want 422", "cat", st)
	}
	if got := b.text(`[data-invite-error="email"]`); got != `email "cat": want an address such as ann@example.com` {
		t.Errorf("the email field's error %q", got)
	}
	if got := eval[string](b, `document.querySelector('#invite-form input[name=email]').value`); got != "cat" {
		t.Errorf("the form lost what was typed: %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll('#invitation-list tbody tr').length`); n != 0 {
		t.Errorf("a refused invitation is pending: %d rows", n)
	}

	// A new admin: the code is shown once, the invitee joins with it.
	invite(t, b, "cat@acme.test", "admin", "#invite")
	code := eval[string](b, `document.querySelector('#invite-code').value`)
	if !strings.HasPrefix(code, "bexinv_") || !strings.Contains(b.text(`#invitation-list tr[data-invitation="cat@acme.test"]`), "ops@bex.test") {
		t.Fatalf("after the invitation: code %q, page %q", code, b.text("main"))
	}
	b.screenshot("console-tenant-member-invite")
	anyone, err := apiclient.New(e.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anyone.AcceptInvitation(t.Context(), apiclient.AcceptInvitationRequest{Code: code}); err != nil {
		t.Fatalf("cat joining with the code: %v", err)
	}

	// An invitation sent by mistake, revoked on its row: its code no
	// longer joins.
	b.open(base + "/console/tenants/acme")
	invite(t, b, "dan@acme.test", "viewer", "#invite")
	danCode := eval[string](b, `document.querySelector('#invite-code').value`)
	if st := b.clickAndLoad("revoking dan's invitation", `button[data-revoke-invitation="dan@acme.test"]`); st != http.StatusOK ||
		b.text("#notice") != "Invitation revoked: its code no longer works." {
		t.Errorf("revoking dan's invitation: status %d, notice %q", st, b.text("#notice"))
	}
	if n := eval[int](b, `document.querySelectorAll('#invitation-list tr[data-invitation="dan@acme.test"]').length`); n != 0 {
		t.Error("dan's revoked invitation is still listed")
	}
	if _, err := anyone.AcceptInvitation(t.Context(), apiclient.AcceptInvitationRequest{Code: danCode}); err == nil {
		t.Error("dan joined with a revoked code")
	}

	// The old admin removed.
	b.open(base + "/console/tenants/acme")
	if st := b.clickAndLoad("removing ann", `button[data-remove="ann@acme.test"]`); st != http.StatusOK ||
		b.text("#notice") != "Removed ann@acme.test: their tokens, sessions and SSH keys no longer work." {
		t.Errorf("removing ann: status %d, notice %q", st, b.text("#notice"))
	}
	if got := eval[string](b, memberRows); got != "cat@acme.test admin" {
		t.Errorf("acme's members after the recovery: %q", got)
	}
}

// invite fills the page's invite form with email and role and sends it
// with the button sel, wanting the page back with the invitation.
func invite(t *testing.T, b *browser, email, role, sel string) {
	t.Helper()
	b.do("typing "+email, chromedp.SetValue(chromedp.CSS(`#invite-form input[name=email]`), email),
		chromedp.SetValue(chromedp.CSS(`#invite-form select[name=role]`), role))
	if st := b.clickAndLoad("inviting "+email, sel); st != http.StatusOK {
		t.Fatalf("inviting %s: status %d: %s", email, st, b.text("main"))
	}
}
