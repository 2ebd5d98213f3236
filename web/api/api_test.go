package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestAPI runs every scenario against one control plane; each has its own
// database and its own tenant names.
func TestAPI(t *testing.T) {
	cp := cptest.Start(t)
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *controlplane.ControlPlane)
	}{
		{"Unauthenticated", testUnauthenticated},
		{"AdminCreateTenant", testAdminCreateTenant},
		{"Apps", testApps},
		{"TenantIsolation", testTenantIsolation},
		{"DefaultHostnameClash", testDefaultHostnameClash},
		{"Env", testEnv},
		{"Routes", testRoutes},
		{"Upgrades", testUpgrades},
		{"Fleet", testFleet},
		{"Cordon", testCordon},
		{"Audit", testAudit},
		{"Builds", testBuilds},
		{"Rollback", testRollback},
		{"RuntimeLogs", testRuntimeLogs},
		{"LogFollowers", testLogFollowers},
		{"LogStreamCap", testLogStreamCap},
		{"LogStreamStartFails", testLogStreamStartFails},
		{"SSHKeys", testSSHKeys},
		{"Healthz", testHealthz},
		{"SlowClients", testSlowClients},
		{"Sessions", testSessions},
		{"Quotas", testQuotas},
		{"QuotaPatch", testQuotaPatch},
		{"QuotaPatchExpect", testQuotaPatchExpect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, cp)
		})
	}
}

// answer is an HTTP answer.
type answer struct {
	status int
	body   []byte
	header http.Header
}

func (a answer) err() apiclient.ErrorBody {
	var e apiclient.ErrorBody
	_ = json.Unmarshal(a.body, &e)
	return e
}

func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decoding %s: %v", a.body, err)
	}
}

// call sends a request to the API with token (none when empty) and a JSON
// body (none when nil).
func call(t *testing.T, e *apitest.Env, method, path, token string, body any) answer {
	t.Helper()
	return callAt(t, e.URL, method, path, token, body)
}

// callAt is call to the API server at base (another of the Env's).
func callAt(t *testing.T, base, method, path, token string, body any) answer {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+api.Prefix+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, body: b, header: resp.Header}
}

// stream starts a GET of a streaming route and returns the answer once its
// status is 200; its body is closed when t ends.
func stream(t *testing.T, ctx context.Context, e *apitest.Env, path, token string) *http.Response {
	t.Helper()
	return streamAt(t, ctx, e.URL, path, token)
}

// streamAt is stream against the API at base.
func streamAt(t *testing.T, ctx context.Context, base, path, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+api.Prefix+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	return resp
}

// wantStatus fails t unless a has the status.
func wantStatus(t *testing.T, what string, a answer, status int) {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s: status %d (%s), want %d", what, a.status, a.body, status)
	}
}

// auditActions returns the actions of the tenant's audit entries (every
// entry when tenantID is empty), oldest first.
func auditActions(t *testing.T, e *apitest.Env, tenantID string) []store.AuditEntry {
	t.Helper()
	entries, err := e.Store.ListAudit(t.Context(), store.AuditFilter{TenantID: tenantID})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(entries)
	return entries
}

func countRows(t *testing.T, e *apitest.Env, table string) int {
	t.Helper()
	var n int
	if err := e.Store.Pool().QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func createApp(t *testing.T, e *apitest.Env, token, name string) apiclient.App {
	t.Helper()
	a := call(t, e, http.MethodPost, "/apps", token, apiclient.CreateAppRequest{Name: name})
	wantStatus(t, "creating app "+name, a, http.StatusCreated)
	var app apiclient.App
	a.decode(t, &app)
	return app
}

func testUnauthenticated(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	_, good := e.TenantToken(t, "unauth")
	tenantsBefore, auditBefore := countRows(t, e, "tenants"), countRows(t, e, "audit_log")

	for _, token := range []string{"", "bex_" + strings.Repeat("a", 52), good[:len(good)-1] + "x", "nonsense"} {
		for _, r := range []struct {
			method, path string
			body         any
		}{
			{http.MethodPost, "/apps", apiclient.CreateAppRequest{Name: "web"}},
			{http.MethodGet, "/apps", nil},
			{http.MethodPost, "/admin/tenants", apiclient.CreateTenantRequest{Name: "intruder"}},
			{http.MethodPatch, "/apps/web/env", apiclient.PatchEnvRequest{Set: map[string]string{"A": "b"}}},
			{http.MethodPost, "/ssh-keys", apiclient.AddSSHKeyRequest{PublicKey: "ssh-ed25519 AAAA"}},
		} {
			a := call(t, e, r.method, r.path, token, r.body)
			if a.status != http.StatusUnauthorized || a.err().Message == "" || a.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with token %q: %d %s, want 401 with a message and WWW-Authenticate", r.method, r.path, token, a.status, a.body)
			}
		}
	}

	var apps platformv1alpha1.AppList
	if err := e.Kube.List(t.Context(), &apps); err != nil {
		t.Fatal(err)
	}
	for _, app := range apps.Items {
		if app.Namespace == "unauth" {
			t.Errorf("app %s/%s was created without a valid token", app.Namespace, app.Name)
		}
	}
	ns := &corev1.Namespace{}
	if err := e.Kube.Get(t.Context(), client.ObjectKey{Name: "intruder"}, ns); !apierrors.IsNotFound(err) {
		t.Errorf("namespace intruder: err = %v, want NotFound", err)
	}
	if n := countRows(t, e, "tenants"); n != tenantsBefore {
		t.Errorf("tenants: %d rows, want %d", n, tenantsBefore)
	}
	if n := countRows(t, e, "audit_log"); n != auditBefore {
		t.Errorf("audit_log: %d rows, want %d", n, auditBefore)
	}
	if n := countRows(t, e, "ssh_keys"); n != 0 {
		t.Errorf("ssh_keys: %d rows, want 0", n)
	}
}

func testAdminCreateTenant(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()

	a := call(t, e, http.MethodPost, "/admin/tenants", e.OperatorToken, apiclient.CreateTenantRequest{Name: "adminacme"})
	wantStatus(t, "creating tenant", a, http.StatusCreated)
	var created apiclient.CreatedTenant
	a.decode(t, &created)
	if created.Tenant.Name != "adminacme" || !strings.HasPrefix(created.Token, store.TokenSecretPrefix) {
		t.Fatalf("created = %+v", created)
	}
	ns := &corev1.Namespace{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Name: "adminacme"}, ns); err != nil {
		t.Fatalf("namespace of the tenant: %v", err)
	}
	if ns.Labels[api.TenantLabel] != "adminacme" {
		t.Errorf("namespace labels = %v", ns.Labels)
	}
	tenant, err := e.Store.GetTenantByName(ctx, "adminacme")
	if err != nil {
		t.Fatal(err)
	}

	// The printed token works, for that tenant.
	a = call(t, e, http.MethodGet, "/whoami", created.Token, nil)
	wantStatus(t, "whoami", a, http.StatusOK)
	var who apiclient.WhoAmI
	a.decode(t, &who)
	if who.Tenant != "adminacme" || who.Operator {
		t.Errorf("whoami = %+v", who)
	}
	// A tenant's token is no operator's.
	a = call(t, e, http.MethodPost, "/admin/tenants", created.Token, apiclient.CreateTenantRequest{Name: "adminother"})
	wantStatus(t, "tenant token on admin", a, http.StatusForbidden)
	// An operator's token is no tenant's.
	a = call(t, e, http.MethodGet, "/apps", e.OperatorToken, nil)
	wantStatus(t, "operator token on apps", a, http.StatusForbidden)

	tenantsBefore := countRows(t, e, "tenants")
	for _, tc := range []struct {
		name   string
		status int
	}{
		{"adminacme", http.StatusConflict},
		{"Bad_Name", http.StatusUnprocessableEntity},
		{"kube-system", http.StatusUnprocessableEntity},
		{"default", http.StatusUnprocessableEntity},
		{"", http.StatusUnprocessableEntity},
	} {
		a := call(t, e, http.MethodPost, "/admin/tenants", e.OperatorToken, apiclient.CreateTenantRequest{Name: tc.name})
		if a.status != tc.status || a.err().Field != "name" {
			t.Errorf("creating tenant %q: %d %s, want %d with field name", tc.name, a.status, a.body, tc.status)
		}
	}
	// A namespace that exists without a tenant is not taken over.
	taken := &corev1.Namespace{}
	taken.Name = "admintaken"
	if err := e.Kube.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	a = call(t, e, http.MethodPost, "/admin/tenants", e.OperatorToken, apiclient.CreateTenantRequest{Name: "admintaken"})
	if a.status != http.StatusConflict || a.err().Field != "name" {
		t.Errorf("tenant over an existing namespace: %d %s, want 409", a.status, a.body)
	}
	if n := countRows(t, e, "tenants"); n != tenantsBefore {
		t.Errorf("refused requests left %d tenants, want %d", n, tenantsBefore)
	}

	a = call(t, e, http.MethodGet, "/admin/tenants", e.OperatorToken, nil)
	wantStatus(t, "listing tenants", a, http.StatusOK)
	var tenants []apiclient.Tenant
	a.decode(t, &tenants)
	if len(tenants) != 1 || tenants[0].Name != "adminacme" {
		t.Errorf("tenants = %+v", tenants)
	}

	entries := auditActions(t, e, "")
	if len(entries) != 1 || entries[0].Action != "tenant.create" || entries[0].Target != "adminacme" ||
		entries[0].Actor != "ops@bex.test" || entries[0].SourceAddr == "" || !strings.Contains(string(entries[0].Details), tenant.ID) {
		t.Errorf("audit = %+v, want one tenant.create by ops@bex.test", entries)
	}
}

func testApps(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "appsacme")

	app := createApp(t, e, token, "web")
	want := apiclient.App{
		Name: "web", Tenant: "appsacme", Branch: "main", Status: "pending", Placed: "pending", Plan: "starter",
		GitRemote: apitest.GitBase + "/appsacme/web.git",
		URL:       "https://web-appsacme." + apitest.AppDomain,
	}
	app.CreatedAt = time.Time{}
	if !reflect.DeepEqual(app, want) {
		t.Errorf("created app = %+v, want %+v", app, want)
	}
	obj := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "appsacme", Name: "web"}, obj); err != nil {
		t.Fatalf("App object: %v", err)
	}
	if obj.Spec.Source.Branch != "main" || obj.Spec.Plan != platformv1alpha1.PlanStarter || obj.Labels[api.TenantLabel] != "appsacme" {
		t.Errorf("App object = %+v, want the CRD's defaults and the tenant label", obj)
	}
	// The App controller's finalizer comes with the App: its first
	// reconcile need not write the App to add it.
	if !controllerutil.ContainsFinalizer(obj, platformv1alpha1.AppFinalizer) {
		t.Errorf("App object's finalizers = %v, want %s", obj.Finalizers, platformv1alpha1.AppFinalizer)
	}
	a := call(t, e, http.MethodPost, "/apps", token, apiclient.CreateAppRequest{Name: "api", Branch: "production"})
	wantStatus(t, "creating app api", a, http.StatusCreated)

	a = call(t, e, http.MethodGet, "/apps", token, nil)
	wantStatus(t, "listing apps", a, http.StatusOK)
	var apps []apiclient.App
	a.decode(t, &apps)
	if len(apps) != 2 || apps[0].Name != "api" || apps[0].Branch != "production" || apps[1].Name != "web" {
		t.Errorf("apps = %+v", apps)
	}
	a = call(t, e, http.MethodGet, "/apps/web", token, nil)
	wantStatus(t, "getting app", a, http.StatusOK)
	var got apiclient.App
	a.decode(t, &got)
	if got.GitRemote != want.GitRemote || got.URL != want.URL {
		t.Errorf("app = %+v", got)
	}
	if strings.Contains(string(a.body), `"cluster"`) || strings.Contains(string(a.body), `"placement"`) || !strings.Contains(string(a.body), `"placed":"pending"`) {
		t.Errorf("an app the scheduler has not looked at = %s, want placed pending and neither cluster nor placement", a.body)
	}

	// Where the app runs and why, as the App controller wrote it: placed,
	// then not placed while status.cluster still names the cluster that
	// went away.
	for _, tc := range []struct {
		cluster string
		placed  bool
		message string
		want    map[string]any
	}{
		{"alpha", true, "placed on alpha/workers (score 80, BinPack)",
			map[string]any{"cluster": "alpha", "placed": "placed", "placement": "placed on alpha/workers (score 80, BinPack)"}},
		{"alpha", false, "No workload cluster can take the app: cluster alpha is gone from the fleet (its Placement still names alpha/workers): no cluster has room",
			map[string]any{"cluster": "alpha", "placed": "not placed", "placement": "No workload cluster can take the app: cluster alpha is gone from the fleet (its Placement still names alpha/workers): no cluster has room"}},
	} {
		e.PlaceApp(t, "appsacme", "web", tc.cluster, tc.placed, tc.message)
		for _, path := range []string{"/apps/web", "/apps"} {
			a := call(t, e, http.MethodGet, path, token, nil)
			wantStatus(t, "getting "+path, a, http.StatusOK)
			var app map[string]any
			if path == "/apps" {
				var list []map[string]any
				a.decode(t, &list)
				i := slices.IndexFunc(list, func(v map[string]any) bool { return v["name"] == "web" })
				if i < 0 {
					t.Fatalf("GET /apps = %s, without web", a.body)
				}
				app = list[i]
			} else {
				a.decode(t, &app)
			}
			for k, v := range tc.want {
				if app[k] != v {
					t.Errorf("GET %s after placing (placed %v): %s = %v, want %q", path, tc.placed, k, app[k], v)
				}
			}
		}
	}

	// Refused names: the field is named and nothing is created.
	for _, tc := range []struct {
		body   any
		status int
		field  string
	}{
		{apiclient.CreateAppRequest{Name: "Web"}, http.StatusUnprocessableEntity, "name"},
		{apiclient.CreateAppRequest{Name: "1web"}, http.StatusUnprocessableEntity, "name"},
		{apiclient.CreateAppRequest{Name: "web-"}, http.StatusUnprocessableEntity, "name"},
		{apiclient.CreateAppRequest{Name: strings.Repeat("a", 41)}, http.StatusUnprocessableEntity, "name"},
		{apiclient.CreateAppRequest{Name: strings.Repeat("a", 60)[:63-len("appsacme")]}, http.StatusUnprocessableEntity, "name"},
		{apiclient.CreateAppRequest{}, http.StatusUnprocessableEntity, "name"},
		{apiclient.CreateAppRequest{Name: "okname", Branch: "-x"}, http.StatusUnprocessableEntity, "branch"},
		{apiclient.CreateAppRequest{Name: "web"}, http.StatusConflict, "name"},
		{map[string]string{"nme": "typo"}, http.StatusBadRequest, ""},
	} {
		a := call(t, e, http.MethodPost, "/apps", token, tc.body)
		if a.status != tc.status || a.err().Field != tc.field || a.err().Message == "" {
			t.Errorf("creating %+v: %d %s, want %d with field %q", tc.body, a.status, a.body, tc.status, tc.field)
		}
	}
	var list platformv1alpha1.AppList
	if err := e.Kube.List(ctx, &list, client.InNamespace("appsacme")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("%d App objects after refused creations, want 2", len(list.Items))
	}

	a = call(t, e, http.MethodDelete, "/apps/api", token, nil)
	wantStatus(t, "deleting app", a, http.StatusNoContent)
	// The finalizer holds the App until the App controller has stopped
	// what runs for it.
	e.FinishAppDeletion(t, "appsacme", "api")
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "appsacme", Name: "api"}, obj); !apierrors.IsNotFound(err) {
		t.Errorf("deleted App without its finalizer: err = %v, want NotFound", err)
	}
	a = call(t, e, http.MethodGet, "/apps/api", token, nil)
	wantStatus(t, "getting a deleted app", a, http.StatusNotFound)
	a = call(t, e, http.MethodGet, "/nowhere", token, nil)
	wantStatus(t, "unknown route", a, http.StatusNotFound)

	var actions []string
	for _, en := range auditActions(t, e, tenant.ID) {
		actions = append(actions, en.Action+" "+en.Target)
		if en.Actor != "token:test" || en.SourceAddr == "" || !strings.HasPrefix(en.SourceAddr, "127.0.0.1:") {
			t.Errorf("audit entry %+v: want actor token:test and the client's address", en)
		}
	}
	if fmt.Sprint(actions) != "[app.create web app.create api app.delete api]" {
		t.Errorf("audit = %v", actions)
	}
}

func testTenantIsolation(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	a, tokenA := e.TenantToken(t, "isoa")
	_, tokenB := e.TenantToken(t, "isob")
	createApp(t, e, tokenA, "web")
	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: a.ID, App: "web", Image: "r/isoa/web@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy 1", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: a.ID, App: "web", Image: "r/isoa/web@sha256:2", Kind: store.ReleaseKindDeploy, Description: "Deploy 2", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	b, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: a.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.AppendBuildLog(ctx, b.ID, "secret build output"); err != nil {
		t.Fatal(err)
	}
	auditBefore := countRows(t, e, "audit_log")

	missing := call(t, e, http.MethodGet, "/apps/nosuchapp", tokenB, nil)
	wantStatus(t, "a missing app", missing, http.StatusNotFound)
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/apps/web", nil},
		{http.MethodDelete, "/apps/web", nil},
		{http.MethodGet, "/apps/web/builds", nil},
		{http.MethodGet, "/apps/web/builds/1", nil},
		{http.MethodGet, "/apps/web/builds/latest/log", nil},
		{http.MethodGet, "/apps/web/releases", nil},
		{http.MethodPost, "/apps/web/rollback", apiclient.RollbackRequest{Release: 1}},
		{http.MethodPost, "/apps/web/restart", nil},
		{http.MethodGet, "/apps/web/env", nil},
		{http.MethodPatch, "/apps/web/env", apiclient.PatchEnvRequest{Set: map[string]string{"X": "y"}}},
		{http.MethodGet, "/apps/web/logs", nil},
	} {
		got := call(t, e, r.method, r.path, tokenB, r.body)
		if got.status != http.StatusNotFound {
			t.Errorf("tenant B: %s %s: %d %s, want 404", r.method, r.path, got.status, got.body)
		}
		// The answer is the one for an app that does not exist: no leak.
		if strings.Contains(string(got.body), "isoa") || strings.Contains(string(got.body), "secret build output") {
			t.Errorf("tenant B: %s %s leaks: %s", r.method, r.path, got.body)
		}
	}
	got := call(t, e, http.MethodGet, "/apps", tokenB, nil)
	if got.status != http.StatusOK || strings.TrimSpace(string(got.body)) != "[]" {
		t.Errorf("tenant B's apps: %d %s, want []", got.status, got.body)
	}
	got = call(t, e, http.MethodGet, "/builds", tokenB, nil)
	if got.status != http.StatusOK || strings.TrimSpace(string(got.body)) != "[]" {
		t.Errorf("tenant B's builds: %d %s, want []", got.status, got.body)
	}

	obj := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "isoa", Name: "web"}, obj); err != nil || len(obj.Spec.Env) != 0 {
		t.Errorf("tenant A's app after B's attempts: %+v, %v", obj.Spec, err)
	}
	if calls := e.Releaser.Calls(); len(calls) != 0 {
		t.Errorf("rollbacks: %+v, want none", calls)
	}
	if n, m := len(e.Releaser.Restarts()), len(e.Releaser.ConfigReleases()); n != 0 || m != 0 {
		t.Errorf("tenant B's attempts reached the Releaser: %d restarts, %d config releases", n, m)
	}
	if n := countRows(t, e, "audit_log"); n != auditBefore {
		t.Errorf("audit_log has %d rows, want %d: refused requests are no changes", n, auditBefore)
	}

	// Tenant B may have its own app called web.
	createApp(t, e, tokenB, "web")
	got = call(t, e, http.MethodGet, "/apps/web/releases", tokenB, nil)
	if got.status != http.StatusOK || strings.TrimSpace(string(got.body)) != "[]" {
		t.Errorf("tenant B's own web releases: %d %s, want []", got.status, got.body)
	}
}

func testEnv(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "envacme")
	createApp(t, e, token, "web")
	const secretValue = "postgres://u:hunter2@db/x"

	a := call(t, e, http.MethodPatch, "/apps/web/env", token, apiclient.PatchEnvRequest{Set: map[string]string{"GREETING": "hello", "EMPTY": ""}})
	wantStatus(t, "setting plain env", a, http.StatusOK)
	a = call(t, e, http.MethodPatch, "/apps/web/env", token, apiclient.PatchEnvRequest{Set: map[string]string{"DATABASE_URL": secretValue}, Secret: true})
	wantStatus(t, "setting secret env", a, http.StatusOK)
	if strings.Contains(string(a.body), "hunter2") {
		t.Errorf("the answer to a secret set echoes the value: %s", a.body)
	}

	a = call(t, e, http.MethodGet, "/apps/web/env", token, nil)
	wantStatus(t, "listing env", a, http.StatusOK)
	if strings.Contains(string(a.body), "hunter2") {
		t.Errorf("env list echoes a secret value: %s", a.body)
	}
	var vars []apiclient.EnvVar
	a.decode(t, &vars)
	if len(vars) != 3 || vars[0].Name != "DATABASE_URL" || !vars[0].Secret || vars[0].Value != nil ||
		vars[1].Name != "EMPTY" || vars[1].Value == nil || *vars[1].Value != "" ||
		vars[2].Name != "GREETING" || *vars[2].Value != "hello" {
		t.Errorf("env = %s", a.body)
	}

	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "envacme", Name: "web"}, app); err != nil {
		t.Fatal(err)
	}
	envByName := map[string]platformv1alpha1.EnvVar{}
	for _, v := range app.Spec.Env {
		envByName[v.Name] = v
	}
	if ref := envByName["DATABASE_URL"].SecretKeyRef; ref == nil || ref.Name != "web-env" || ref.Key != "DATABASE_URL" || envByName["DATABASE_URL"].Value != nil {
		t.Errorf("spec.env DATABASE_URL = %+v, want a secretKeyRef to web-env", envByName["DATABASE_URL"])
	}
	if v := envByName["GREETING"].Value; v == nil || *v != "hello" {
		t.Errorf("spec.env GREETING = %+v", envByName["GREETING"])
	}
	sec := &corev1.Secret{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "envacme", Name: "web-env"}, sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data["DATABASE_URL"]) != secretValue || len(sec.Data) != 1 || len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != app.UID {
		t.Errorf("secret = %v, owners %v", sec.Data, sec.OwnerReferences)
	}

	// Refused patches change nothing.
	for _, tc := range []struct {
		req   apiclient.PatchEnvRequest
		field string
	}{
		{apiclient.PatchEnvRequest{Set: map[string]string{"1BAD": "x"}}, "set.1BAD"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"PORT": "80"}}, "set.PORT"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"OK": "x", "bad-name": "y"}, Secret: true}, "set.bad-name"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"A": "x"}, Unset: []string{"A"}}, "unset[0]"},
		{apiclient.PatchEnvRequest{}, "set"},
		// A process environment cannot carry NUL: every value is a C string.
		{apiclient.PatchEnvRequest{Set: map[string]string{"GREETING": "hi\x00there"}}, "set.GREETING"},
		{apiclient.PatchEnvRequest{Set: map[string]string{"OK": "x", "API_KEY": "\x00"}, Secret: true}, "set.API_KEY"},
	} {
		a := call(t, e, http.MethodPatch, "/apps/web/env", token, tc.req)
		name, isSet := strings.CutPrefix(tc.field, "set.")
		if a.status != http.StatusUnprocessableEntity || a.err().Field != tc.field || isSet && !strings.Contains(a.err().Message, name) {
			t.Errorf("patch %+v: %d %s, want 422 with field %s, naming it", tc.req, a.status, a.body, tc.field)
		}
	}
	after := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "envacme", Name: "web"}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != app.ResourceVersion {
		t.Errorf("refused patches changed the App: %+v", after.Spec.Env)
	}

	// A secret variable made plain leaves the Secret, which goes when empty.
	a = call(t, e, http.MethodPatch, "/apps/web/env", token, apiclient.PatchEnvRequest{Set: map[string]string{"DATABASE_URL": "sqlite://x"}, Unset: []string{"EMPTY"}})
	wantStatus(t, "making a secret plain", a, http.StatusOK)
	vars = nil
	a.decode(t, &vars)
	if len(vars) != 2 || vars[0].Name != "DATABASE_URL" || vars[0].Secret || *vars[0].Value != "sqlite://x" || vars[1].Name != "GREETING" {
		t.Errorf("env after = %s", a.body)
	}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "envacme", Name: "web-env"}, sec); !apierrors.IsNotFound(err) {
		t.Errorf("the emptied secret: err = %v, want NotFound", err)
	}

	var actions []string
	for _, en := range auditActions(t, e, tenant.ID) {
		actions = append(actions, en.Action)
		if strings.Contains(string(en.Details), "hunter2") || strings.Contains(string(en.Details), "hello") {
			t.Errorf("audit entry holds a value: %s", en.Details)
		}
	}
	if fmt.Sprint(actions) != "[app.create env.set env.set env.set env.unset]" {
		t.Errorf("audit = %v", actions)
	}
}

func testBuilds(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "buildsacme")
	createApp(t, e, token, "web")

	a := call(t, e, http.MethodGet, "/apps/web/builds/latest", token, nil)
	if a.status != http.StatusNotFound || !strings.Contains(a.err().Message, "push") {
		t.Errorf("latest build before any: %d %s, want 404 saying to push", a.status, a.body)
	}
	b1, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "web", Commit: "abc1234"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.AppendBuildLog(ctx, b1.ID, "-----> Go app detected", "main.go:1: syntax error"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.FinishBuild(ctx, b1.ID, store.BuildResult{Status: store.BuildFailed, Error: "compilation failed"}); err != nil {
		t.Fatal(err)
	}

	a = call(t, e, http.MethodGet, "/apps/web/builds", token, nil)
	wantStatus(t, "listing builds", a, http.StatusOK)
	var builds []apiclient.Build
	a.decode(t, &builds)
	if len(builds) != 1 || builds[0].Number != 1 || builds[0].Status != "failed" || builds[0].Error != "compilation failed" || builds[0].FinishedAt == nil {
		t.Errorf("builds = %s", a.body)
	}
	// A failed build's log stays readable.
	a = call(t, e, http.MethodGet, "/apps/web/builds/1/log", token, nil)
	wantStatus(t, "reading a build log", a, http.StatusOK)
	if string(a.body) != "-----> Go app detected\nmain.go:1: syntax error\n" || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		t.Errorf("log = %q (%s)", a.body, a.header.Get("Content-Type"))
	}
	for _, path := range []string{"/apps/web/builds/2", "/apps/web/builds/x/log", "/apps/web/builds/0"} {
		a = call(t, e, http.MethodGet, path, token, nil)
		wantStatus(t, path, a, http.StatusNotFound)
	}

	// Following a running build streams each line as it is appended and
	// ends when the build does.
	b2, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.AppendBuildLog(ctx, b2.ID, "first"); err != nil {
		t.Fatal(err)
	}
	resp := stream(t, ctx, e, "/apps/web/builds/latest/log?follow=true", token)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("followed line %q, want %q", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("line %q did not arrive within 30s", want)
		}
	}
	next("first")
	for _, l := range []string{"second", "third"} {
		if err := e.Store.AppendBuildLog(ctx, b2.ID, l); err != nil {
			t.Fatal(err)
		}
		next(l)
	}
	if _, err := e.Store.FinishBuild(ctx, b2.ID, store.BuildResult{Status: store.BuildSucceeded, Image: "r/buildsacme/web@sha256:2"}); err != nil {
		t.Fatal(err)
	}
	select {
	case l, ok := <-lines:
		if ok {
			t.Fatalf("after the build ended: line %q, want the end of the stream", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end with the build")
	}

	a = call(t, e, http.MethodGet, "/builds", token, nil)
	wantStatus(t, "listing all builds", a, http.StatusOK)
	a.decode(t, &builds)
	if len(builds) != 2 || builds[0].Number != 2 || builds[0].Status != "succeeded" || builds[0].Image == "" {
		t.Errorf("all builds = %s", a.body)
	}
}

func testRollback(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "rbacme")
	createApp(t, e, token, "web")

	a := call(t, e, http.MethodPost, "/apps/web/rollback", token, nil)
	if a.status != http.StatusUnprocessableEntity || a.err().Field != "release" {
		t.Errorf("rollback without releases: %d %s, want 422 on release", a.status, a.body)
	}
	b, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "web", Commit: "abc1234"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.FinishBuild(ctx, b.ID, store.BuildResult{Status: store.BuildSucceeded, Image: "r/rbacme/web@sha256:1"}); err != nil {
		t.Fatal(err)
	}
	for i, img := range []string{"r/rbacme/web@sha256:1", "r/rbacme/web@sha256:2"} {
		nr := store.NewRelease{TenantID: tenant.ID, App: "web", Image: img, Kind: store.ReleaseKindDeploy, Description: fmt.Sprintf("Deploy %d", i+1), CreatedBy: "git"}
		if i == 0 {
			nr.BuildID = b.ID
		}
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}

	// Default: the one before the current (the latest while the App's
	// status names none).
	a = call(t, e, http.MethodPost, "/apps/web/rollback", token, nil)
	wantStatus(t, "rollback", a, http.StatusCreated)
	var rb apiclient.Rollback
	a.decode(t, &rb)
	if rb.Release != 3 || rb.RolledBackTo != 1 {
		t.Errorf("rollback = %+v, want v3 running v1", rb)
	}
	if calls := e.Releaser.Calls(); len(calls) != 1 || calls[0] != (apitest.Rollback{Tenant: "rbacme", App: "web", To: 1, Actor: "token:test"}) {
		t.Errorf("Releaser calls = %+v", calls)
	}

	// The App's status says v3 serves: default goes to v2.
	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "rbacme", Name: "web"}, app); err != nil {
		t.Fatal(err)
	}
	app.Status.CurrentRelease = 3
	if err := e.Kube.Status().Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	a = call(t, e, http.MethodPost, "/apps/web/rollback", token, apiclient.RollbackRequest{})
	wantStatus(t, "second rollback", a, http.StatusCreated)
	a.decode(t, &rb)
	if rb.RolledBackTo != 2 || rb.Release != 4 {
		t.Errorf("second rollback = %+v, want v4 running v2", rb)
	}

	// Explicit targets; refused ones do not reach the Releaser.
	for _, tc := range []struct {
		to     int
		status int
	}{
		{9, http.StatusUnprocessableEntity},
		{3, http.StatusUnprocessableEntity}, // the current one
		{-1, http.StatusUnprocessableEntity},
	} {
		a := call(t, e, http.MethodPost, "/apps/web/rollback", token, apiclient.RollbackRequest{Release: tc.to})
		if a.status != tc.status || a.err().Field != "release" {
			t.Errorf("rollback to %d: %d %s, want %d on release", tc.to, a.status, a.body, tc.status)
		}
	}
	if n := len(e.Releaser.Calls()); n != 2 {
		t.Errorf("%d Releaser calls after refused rollbacks, want 2", n)
	}
	a = call(t, e, http.MethodPost, "/apps/web/rollback", token, apiclient.RollbackRequest{Release: 1})
	wantStatus(t, "rollback to v1", a, http.StatusCreated)
	if calls := e.Releaser.Calls(); calls[len(calls)-1].To != 1 {
		t.Errorf("last Releaser call = %+v, want to 1", calls[len(calls)-1])
	}

	a = call(t, e, http.MethodGet, "/apps/web/releases", token, nil)
	wantStatus(t, "listing releases", a, http.StatusOK)
	var releases []apiclient.Release
	a.decode(t, &releases)
	if len(releases) != 5 || releases[0].Number != 5 || releases[0].Description != "Rollback to v1" || releases[0].Build != 1 ||
		!releases[2].Current || releases[1].Current || releases[4].Build != 1 || releases[3].Build != 0 {
		t.Errorf("releases = %s", a.body)
	}

	var rollbacks int
	for _, en := range auditActions(t, e, tenant.ID) {
		if en.Action == "app.rollback" {
			rollbacks++
		}
	}
	if rollbacks != 3 {
		t.Errorf("%d app.rollback audit entries, want 3", rollbacks)
	}
}

func testRuntimeLogs(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	_, token := e.TenantToken(t, "logsacme")
	createApp(t, e, token, "web")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 3 {
		e.Logs.Add("logsacme", "web", api.LogLine{Time: t0.Add(time.Duration(i) * time.Second), Process: "web", Instance: "1", Stream: "stdout", Text: fmt.Sprint("line ", i)})
	}

	a := call(t, e, http.MethodGet, "/apps/web/logs?tail=2", token, nil)
	wantStatus(t, "logs", a, http.StatusOK)
	if a.header.Get("Content-Type") != "application/x-ndjson" {
		t.Errorf("content type %q", a.header.Get("Content-Type"))
	}
	var got []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(a.body)), "\n") {
		var line api.LogLine
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, line.Text)
	}
	if fmt.Sprint(got) != "[line 1 line 2]" {
		t.Errorf("tail 2 = %v", got)
	}
	for _, q := range []string{"tail=-1", "tail=x", "follow=maybe"} {
		a := call(t, e, http.MethodGet, "/apps/web/logs?"+q, token, nil)
		if a.status != http.StatusUnprocessableEntity {
			t.Errorf("logs?%s: %d, want 422", q, a.status)
		}
	}

	// Following streams lines as the source sends them.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := stream(t, ctx, e, "/apps/web/logs?follow=true&tail=0", token)
	sc := bufio.NewScanner(resp.Body)
	for _, text := range []string{"live 1", "live 2"} {
		select {
		case e.Logs.Follow() <- api.LogLine{Time: t0, Process: "web", Text: text}:
		case <-time.After(30 * time.Second):
			t.Fatalf("nobody followed the logs within 30s")
		}
		if !sc.Scan() {
			t.Fatalf("stream ended: %v", sc.Err())
		}
		var line api.LogLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Text != text {
			t.Fatalf("followed %s (%v), want %q", sc.Bytes(), err, text)
		}
	}
}

func testSSHKeys(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	tenant, token := e.TenantToken(t, "keysacme")
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl dev@laptop"

	a := call(t, e, http.MethodPost, "/ssh-keys", token, apiclient.AddSSHKeyRequest{PublicKey: key})
	wantStatus(t, "adding a key", a, http.StatusCreated)
	var k apiclient.SSHKey
	a.decode(t, &k)
	if k.Name != "dev@laptop" || !strings.HasPrefix(k.Fingerprint, "SHA256:") {
		t.Errorf("key = %+v", k)
	}
	for _, tc := range []struct {
		key    string
		status int
	}{
		{"not a key", http.StatusUnprocessableEntity},
		{key, http.StatusConflict},
	} {
		a := call(t, e, http.MethodPost, "/ssh-keys", token, apiclient.AddSSHKeyRequest{PublicKey: tc.key})
		if a.status != tc.status || a.err().Field != "publicKey" {
			t.Errorf("adding %q: %d %s, want %d on publicKey", tc.key, a.status, a.body, tc.status)
		}
	}
	a = call(t, e, http.MethodGet, "/ssh-keys", token, nil)
	var keys []apiclient.SSHKey
	a.decode(t, &keys)
	if len(keys) != 1 || keys[0].ID != k.ID {
		t.Errorf("keys = %s", a.body)
	}
	_, other := e.TenantToken(t, "keysother")
	// Another tenant adding the key gets the answer garbage gets: nothing
	// tells it that someone registered the key.
	garbage := call(t, e, http.MethodPost, "/ssh-keys", other, apiclient.AddSSHKeyRequest{PublicKey: "not a key"})
	taken := call(t, e, http.MethodPost, "/ssh-keys", other, apiclient.AddSSHKeyRequest{PublicKey: key})
	if taken.status != garbage.status || !bytes.Equal(taken.body, garbage.body) {
		t.Errorf("another tenant adding a registered key: %d %s; garbage: %d %s; want the same answer", taken.status, taken.body, garbage.status, garbage.body)
	}
	a = call(t, e, http.MethodDelete, "/ssh-keys/"+k.ID, other, nil)
	wantStatus(t, "deleting another tenant's key", a, http.StatusNotFound)
	a = call(t, e, http.MethodDelete, "/ssh-keys/"+k.ID, token, nil)
	wantStatus(t, "deleting a key", a, http.StatusNoContent)
	a = call(t, e, http.MethodDelete, "/ssh-keys/"+k.ID, token, nil)
	wantStatus(t, "deleting it again", a, http.StatusNotFound)

	var actions []string
	for _, en := range auditActions(t, e, tenant.ID) {
		actions = append(actions, en.Action)
	}
	if fmt.Sprint(actions) != "[sshkey.add sshkey.delete]" {
		t.Errorf("audit = %v", actions)
	}
}

func testHealthz(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	a := call(t, e, http.MethodGet, "/healthz", "", nil)
	wantStatus(t, "healthz", a, http.StatusOK)
	if string(bytes.TrimSpace(a.body)) != `{"status":"ok"}` {
		t.Errorf("healthz answered %s, want only the status", a.body)
	}
	e.SetNotReady(fmt.Errorf("builder v1.2.3 not started: dial tcp 10.0.0.7:5000"))
	// Anyone, and a tenant, learn only that it is down.
	_, tenantToken := e.TenantToken(t, "healthacme")
	for who, token := range map[string]string{"an anonymous caller": "", "a tenant": tenantToken} {
		a = call(t, e, http.MethodGet, "/healthz", token, nil)
		if a.status != http.StatusServiceUnavailable || string(bytes.TrimSpace(a.body)) != `{"status":"down"}` {
			t.Errorf("healthz with a failing check, for %s: %d %s, want 503 {\"status\":\"down\"} alone", who, a.status, a.body)
		}
	}
	// An operator learns why.
	a = call(t, e, http.MethodGet, "/healthz", e.OperatorToken, nil)
	if a.status != http.StatusServiceUnavailable || !strings.Contains(a.err().Message, "builder v1.2.3 not started") {
		t.Errorf("healthz with a failing check, for an operator: %d %s, want 503 naming it", a.status, a.body)
	}
}

// testDefaultHostnameClash: app "x-y" of tenant "clash-z" and app "x" of
// tenant "y-clash-z" would share x-y-clash-z; the second is refused, with
// nothing created.
func testDefaultHostnameClash(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	_, tokenA := e.TenantToken(t, "clash-z")
	_, tokenB := e.TenantToken(t, "y-clash-z")
	createApp(t, e, tokenA, "x-y")
	got := call(t, e, http.MethodPost, "/apps", tokenB, apiclient.CreateAppRequest{Name: "x"})
	wantStatus(t, "an app whose default hostname is taken", got, http.StatusConflict)
	if body := string(got.body); !strings.Contains(body, `"field":"name"`) || !strings.Contains(body, "x-y-clash-z") {
		t.Fatalf("answer = %s, want field name and the hostname", body)
	}
	var app platformv1alpha1.App
	if err := e.Kube.Get(t.Context(), client.ObjectKey{Namespace: "y-clash-z", Name: "x"}, &app); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused app exists: %v", err)
	}
	createApp(t, e, tokenB, "other")
}
