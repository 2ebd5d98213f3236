package dashboard_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// quotaRow reads the quota row of a page's quota table: its cells' text,
// and the value of its input when it has one.
func quotaRow(t *testing.T, p page, key string) (cells []string, input string) {
	t.Helper()
	row := between(p.body, `<tr data-quota="`+key+`">`, "</tr>")
	if row == "" {
		t.Fatalf("no quota row %s in the page:\n%s", key, p.body)
	}
	for _, m := range regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(row, -1) {
		cells = append(cells, strings.TrimSpace(html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], ""))))
	}
	if m := regexp.MustCompile(`<input name="` + key + `" value="([^"]*)"`).FindStringSubmatch(row); m != nil {
		input = html.UnescapeString(m[1])
	}
	return cells, input
}

// storedQuotas returns the quotas the operator set for the tenant, as the
// store holds them, in JSON.
func storedQuotas(t *testing.T, s *store.Store, tenantID string) string {
	t.Helper()
	o, err := s.TenantQuotas(t.Context(), tenantID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(o)
	return string(b)
}

// TestQuotaPages: a tenant's team page shows each quota with its use, cpu
// and memory as bex quota prints them; the operator's view of the tenant
// shows where each comes from and the default, and its form sets and
// clears overrides, audited as the API's admin quota call; values that
// cannot be read (negative, not a number, a size without its unit, a
// unit that is not one) come back on the form with what to type and
// change nothing; a forged form and a tenant's post are refused.
func TestQuotaPages(t *testing.T) {
	e, srv := startDashboard(t)
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "dashquota")
	member := newUser(t, srv.URL)
	signIn(t, member, token)
	if p := member.post("/apps", url.Values{"csrf": {member.get("/apps").csrf(t)}, "name": {"shop"}}); p.status != http.StatusSeeOther {
		t.Fatalf("creating shop: %d\n%s", p.status, p.body)
	}
	op := newUser(t, srv.URL)
	signIn(t, op, e.OperatorToken)
	overrides := func() string { t.Helper(); return storedQuotas(t, e.Store, tenant.ID) }
	wantCells := func(what string, p page, key string, want ...string) {
		t.Helper()
		cells, _ := quotaRow(t, p, key)
		if strings.Join(cells[1:1+len(want)], "|") != strings.Join(want, "|") {
			t.Errorf("%s: row %s = %q, want %q after the name", what, key, cells, want)
		}
	}

	// The tenant's team page.
	p := member.get("/team")
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="quota-list"`) {
		t.Fatalf("team page: %d\n%s", p.status, p.body)
	}
	wantCells("team page", p, "apps", "25", "1")
	wantCells("team page", p, "cpu", "16 CPUs", "0 CPUs")
	wantCells("team page", p, "memory", "32 GiB", "0 bytes")
	if strings.Contains(p.body, `id="quota-form"`) {
		t.Error("the tenant's team page has the operator's quota form")
	}

	// The operator's view: all defaults.
	p = op.get("/console/tenants/dashquota")
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="quota-form"`) {
		t.Fatalf("console tenant page: %d\n%s", p.status, p.body)
	}
	wantCells("console", p, "memory", "32 GiB", "default", "32 GiB", "0 bytes")
	csrf := p.csrf(t)

	// A forged form (no CSRF secret) and a tenant's post change nothing.
	if p := op.post("/console/tenants/dashquota/quota", url.Values{"apps": {"99"}}); p.status != http.StatusForbidden {
		t.Errorf("a quota form without the CSRF secret: %d, want 403", p.status)
	}
	if p := member.post("/console/tenants/dashquota/quota", url.Values{"csrf": {member.get("/team").csrf(t)}, "apps": {"99"}}); p.status != http.StatusForbidden {
		t.Errorf("a tenant's quota form: %d, want 403", p.status)
	}
	if got := overrides(); got != "{}" {
		t.Fatalf("refused forms set %s", got)
	}

	// Set three.
	p = op.post("/console/tenants/dashquota/quota", url.Values{"csrf": {csrf}, "apps": {"40"}, "memory": {"64 GiB"}, "cpu": {"2.5"}, "routes": {"default"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/tenants/dashquota?notice="+url.QueryEscape("Set the quotas of tenant dashquota.") {
		t.Fatalf("setting quotas: %d %s\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if got, want := overrides(), `{"apps":40,"cpu":2500,"memory":68719476736}`; got != want {
		t.Errorf("stored %s, want %s", got, want)
	}
	p = op.get("/console/tenants/dashquota?notice=x")
	wantCells("console after the change", p, "apps", "40", "operator", "25", "1")
	wantCells("console after the change", p, "cpu", "2.5 CPUs", "operator", "16 CPUs", "0 CPUs")
	wantCells("console after the change", p, "routes", "100", "default", "100", "0")
	for key, want := range map[string]string{"apps": "40", "cpu": "2500m", "memory": "64Gi", "routes": ""} {
		if _, in := quotaRow(t, p, key); in != want {
			t.Errorf("the form's %s holds %q, want %q", key, in, want)
		}
	}
	p = member.get("/team")
	wantCells("team page after the change", p, "apps", "40", "1")
	wantCells("team page after the change", p, "cpu", "2.5 CPUs", "0 CPUs")
	wantCells("team page after the change", p, "memory", "64 GiB", "0 bytes")

	// Values that cannot be read: the form comes back with them and what to
	// type, and nothing changes, not even the value that could be read.
	before := overrides()
	p = op.post("/console/tenants/dashquota/quota", url.Values{"csrf": {csrf}, "apps": {"-1"}, "routes": {"many"}, "instances": {"10"},
		"cpu": {"4Gi"}, "memory": {"64"}, "repoBytes": {"2XB"}})
	if p.status != http.StatusUnprocessableEntity || html.UnescapeString(between(p.body, `id="quota-error">`, "</p>")) != "Nothing was changed: fix apps, routes, repoBytes, cpu, memory below." {
		t.Errorf("bad values: %d, error %q", p.status, between(p.body, `id="quota-error">`, "</p>"))
	}
	for key, want := range map[string]string{
		"apps":      `"-1" is negative: give a whole number from 0 to 2147483647, or default`,
		"routes":    `"many" is not a number`,
		"repoBytes": "the unit XB is not one bex knows",
		"cpu":       "the unit Gi is not one of CPU",
		"memory":    `"64" has no unit: give one, such as 64Gi or 64Mi`,
	} {
		if got := html.UnescapeString(between(p.body, `data-quota-error="`+key+`">`, "</div>")); !strings.Contains(got, want) {
			t.Errorf("the form's error for %s: %q, want %q", key, got, want)
		}
	}
	if _, in := quotaRow(t, p, "memory"); in != "64" {
		t.Errorf("the form lost what was typed for memory: %q", in)
	}
	if p := op.post("/console/tenants/dashquota/quota", url.Values{"csrf": {csrf}, "apps": {strings.Repeat("9", 40)}}); p.status != http.StatusUnprocessableEntity ||
		!strings.Contains(between(p.body, `data-quota-error="apps">`, "</div>"), "more than 32 characters") {
		t.Errorf("a 40-digit value: %d %q", p.status, between(p.body, `data-quota-error="apps">`, "</div>"))
	}
	if got := overrides(); got != before {
		t.Errorf("refused forms changed the overrides to %s, were %s", got, before)
	}

	// Clear them: the form with empty fields gives the defaults back.
	if p := op.post("/console/tenants/dashquota/quota", url.Values{"csrf": {csrf}, "apps": {""}, "cpu": {"default"}}); p.status != http.StatusSeeOther {
		t.Fatalf("clearing: %d\n%s", p.status, p.body)
	}
	if got := overrides(); got != "{}" {
		t.Errorf("after clearing: %s", got)
	}
	wantCells("console after clearing", op.get("/console/tenants/dashquota"), "apps", "25", "default", "25", "1")

	// An unknown tenant is the API's 404; each change was audited.
	if p := op.post("/console/tenants/nope/quota", url.Values{"csrf": {csrf}, "apps": {"1"}}); p.status != http.StatusNotFound {
		t.Errorf("an unknown tenant's quota form: %d, want 404", p.status)
	}
	entries, err := e.Store.ListAudit(ctx, store.AuditFilter{Action: "tenant.quota"})
	if err != nil {
		t.Fatal(err)
	}
	var ours int
	for _, entry := range entries {
		if entry.Target == "dashquota" {
			ours++
		}
	}
	if ours != 2 {
		t.Errorf("tenant.quota audit entries: %d, want 2 (set, clear)", ours)
	}
}

// quotaForm returns the console's quota form of a page as a browser sends
// it untouched: every input of the form, the hidden ones among them, with
// the value the page gave it.
func quotaForm(t *testing.T, p page) url.Values {
	t.Helper()
	form := between(p.body, `id="quota-form">`, "</form>")
	if form == "" {
		t.Fatalf("no quota form in the page:\n%s", p.body)
	}
	v := url.Values{}
	for _, in := range regexp.MustCompile(`<input ([^>]*)>`).FindAllStringSubmatch(form, -1) {
		name := regexp.MustCompile(`\bname="([^"]*)"`).FindStringSubmatch(in[1])
		if name == nil {
			continue
		}
		value := ""
		if m := regexp.MustCompile(`\bvalue="([^"]*)"`).FindStringSubmatch(in[1]); m != nil {
			value = html.UnescapeString(m[1])
		}
		v.Set(html.UnescapeString(name[1]), value)
	}
	return v
}

// TestQuotaFormKeepsConcurrentChanges: an operator's quota form sends only
// the quotas changed on it. Another operator's changes, made through the
// API (as bex admin quota set makes them) while the form was open, keep
// their values; the audit entry lists only the quota the form changed; a
// form changed in nothing writes nothing and says so; a refused form comes
// back with the other quotas as they are now, and its corrected save
// still keeps what was changed meanwhile.
func TestQuotaFormKeepsConcurrentChanges(t *testing.T) {
	e, srv := startDashboard(t)
	ctx := t.Context()
	tenant, _ := e.TenantToken(t, "dashconc")
	op := newUser(t, srv.URL)
	signIn(t, op, e.OperatorToken)
	other, err := apiclient.New(e.URL, e.OperatorToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(kv ...string) {
		t.Helper()
		p := apiclient.QuotaPatch{}
		for i := 0; i < len(kv); i += 2 {
			if err := p.Set(kv[i], kv[i+1]); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := other.PatchTenantQuota(ctx, "dashconc", p); err != nil {
			t.Fatalf("the other operator's patch %v: %v", kv, err)
		}
	}
	overrides := func() string { t.Helper(); return storedQuotas(t, e.Store, tenant.ID) }
	audits := func() []store.AuditEntry {
		t.Helper()
		entries, err := e.Store.ListAudit(ctx, store.AuditFilter{Action: "tenant.quota"})
		if err != nil {
			t.Fatal(err)
		}
		var ours []store.AuditEntry
		for _, entry := range entries {
			if entry.Target == "dashconc" {
				ours = append(ours, entry)
			}
		}
		return ours
	}
	const view = "/console/tenants/dashconc"
	saved := func(what string, p page, notice string) {
		t.Helper()
		if p.status != http.StatusSeeOther || p.header.Get("Location") != view+"?notice="+url.QueryEscape(notice) {
			t.Fatalf("%s: %d %s, want 303 with %q\n%s", what, p.status, p.header.Get("Location"), notice, p.body)
		}
	}
	patch("apps", "40", "memory", "64Gi")

	// The form is opened; the other operator changes memory and cpu; the
	// form changes apps only.
	form := quotaForm(t, op.get(view))
	if form.Get("memory") != "64Gi" || form.Get("apps") != "40" || form.Get("csrf") == "" {
		t.Fatalf("the form as opened: %v", form)
	}
	patch("memory", "128Gi", "cpu", "8")
	form.Set("apps", "50")
	saved("saving apps", op.post(view+"/quota", form), "Set the quotas of tenant dashconc.")
	if got, want := overrides(), `{"apps":50,"cpu":8000,"memory":137438953472}`; got != want {
		t.Errorf("after the form changed apps only: %s, want %s (apps from the form, cpu and memory as the other operator set them)", got, want)
	}
	entries := audits()
	if len(entries) != 3 {
		t.Fatalf("tenant.quota audit entries: %d, want 3 (two patches, the form)", len(entries))
	}
	var details struct{ Changes map[string]any }
	if err := json.Unmarshal(entries[0].Details, &details); err != nil || len(details.Changes) != 1 || details.Changes["apps"] != float64(50) {
		t.Errorf("the form's audit entry: %s, want the changes apps 50 only", entries[0].Details)
	}

	// A form saved as it was opened, or with a value typed as the same
	// quantity in another unit, changes nothing and says so.
	form = quotaForm(t, op.get(view))
	patch("routes", "7")
	before := overrides()
	form.Set("memory", "131072Mi")
	form.Set("cpu", "8000m")
	saved("saving the form unchanged", op.post(view+"/quota", form), "Nothing was changed: the form's quotas are those it showed.")
	if got := overrides(); got != before {
		t.Errorf("a form changed in nothing set %s, was %s", got, before)
	}
	if n := len(audits()); n != 4 {
		t.Errorf("tenant.quota audit entries: %d, want 4 (none for an unchanged form)", n)
	}

	// A refused form changes nothing; it comes back with what was typed
	// and the other quotas as they are now, and its corrected save keeps
	// what the other operator changed in between.
	form = quotaForm(t, op.get(view))
	patch("instances", "9")
	before = overrides()
	form.Set("apps", "-1")
	form.Set("memory", "1Gi")
	p := op.post(view+"/quota", form)
	if p.status != http.StatusUnprocessableEntity || html.UnescapeString(between(p.body, `id="quota-error">`, "</p>")) != "Nothing was changed: fix apps below." {
		t.Fatalf("a negative apps: %d, error %q", p.status, between(p.body, `id="quota-error">`, "</p>"))
	}
	if got := overrides(); got != before {
		t.Errorf("a refused form set %s, was %s", got, before)
	}
	back := quotaForm(t, p)
	if back.Get("apps") != "-1" || back.Get("memory") != "1Gi" || back.Get("instances") != "9" {
		t.Errorf("the refused form came back with apps %q, memory %q, instances %q; want -1 and 1Gi as typed, 9 as set meanwhile",
			back.Get("apps"), back.Get("memory"), back.Get("instances"))
	}
	patch("concurrentRuns", "5")
	back.Set("apps", "60")
	saved("saving the corrected form", op.post(view+"/quota", back), "Set the quotas of tenant dashconc.")
	if got := overrides(); got != `{"apps":60,"routes":7,"concurrentRuns":5,"instances":9,"cpu":8000,"memory":1073741824}` {
		t.Errorf("after the corrected form: %s, want apps 60 and memory 1Gi from the form, the rest as the other operator set it", got)
	}
}

// TestQuotaFormConflict: of two operators who open the quota form and
// change the same quota, the later save is refused (409), saves nothing,
// and comes back with that quota as it is now and why; the other quota it
// changed keeps what was typed, and a second save of the form as it came
// back saves it without undoing the first operator's memory.
func TestQuotaFormConflict(t *testing.T) {
	e, srv := startDashboard(t)
	ctx := t.Context()
	tenant, _ := e.TenantToken(t, "dashrace")
	a, b := newUser(t, srv.URL), newUser(t, srv.URL)
	signIn(t, a, e.OperatorToken)
	signIn(t, b, e.OperatorToken)
	overrides := func() string { t.Helper(); return storedQuotas(t, e.Store, tenant.ID) }
	audited := func() int {
		t.Helper()
		entries, err := e.Store.ListAudit(ctx, store.AuditFilter{Action: "tenant.quota"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, entry := range entries {
			if entry.Target == "dashrace" {
				n++
			}
		}
		return n
	}
	const view = "/console/tenants/dashrace"
	saved := func(what string, p page) {
		t.Helper()
		if p.status != http.StatusSeeOther || p.header.Get("Location") != view+"?notice="+url.QueryEscape("Set the quotas of tenant dashrace.") {
			t.Fatalf("%s: %d %s, want 303\n%s", what, p.status, p.header.Get("Location"), p.body)
		}
	}
	formA := quotaForm(t, a.get(view))
	formA.Set("memory", "64Gi")
	saved("A's first save", a.post(view+"/quota", formA))

	// Both open the form showing 64Gi; A saves 96Gi, then B 128Gi.
	formA, formB := quotaForm(t, a.get(view)), quotaForm(t, b.get(view))
	if formB.Get("memory") != "64Gi" || formB.Get("shown.memory") != "64Gi" {
		t.Fatalf("B's form as opened: %v", formB)
	}
	formA.Set("memory", "96Gi")
	saved("A's save of 96Gi", a.post(view+"/quota", formA))
	before, entries := overrides(), audited()
	formB.Set("memory", "128Gi")
	formB.Set("apps", "50")
	p := b.post(view+"/quota", formB)
	msg := html.UnescapeString(between(p.body, `id="quota-error">`, "</p>"))
	if p.status != http.StatusConflict || !strings.HasPrefix(msg, "Nothing was saved: memory changed meanwhile.") {
		t.Fatalf("B's save of 128Gi: %d, error %q; want 409 saying memory changed meanwhile\n%s", p.status, msg, p.body)
	}
	if got := html.UnescapeString(between(p.body, `data-quota-error="memory">`, "</div>")); !strings.Contains(got, "it is now 96Gi, not the 64Gi this form showed; your 128Gi was not saved") {
		t.Errorf("the error under memory: %q", got)
	}
	if got := overrides(); got != before || got != `{"memory":103079215104}` {
		t.Errorf("B's refused save: stored %s, want %s (A's 96Gi)", got, before)
	}
	if n := audited(); n != entries {
		t.Errorf("B's refused save was audited: %d tenant.quota entries, were %d", n, entries)
	}
	back := quotaForm(t, p)
	if back.Get("memory") != "96Gi" || back.Get("shown.memory") != "96Gi" || back.Get("apps") != "50" || back.Get("shown.apps") != "" {
		t.Errorf("the form came back with memory %q (shown %q), apps %q (shown %q); want memory 96Gi as it is now, apps 50 as typed",
			back.Get("memory"), back.Get("shown.memory"), back.Get("apps"), back.Get("shown.apps"))
	}

	// Saved again as it came back: apps is set, memory stays A's.
	saved("B's second save", b.post(view+"/quota", back))
	if got, want := overrides(), `{"apps":50,"memory":103079215104}`; got != want {
		t.Errorf("after B's second save: %s, want %s", got, want)
	}
}
