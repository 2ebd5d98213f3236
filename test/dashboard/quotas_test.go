package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard/dashboardtest"
)

// quotaRows is the text of a page's quota table, a line per quota with
// its cells joined by " | ".
const quotaRows = `[...document.querySelectorAll('#quota-list tbody tr')].map(tr => [...tr.cells].map(c => c.innerText.trim()).join(' | ')).join('\n')`

// TestConsoleTenantQuotas: in Chromium, the operator opens a tenant's
// view from the console, reads its quotas (all the platform's defaults),
// types a memory quota without its unit and gets the form back with what
// to type and nothing changed, then sets memory and apps; the rows say
// they are the operator's, beside the defaults. The tenant's admin then
// reads the new quotas, with what the tenant uses, on the Team page.
func TestConsoleTenantQuotas(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	base := dashboardtest.Start(t, e).URL
	_, machine := e.TenantToken(t, "acme")
	ann := e.Member(t, machine, "ann@acme.test", "admin")

	b := newBrowser(t)
	if st := b.signIn(base, e.OperatorToken); st != http.StatusOK {
		t.Fatalf("signing in as the operator: status %d", st)
	}
	b.clickAndLoad("opening Tenants from the console's menu", `nav a[href="/console/tenants"]`)
	if st := b.clickAndLoad("opening acme", `#tenants tr[data-tenant="acme"] a`); st != http.StatusOK {
		t.Fatalf("acme's view: status %d", st)
	}
	rows := eval[string](b, quotaRows)
	for _, want := range []string{"Apps apps | 25 | default | 25 | 0", "CPU cpu | 16 CPUs | default | 16 CPUs | 0 CPUs", "Memory memory | 32 GiB | default | 32 GiB | 0 bytes"} {
		if !strings.Contains(rows, want) {
			t.Errorf("acme's quotas:\n%s\nwant a row %q", rows, want)
		}
	}

	b.do("typing a memory quota without its unit", chromedp.SetValue(chromedp.CSS(`#quota-form input[name=memory]`), "64"),
		chromedp.SetValue(chromedp.CSS(`#quota-form input[name=apps]`), "40"))
	if st := b.clickAndLoad("saving", "#save-quotas"); st != http.StatusUnprocessableEntity {
		t.Errorf("saving memory=64: status %d, want 422", st)
	}
	if got := b.text("#quota-error"); got != "Nothing was changed: fix memory below." {
		t.Errorf("the form's error %q", got)
	}
	if got := b.text(`[data-quota-error="memory"]`); got != `"64" has no unit: give one, such as 64Gi or 64Mi` {
		t.Errorf("memory's error %q", got)
	}
	if got := eval[string](b, `document.querySelector('#quota-form input[name=apps]').value`); got != "40" {
		t.Errorf("the form lost apps=40: %q", got)
	}
	if rows := eval[string](b, quotaRows); !strings.Contains(rows, "Apps apps | 25 | default") {
		t.Errorf("a refused form changed the quotas:\n%s", rows)
	}

	b.do("typing the unit", chromedp.SetValue(chromedp.CSS(`#quota-form input[name=memory]`), "64Gi"))
	if st := b.clickAndLoad("saving", "#save-quotas"); st != http.StatusOK || b.location() != base+"/console/tenants/acme?notice=Set+the+quotas+of+tenant+acme." {
		t.Fatalf("saving memory=64Gi apps=40: status %d at %s", st, b.location())
	}
	rows = eval[string](b, quotaRows)
	for _, want := range []string{"Apps apps | 40 | operator | 25 | 0", "Memory memory | 64 GiB | operator | 32 GiB | 0 bytes", "CPU cpu | 16 CPUs | default"} {
		if !strings.Contains(rows, want) {
			t.Errorf("acme's quotas after the change:\n%s\nwant a row %q", rows, want)
		}
	}
	b.screenshot("console-tenant-quotas")

	b.signOut()
	if st := b.signIn(base, ann); st != http.StatusOK {
		t.Fatalf("signing in as ann: status %d", st)
	}
	if st := b.clickAndLoad("opening Team", `nav a[href="/team"]`); st != http.StatusOK {
		t.Fatalf("the Team page: status %d", st)
	}
	rows = eval[string](b, quotaRows)
	for _, want := range []string{"Apps apps | 40 | 0", "Memory memory | 64 GiB | 0 bytes", "CPU cpu | 16 CPUs | 0 CPUs"} {
		if !strings.Contains(rows, want) {
			t.Errorf("ann's Team page quotas:\n%s\nwant a row %q", rows, want)
		}
	}
	b.do("scrolling to the quotas", chromedp.ScrollIntoView(chromedp.CSS("#quotas")))
	b.screenshot("team-quotas")
}
