package api_test

import (
	"net/http"
	"strings"
	"testing"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestAppMaintenancePage: PATCH /apps/{app} stores maintenancePage in the
// App's spec (up to 65536 bytes, however JSON escapes it), GET answers it
// and a list of apps its size only; a page over the limit or not a string
// is a 422 naming maintenancePage and the limit that changes neither the
// spec nor the audit log; "" removes the page; each change is audited as
// app.update naming maintenancePage, without the page.
func TestAppMaintenancePage(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	tenant, token := e.TenantToken(t, "pages")
	createApp(t, e, token, "shop")
	viewer := e.Member(t, token, "vic@pages.test", "viewer")

	page := "<!doctype html><h1>Closed for stock-taking</h1><p>Back at noon &amp; open till late.</p>"
	a := call(t, e, http.MethodPatch, "/apps/shop", token, apiclient.UpdateAppRequest{MaintenancePage: &page})
	wantStatus(t, "setting a maintenance page", a, http.StatusOK)
	var got apiclient.App
	a.decode(t, &got)
	if got.MaintenancePage != page || got.MaintenancePageBytes != len(page) {
		t.Errorf("answer: page %q (%d bytes), want %q", got.MaintenancePage, got.MaintenancePageBytes, page)
	}
	if spec := appSpec(t, e, "pages", "shop"); spec.MaintenancePage != page || spec.Suspended {
		t.Errorf("the App's spec: page %q, suspended %v", spec.MaintenancePage, spec.Suspended)
	}
	var get apiclient.App
	call(t, e, http.MethodGet, "/apps/shop", viewer, nil).decode(t, &get)
	if get.MaintenancePage != page || get.MaintenancePageBytes != len(page) {
		t.Errorf("GET: page %q (%d bytes)", get.MaintenancePage, get.MaintenancePageBytes)
	}
	var list []apiclient.App
	call(t, e, http.MethodGet, "/apps", token, nil).decode(t, &list)
	if len(list) != 1 || list[0].MaintenancePage != "" || list[0].MaintenancePageBytes != len(page) {
		t.Errorf("list of apps: %+v, want the page's size alone", list)
	}

	auditBefore := countRows(t, e, "audit_log")
	for _, tc := range []struct {
		name string
		body any
		want string
	}{
		{"one byte over", map[string]any{"maintenancePage": strings.Repeat("a", apiclient.MaxMaintenancePage+1)}, "maintenancePage has 65537 bytes: a maintenance page is at most 65536 bytes (64 KiB)"},
		{"over in characters of two bytes", map[string]any{"maintenancePage": strings.Repeat("é", apiclient.MaxMaintenancePage/2+1)}, "at most 65536 bytes"},
		{"over with other settings", map[string]any{"maintenance": true, "maintenancePage": strings.Repeat("<", apiclient.MaxMaintenancePage+1)}, "at most 65536 bytes"},
		{"not a string", map[string]any{"maintenancePage": 3}, "maintenancePage is a string"},
		{"an object", map[string]any{"maintenancePage": map[string]any{"url": "http://169.254.169.254/"}}, "maintenancePage is a string"},
	} {
		a := call(t, e, http.MethodPatch, "/apps/shop", token, tc.body)
		if a.status != http.StatusUnprocessableEntity || a.err().Field != "maintenancePage" || !strings.Contains(a.err().Message, tc.want) {
			t.Errorf("%s: %d %.300s, want 422 on maintenancePage saying %q", tc.name, a.status, a.body, tc.want)
		}
	}
	if spec := appSpec(t, e, "pages", "shop"); spec.MaintenancePage != page || spec.Suspended {
		t.Errorf("refused pages changed the spec: page %.80q, suspended %v", spec.MaintenancePage, spec.Suspended)
	}
	if n := countRows(t, e, "audit_log"); n != auditBefore {
		t.Errorf("audit_log has %d rows after refused pages, want %d", n, auditBefore)
	}

	// The limit is on the bytes of the page, not of its JSON: every '<'
	// travels as \u003c.
	full := strings.Repeat("<", apiclient.MaxMaintenancePage)
	a = call(t, e, http.MethodPatch, "/apps/shop", token, apiclient.UpdateAppRequest{MaintenancePage: &full})
	wantStatus(t, "a page of 65536 bytes", a, http.StatusOK)
	if spec := appSpec(t, e, "pages", "shop"); spec.MaintenancePage != full {
		t.Errorf("the App's spec holds a page of %d bytes, want %d", len(spec.MaintenancePage), len(full))
	}

	none := ""
	a = call(t, e, http.MethodPatch, "/apps/shop", token, apiclient.UpdateAppRequest{MaintenancePage: &none})
	wantStatus(t, "removing the maintenance page", a, http.StatusOK)
	got = apiclient.App{}
	a.decode(t, &got)
	if got.MaintenancePage != "" || got.MaintenancePageBytes != 0 {
		t.Errorf("after removing: page %q (%d bytes)", got.MaintenancePage, got.MaintenancePageBytes)
	}
	if spec := appSpec(t, e, "pages", "shop"); spec.MaintenancePage != "" {
		t.Errorf("the App's spec keeps a page of %d bytes", len(spec.MaintenancePage))
	}

	var updates []string
	for _, en := range auditActions(t, e, tenant.ID) {
		if en.Action == "app.update" {
			updates = append(updates, string(en.Details))
		}
	}
	if len(updates) != 3 || strings.Contains(strings.Join(updates, " "), "stock-taking") {
		t.Errorf("app.update audit entries = %q, want 3 without the page", updates)
	}
	for _, u := range updates {
		if !strings.Contains(u, `"changed": ["maintenancePage"]`) {
			t.Errorf("app.update audit entry %s does not name maintenancePage", u)
		}
	}
}
