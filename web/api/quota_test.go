package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// setQuota sets a tenant's quota overrides with the operator's token.
func setQuota(t *testing.T, e *apitest.Env, tenant string, o apiclient.QuotaOverrides) apiclient.Quota {
	t.Helper()
	a := call(t, e, http.MethodPut, "/admin/tenants/"+tenant+"/quota", e.OperatorToken, o)
	wantStatus(t, "setting the quotas of "+tenant, a, http.StatusOK)
	var q apiclient.Quota
	a.decode(t, &q)
	return q
}

// wantQuotaRefusal fails t unless a is the 403 of the named quota, with its
// value in the message.
func wantQuotaRefusal(t *testing.T, what string, a answer, name, value string) {
	t.Helper()
	wantStatus(t, what, a, http.StatusForbidden)
	if e := a.err(); e.Quota != name || !strings.Contains(e.Message, name+" quota ("+value+")") {
		t.Errorf("%s: answer %+v, want the %s quota (%s) named", what, e, name, value)
	}
}

// testQuotas: the operator sets a tenant's apps and routes quotas; a
// create beyond one is refused with 403 naming the quota and its value and
// makes nothing; concurrent creates at the quota do not both pass; raising
// the quota lets the next one through; the tenant sees its quotas and
// usage.
func testQuotas(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	_, token := e.TenantToken(t, "quotaa")
	_, otherToken := e.TenantToken(t, "quotab")

	// The defaults, until the operator sets some.
	a := call(t, e, http.MethodGet, "/quota", token, nil)
	wantStatus(t, "GET /quota", a, http.StatusOK)
	var q apiclient.Quota
	a.decode(t, &q)
	if q.Tenant != "quotaa" || q.Quotas.Apps != quota.DefaultApps || q.Quotas.RepoBytes != quota.DefaultRepoBytes ||
		q.Quotas.MilliCPU != quota.DefaultMilliCPU || q.Quotas.MemoryBytes != quota.DefaultMemoryBytes || q.Overrides != (apiclient.QuotaOverrides{}) || q.BuildMinutesSince.Day() != 1 {
		t.Errorf("GET /quota of a new tenant = %+v, want the defaults", q)
	}
	wantStatus(t, "a tenant's token on the admin route", call(t, e, http.MethodPut, "/admin/tenants/quotaa/quota", token, apiclient.QuotaOverrides{Apps: ptr.To(100)}), http.StatusForbidden)
	wantStatus(t, "an unknown tenant", call(t, e, http.MethodPut, "/admin/tenants/nobody/quota", e.OperatorToken, apiclient.QuotaOverrides{}), http.StatusNotFound)
	a = call(t, e, http.MethodPut, "/admin/tenants/quotaa/quota", e.OperatorToken, apiclient.QuotaOverrides{Apps: ptr.To(-1)})
	wantStatus(t, "a negative quota", a, http.StatusUnprocessableEntity)
	if a.err().Field != "apps" {
		t.Errorf("a negative quota: %+v, want field apps", a.err())
	}

	// Apps: two allowed.
	if q := setQuota(t, e, "quotaa", apiclient.QuotaOverrides{Apps: ptr.To(2), Routes: ptr.To(1)}); q.Quotas.Apps != 2 || q.Quotas.Routes != 1 ||
		q.Quotas.ConcurrentBuilds != quota.DefaultConcurrentBuilds || *q.Overrides.Apps != 2 {
		t.Errorf("after setting apps 2 and routes 1: %+v", q)
	}
	createApp(t, e, token, "one")
	createApp(t, e, token, "two")
	a = call(t, e, http.MethodPost, "/apps", token, apiclient.CreateAppRequest{Name: "three"})
	wantQuotaRefusal(t, "a third app", a, "apps", "2")
	countApps := func(ns string) int {
		t.Helper()
		var apps platformv1alpha1.AppList
		if err := e.Kube.List(ctx, &apps, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return len(apps.Items)
	}
	if n := countApps("quotaa"); n != 2 {
		t.Errorf("apps after the refusal: %d, want 2", n)
	}
	for _, entry := range auditActions(t, e, "") {
		if entry.Action == "app.create" && entry.Target == "three" {
			t.Errorf("the refused app was audited as created: %+v", entry)
		}
	}
	// Another tenant's quota is its own.
	createApp(t, e, otherToken, "three")

	// Concurrent creates with room for two more: two pass.
	setQuota(t, e, "quotaa", apiclient.QuotaOverrides{Apps: ptr.To(4), Routes: ptr.To(1)})
	var wg sync.WaitGroup
	statuses := make([]int, 6)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = call(t, e, http.MethodPost, "/apps", token, apiclient.CreateAppRequest{Name: fmt.Sprintf("race%d", i)}).status
		}()
	}
	wg.Wait()
	created, refused := 0, 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusForbidden:
			refused++
		}
	}
	if created != 2 || refused != 4 || countApps("quotaa") != 4 {
		t.Errorf("concurrent creates: statuses %v, %d apps; want 2 created, 4 refused, 4 apps", statuses, countApps("quotaa"))
	}

	// Routes: one allowed over all the tenant's apps.
	a = call(t, e, http.MethodPost, "/apps/one/routes", token, apiclient.AddRouteRequest{Hostname: "www.quota-test.example"})
	wantStatus(t, "the first route", a, http.StatusCreated)
	a = call(t, e, http.MethodPost, "/apps/two/routes", token, apiclient.AddRouteRequest{Hostname: "api.quota-test.example"})
	wantQuotaRefusal(t, "a second route", a, "routes", "1")
	var routes platformv1alpha1.RouteList
	if err := e.Kube.List(ctx, &routes, client.InNamespace("quotaa")); err != nil || len(routes.Items) != 1 {
		t.Errorf("routes after the refusal: %d, %v; want 1", len(routes.Items), err)
	}

	// The tenant sees its quotas and usage.
	a = call(t, e, http.MethodGet, "/quota", token, nil)
	wantStatus(t, "GET /quota", a, http.StatusOK)
	a.decode(t, &q)
	if q.Quotas.Apps != 4 || q.Quotas.Routes != 1 || q.Usage.Apps != 4 || q.Usage.Routes != 1 || q.Usage.RunningBuilds != 0 {
		t.Errorf("GET /quota = %+v", q)
	}

	// Instances, and the CPU and memory they request: what the tenant's
	// apps run, as the releases counted them.
	if err := e.Store.SetAppInstances(ctx, "quotaa", "one", store.AppSize{Instances: 3, MilliCPU: 2500, MemoryBytes: 5 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.SetAppInstances(ctx, "quotab", "one", store.AppSize{Instances: 7, MilliCPU: 7000, MemoryBytes: 14 << 30}); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "a negative instances quota", call(t, e, http.MethodPut, "/admin/tenants/quotaa/quota", e.OperatorToken, apiclient.QuotaOverrides{Apps: ptr.To(4), Routes: ptr.To(1), Instances: ptr.To(-1)}), http.StatusUnprocessableEntity)
	a = call(t, e, http.MethodPut, "/admin/tenants/quotaa/quota", e.OperatorToken, apiclient.QuotaOverrides{Apps: ptr.To(4), Routes: ptr.To(1), MilliCPU: ptr.To[int64](-1000)})
	if wantStatus(t, "a negative cpu quota", a, http.StatusUnprocessableEntity); a.err().Field != "cpu" {
		t.Errorf("a negative cpu quota: field %q, want cpu", a.err().Field)
	}
	q = setQuota(t, e, "quotaa", apiclient.QuotaOverrides{Apps: ptr.To(4), Routes: ptr.To(1), Instances: ptr.To(10), MilliCPU: ptr.To[int64](4000), MemoryBytes: ptr.To[int64](64 << 30)})
	if q.Quotas.Instances != 10 || q.Usage.Instances != 3 {
		t.Errorf("instances quota and usage = %d, %d; want 10 and 3 (the other tenant's 7 apart)", q.Quotas.Instances, q.Usage.Instances)
	}
	if q.Quotas.MilliCPU != 4000 || q.Usage.MilliCPU != 2500 || q.Quotas.MemoryBytes != 64<<30 || q.Usage.MemoryBytes != 5<<30 {
		t.Errorf("cpu quota and usage = %dm, %dm, memory %d, %d; want 4000m, 2500m, 64 GiB and 5 GiB (the other tenant's apart)",
			q.Quotas.MilliCPU, q.Usage.MilliCPU, q.Quotas.MemoryBytes, q.Usage.MemoryBytes)
	}
	var raw struct{ Quotas, Usage map[string]any }
	a = call(t, e, http.MethodGet, "/quota", token, nil)
	if err := json.Unmarshal(a.body, &raw); err != nil || raw.Quotas["cpu"] != 4000.0 || raw.Quotas["memory"] != float64(64<<30) || raw.Usage["cpu"] != 2500.0 || raw.Usage["memory"] != float64(5<<30) {
		t.Errorf("GET /quota = %s, %v; want quotas and usage cpu in millicores and memory in bytes", a.body, err)
	}

	// The operator raises them: the next one passes.
	setQuota(t, e, "quotaa", apiclient.QuotaOverrides{Apps: ptr.To(5), Routes: ptr.To(2)})
	createApp(t, e, token, "five")
	a = call(t, e, http.MethodPost, "/apps/two/routes", token, apiclient.AddRouteRequest{Hostname: "api.quota-test.example"})
	wantStatus(t, "a second route under a quota of 2", a, http.StatusCreated)

	// Clearing the overrides restores the defaults; the audit log has each
	// change.
	if q := setQuota(t, e, "quotaa", apiclient.QuotaOverrides{}); q.Quotas.Apps != quota.DefaultApps || q.Overrides != (apiclient.QuotaOverrides{}) {
		t.Errorf("after clearing: %+v, want the defaults", q)
	}
	changes := 0
	for _, entry := range auditActions(t, e, "") {
		if entry.Action == "tenant.quota" && entry.Target == "quotaa" {
			changes++
		}
	}
	if changes != 5 {
		t.Errorf("tenant.quota audit entries: %d, want 5", changes)
	}
}

// testQuotaPatch: a PATCH of the operator's quota route changes only the
// quotas it names. An operator who read the quotas before another changed
// one keeps the other's change (a PUT of what was read would have undone
// it); patches of every quota at once all hold; null and "default" give
// the default again; a bad quota answers 422 naming it and changes
// nothing; each change is audited.
func testQuotaPatch(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "patchq")
	stored := func() store.QuotaOverrides {
		t.Helper()
		o, err := e.Store.TenantQuotas(ctx, tenant.ID)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	patch := func(what string, body any, status int) answer {
		t.Helper()
		a := call(t, e, http.MethodPatch, "/admin/tenants/patchq/quota", e.OperatorToken, body)
		wantStatus(t, what, a, status)
		return a
	}
	setQuota(t, e, "patchq", apiclient.QuotaOverrides{Apps: ptr.To(10), Routes: ptr.To(5)})

	// Ann reads; Bob sets routes; Ann sets apps from what she read.
	var read apiclient.Quota
	call(t, e, http.MethodGet, "/admin/tenants/patchq/quota", e.OperatorToken, nil).decode(t, &read)
	patch("bob's routes", map[string]any{"routes": 7}, http.StatusOK)
	var q apiclient.Quota
	patch("ann's apps", map[string]any{"apps": 40}, http.StatusOK).decode(t, &q)
	if q.Quotas.Apps != 40 || q.Quotas.Routes != 7 || *q.Overrides.Routes != 7 || q.Overrides.Instances != nil {
		t.Errorf("after two operators' patches: %+v, want apps 40 and routes 7", q.Quotas)
	}
	if o := stored(); o.Apps == nil || *o.Apps != 40 || o.Routes == nil || *o.Routes != 7 {
		t.Errorf("stored after two operators' patches: %+v, want apps 40 and routes 7", o)
	}

	// Every quota at once, each by its own request.
	values := map[string]int64{"apps": 1, "routes": 2, "concurrentBuilds": 3, "repoBytes": 4 << 30, "buildMinutes": 5, "concurrentRuns": 6,
		"instances": 7, "cpu": 8000, "memory": 9 << 30}
	var wg sync.WaitGroup
	statuses := map[string]int{}
	var mu sync.Mutex
	for k, v := range values {
		wg.Go(func() {
			st := call(t, e, http.MethodPatch, "/admin/tenants/patchq/quota", e.OperatorToken, map[string]any{k: v}).status
			mu.Lock()
			statuses[k] = st
			mu.Unlock()
		})
	}
	wg.Wait()
	q = apiclient.Quota{}
	call(t, e, http.MethodGet, "/admin/tenants/patchq/quota", e.OperatorToken, nil).decode(t, &q)
	want := apiclient.Quotas{Apps: 1, Routes: 2, ConcurrentBuilds: 3, RepoBytes: 4 << 30, BuildMinutes: 5, ConcurrentRuns: 6, Instances: 7, MilliCPU: 8000, MemoryBytes: 9 << 30}
	if q.Quotas != want {
		t.Errorf("after %d concurrent patches (statuses %v): %+v, want %+v", len(values), statuses, q.Quotas, want)
	}

	// null and "default" remove an override; the others stay.
	q = apiclient.Quota{}
	patch("clearing cpu and memory", map[string]any{"cpu": nil, "memory": "default", "apps": 12}, http.StatusOK).decode(t, &q)
	if q.Overrides.MilliCPU != nil || q.Overrides.MemoryBytes != nil || q.Quotas.MilliCPU != quota.DefaultMilliCPU || q.Quotas.Apps != 12 || q.Quotas.Routes != 2 {
		t.Errorf("after cpu null, memory default, apps 12: %+v, %+v", q.Quotas, q.Overrides)
	}

	countAudit := func() int { t.Helper(); return quotaAudits(t, e, "patchq") }
	before, audited := stored(), countAudit()
	for _, tc := range []struct {
		name   string
		body   any
		status int
		field  string
		words  string
	}{
		{"negative", map[string]any{"apps": 3, "routes": -1}, 422, "routes", "quota routes: -1 is negative"},
		{"a fraction of cpu", map[string]any{"cpu": 2.5}, 422, "cpu", "quota cpu: 2.5 is not a whole number"},
		{"a word", map[string]any{"instances": "lots"}, 422, "instances", `quota instances: "lots" is not a whole number`},
		{"too large", map[string]any{"buildMinutes": int64(1) << 31}, 422, "buildMinutes", "the largest it may be"},
		{"unknown quota", map[string]any{"apps": 3, "disk": 1}, 422, "disk", "quota disk: no such quota: give one of apps, routes"},
		{"two bad", map[string]any{"memory": -1, "apps": "x"}, 422, "apps", "quota apps:"},
		{"nothing", map[string]any{}, 422, "", "give at least one quota"},
		{"not an object", []int{1}, 400, "", "not the JSON this route takes"},
	} {
		a := call(t, e, http.MethodPatch, "/admin/tenants/patchq/quota", e.OperatorToken, tc.body)
		if a.status != tc.status || a.err().Field != tc.field || !strings.Contains(a.err().Message, tc.words) {
			t.Errorf("%s: %d %s; want %d on field %q saying %q", tc.name, a.status, a.body, tc.status, tc.field, tc.words)
		}
	}
	wantStatus(t, "a tenant's token", call(t, e, http.MethodPatch, "/admin/tenants/patchq/quota", token, map[string]any{"apps": 100}), http.StatusForbidden)
	wantStatus(t, "an unknown tenant", call(t, e, http.MethodPatch, "/admin/tenants/nobody/quota", e.OperatorToken, map[string]any{"apps": 1}), http.StatusNotFound)
	if o := stored(); (store.Quotas{}).With(o) != (store.Quotas{}).With(before) {
		t.Errorf("refused patches changed the quotas: %+v, were %+v", o, before)
	}
	if n := countAudit(); n != audited {
		t.Errorf("refused patches were audited: %d tenant.quota entries, were %d", n, audited)
	}
	// Each accepted patch is audited with what it changed: the PUT, two
	// operators', nine at once and the clearing one.
	if audited != 1+2+len(values)+1 {
		t.Errorf("tenant.quota entries: %d, want %d", audited, 1+2+len(values)+1)
	}
	var last struct{ Changes map[string]*int64 }
	entries := auditActions(t, e, "")
	for _, entry := range slices.Backward(entries) {
		if entry.Action == "tenant.quota" && entry.Target == "patchq" {
			if err := json.Unmarshal(entry.Details, &last); err != nil || entry.Actor != "ops@bex.test" {
				t.Fatalf("audit entry %+v: %v", entry, err)
			}
			break
		}
	}
	if c := last.Changes; len(c) != 3 || c["cpu"] != nil || c["memory"] != nil || c["apps"] == nil || *c["apps"] != 12 {
		t.Errorf("the last tenant.quota entry's changes: %v, want cpu and memory null, apps 12", c)
	}
}

// testQuotaPatchExpect: a PATCH of the operator's quota route with the
// overrides its sender expects is made only while they hold. Ann and Bob
// read memory 64Gi; Bob's patch to 96Gi holds; Ann's to 128Gi, expecting
// 64Gi, answers 409 naming memory, its value now and the one expected,
// and changes nothing, apps sent with it included, and is not audited.
// Expectations compare amounts (65536Mi is 64Gi); a bad one is a 422.
func testQuotaPatchExpect(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	tenant, _ := e.TenantToken(t, "expectq")
	ops, err := apiclient.New(e.URL, e.OperatorToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(kv ...string) apiclient.QuotaPatch {
		t.Helper()
		p := apiclient.QuotaPatch{}
		for i := 0; i < len(kv); i += 3 {
			if err := p.Set(kv[i], kv[i+1]); err != nil {
				t.Fatal(err)
			}
			if kv[i+2] != "-" {
				if err := p.Expect(kv[i], kv[i+2]); err != nil {
					t.Fatal(err)
				}
			}
		}
		return p
	}
	countAudit := func() int { t.Helper(); return quotaAudits(t, e, "expectq") }
	// Key, value, expected ("-": none).
	if _, err := ops.PatchTenantQuota(ctx, "expectq", patch("apps", "10", "default", "memory", "64Gi", "default")); err != nil {
		t.Fatalf("patching a tenant with the defaults, expecting them: %v", err)
	}
	if _, err := ops.PatchTenantQuota(ctx, "expectq", patch("memory", "96Gi", "65536Mi")); err != nil {
		t.Fatalf("bob's patch, expecting 65536Mi of 64Gi: %v", err)
	}
	before, audited := storedOverrides(t, e, tenant.ID), countAudit()

	_, err = ops.PatchTenantQuota(ctx, "expectq", patch("memory", "128Gi", "64Gi", "apps", "11", "10", "cpu", "4", "default"))
	var ae *apiclient.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Field != "memory" ||
		!strings.Contains(ae.Message, "memory is now 96Gi, not 64Gi") || !strings.Contains(ae.Message, "nothing was changed") {
		t.Fatalf("ann's patch, expecting memory 64Gi: %v, want 409 on memory saying it is now 96Gi", err)
	}
	if want := []apiclient.QuotaConflict{{Quota: "memory", Expected: ptr.To[int64](64 << 30), Current: ptr.To[int64](96 << 30)}}; !reflect.DeepEqual(ae.Conflicts, want) {
		t.Errorf("conflicts %s, want memory expected 64Gi, now 96Gi only", jsonOf(ae.Conflicts))
	}
	if got := storedOverrides(t, e, tenant.ID); got != before {
		t.Errorf("the refused patch changed the quotas: %s, were %s", got, before)
	}
	if n := countAudit(); n != audited {
		t.Errorf("the refused patch was audited: %d tenant.quota entries, were %d", n, audited)
	}

	for _, tc := range []struct {
		name  string
		body  any
		field string
		words string
	}{
		{"an unknown quota", map[string]any{"apps": 3, "expect": map[string]any{"disk": 1}}, "expect.disk", "expect: quota disk: no such quota"},
		{"a word", map[string]any{"apps": 3, "expect": map[string]any{"apps": "ten"}}, "expect.apps", "is not a whole number"},
		{"not an object", map[string]any{"apps": 3, "expect": []int{10}}, "expect", "expect is not an object"},
		{"nothing but expect", map[string]any{"expect": map[string]any{"apps": 10}}, "", "give at least one quota"},
	} {
		a := call(t, e, http.MethodPatch, "/admin/tenants/expectq/quota", e.OperatorToken, tc.body)
		if a.status != http.StatusUnprocessableEntity || a.err().Field != tc.field || !strings.Contains(a.err().Message, tc.words) {
			t.Errorf("%s: %d %s; want 422 on field %q saying %q", tc.name, a.status, a.body, tc.field, tc.words)
		}
	}
	if got := storedOverrides(t, e, tenant.ID); got != before {
		t.Errorf("refused patches changed the quotas: %s, were %s", got, before)
	}

	// Read again, Ann's patch holds.
	if _, err := ops.PatchTenantQuota(ctx, "expectq", patch("memory", "128Gi", "96Gi", "apps", "11", "10")); err != nil {
		t.Fatalf("ann's patch, expecting what she read again: %v", err)
	}
	if got, want := storedOverrides(t, e, tenant.ID), `{"apps":11,"memory":137438953472}`; got != want {
		t.Errorf("after ann's second patch: %s, want %s", got, want)
	}
}

// storedOverrides returns the tenant's overrides in the store as JSON.
func storedOverrides(t *testing.T, e *apitest.Env, tenantID string) string {
	t.Helper()
	o, err := e.Store.TenantQuotas(t.Context(), tenantID)
	if err != nil {
		t.Fatal(err)
	}
	return jsonOf(o)
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// quotaAudits counts the tenant.quota audit entries of the tenant.
func quotaAudits(t *testing.T, e *apitest.Env, tenant string) int {
	t.Helper()
	n := 0
	for _, entry := range auditActions(t, e, "") {
		if entry.Action == "tenant.quota" && entry.Target == tenant {
			n++
		}
	}
	return n
}
