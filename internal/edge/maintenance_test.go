package edge_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/edge"
)

// TestMaintenanceApps: the apps the edge holds in maintenance are the
// suspended ones not being deleted (a deleted app's name is free again).
func TestMaintenanceApps(t *testing.T) {
	app := func(ns, name string, suspended, deleting bool) platformv1alpha1.App {
		a := platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: platformv1alpha1.AppSpec{Suspended: suspended}}
		if deleting {
			now := metav1.Now()
			a.DeletionTimestamp = &now
		}
		return a
	}
	got := edge.MaintenanceApps([]platformv1alpha1.App{
		app("acme", "shop", true, false), app("acme", "blog", false, false), app("beta", "shop", true, true),
	})
	if len(got) != 1 || got[0] != (edge.MaintenanceApp{Tenant: "acme", App: "shop"}) {
		t.Errorf("MaintenanceApps = %+v, want acme/shop alone", got)
	}
}

// TestMaintenance: an app the table knows in maintenance mode answers 503
// with Retry-After and a page saying so, on its default hostname (whether
// or not the runtime runs it) and its Routes, as HTML to a browser and as
// text to curl; another app with no instance keeps the generic 503, and
// the app serves again once it leaves maintenance.
func TestMaintenance(t *testing.T) {
	up := upstream(t, named("shop serves"))
	tb := &edge.Table{Defaults: &edge.DefaultHosts{Domain: "apps.example.com", Apps: apps{
		{"acme", "shop"}: {up},
		{"acme", "idle"}: nil,
	}}}
	tb.SetRoutes([]edge.RouteEntry{{Hostname: "www.shop.example", Tenant: "acme", App: "shop"}})
	s := newProxy(t, tb)

	get := func(host, accept string) (int, string, http.Header) {
		t.Helper()
		return getAs(t, s, http.MethodGet, host, accept)
	}

	if code, body, _ := get("shop-acme.apps.example.com", ""); code != 200 || body != "shop serves" {
		t.Fatalf("before maintenance: %d %q", code, body)
	}
	// "gone" runs nothing in the runtime (after a restart of the
	// platform, in maintenance): its default hostname still answers.
	tb.SetMaintenance([]edge.MaintenanceApp{{Tenant: "acme", App: "shop"}, {Tenant: "acme", App: "gone"}})
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	for _, host := range []string{"shop-acme.apps.example.com", "www.shop.example", "gone-acme.apps.example.com"} {
		app := strings.Split(strings.Split(host, ".")[0], "-")[0]
		if host == "www.shop.example" {
			app = "shop"
		}
		code, body, h := get(host, browser)
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") != edge.MaintenanceRetryAfter ||
			!strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(body, "<h1>"+app+" is down for maintenance</h1>") {
			t.Errorf("%s in maintenance, as a browser: %d %s %q %q", host, code, h.Get("Retry-After"), h.Get("Content-Type"), body)
		}
		code, body, h = get(host, "")
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") != edge.MaintenanceRetryAfter ||
			!strings.HasPrefix(h.Get("Content-Type"), "text/plain") || !strings.Contains(body, app+" is down for maintenance") {
			t.Errorf("%s in maintenance, as curl: %d %s %q %q", host, code, h.Get("Retry-After"), h.Get("Content-Type"), body)
		}
	}
	if code, body, _ := get("shop-acme.apps.example.com", "text/html;q=0, text/plain"); code != 503 || strings.Contains(body, "<h1>") {
		t.Errorf("text/html;q=0 got HTML: %d %q", code, body)
	}
	if code, body, h := get("idle-acme.apps.example.com", browser); code != 503 || !strings.Contains(body, "no healthy instance") || h.Get("Retry-After") != "" {
		t.Errorf("an app with no instance, not in maintenance: %d %q", code, body)
	}
	if code, body, _ := get("other-acme.apps.example.com", ""); code != http.StatusNotFound {
		t.Errorf("an unknown app: %d %q", code, body)
	}
	if !tb.Claimed("gone-acme.apps.example.com") {
		t.Error("the default hostname of an app in maintenance is not claimed for its certificate")
	}

	tb.SetMaintenance(nil)
	for _, host := range []string{"shop-acme.apps.example.com", "www.shop.example"} {
		if code, body, _ := get(host, browser); code != 200 || body != "shop serves" {
			t.Errorf("%s after maintenance: %d %q", host, code, body)
		}
	}
}

// getAs requests host's path from s as a client that sends accept, and
// answers the status, the body and the headers.
func getAs(t *testing.T, s *httptest.Server, method, host, accept string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+"/cart", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// TestMaintenancePages: an app in maintenance mode with a page of its own
// answers a browser with that page, byte for byte, on its default hostname
// and its Routes, with 503, Retry-After, no-store, nosniff and a
// Content-Security-Policy that runs none of the page's scripts and loads
// nothing from elsewhere; curl keeps the plain 503 line. Another app in
// maintenance without a page gets the edge's page, under the same policy.
// The table holds a page only while its app is in maintenance: an app
// that comes back, and goes into maintenance again without a page, gets
// the edge's page, not the old one.
func TestMaintenancePages(t *testing.T) {
	up := upstream(t, named("shop serves"))
	tb := &edge.Table{Defaults: &edge.DefaultHosts{Domain: "apps.example.com", Apps: apps{
		{"acme", "shop"}: {up},
		{"acme", "blog"}: {up},
	}}}
	tb.SetRoutes([]edge.RouteEntry{{Hostname: "www.shop.example", Tenant: "acme", App: "shop"}})
	s := newProxy(t, tb)
	browser := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	page := `<!doctype html><html><head><style>h1{color:teal}</style></head><body><h1>The shop is closed for stock-taking</h1>` +
		`<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw="><script>document.title="pwned"</script></body></html>`

	tb.SetMaintenance([]edge.MaintenanceApp{{Tenant: "acme", App: "shop", Page: page}, {Tenant: "acme", App: "blog"}})
	wantHeaders := func(what string, h http.Header) {
		t.Helper()
		if h.Get("Retry-After") != edge.MaintenanceRetryAfter || h.Get("Cache-Control") != "no-store" || h.Get("X-Content-Type-Options") != "nosniff" ||
			h.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("%s: headers %v", what, h)
		}
		csp := h.Get("Content-Security-Policy")
		if csp != edge.MaintenanceCSP || !strings.HasPrefix(csp, "default-src 'none';") || strings.Contains(csp, "script-src") ||
			!strings.Contains(csp, "style-src 'unsafe-inline'") || !strings.Contains(csp, "img-src data:") {
			t.Errorf("%s: Content-Security-Policy %q, want %q: no script, nothing from elsewhere", what, csp, edge.MaintenanceCSP)
		}
	}
	for _, host := range []string{"shop-acme.apps.example.com", "www.shop.example"} {
		code, body, h := getAs(t, s, http.MethodGet, host, browser)
		if code != http.StatusServiceUnavailable || body != page {
			t.Errorf("%s, the app's page to a browser: %d %q, want 503 and the page", host, code, body)
		}
		wantHeaders(host+" with its page", h)
		code, body, h = getAs(t, s, http.MethodGet, host, "")
		if code != http.StatusServiceUnavailable || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") ||
			body != "503 shop is down for maintenance: the app is in maintenance mode and will be back shortly\n" {
			t.Errorf("%s, to curl: %d %q %q", host, code, h.Get("Content-Type"), body)
		}
		if code, body, _ := getAs(t, s, http.MethodHead, host, browser); code != http.StatusServiceUnavailable || body != "" {
			t.Errorf("%s, HEAD: %d %q", host, code, body)
		}
	}
	code, body, h := getAs(t, s, http.MethodGet, "blog-acme.apps.example.com", browser)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "<h1>blog is down for maintenance</h1>") || strings.Contains(body, "stock-taking") {
		t.Errorf("an app without a page of its own: %d %q, want the edge's page", code, body)
	}
	wantHeaders("the edge's page", h)

	tb.SetMaintenance([]edge.MaintenanceApp{{Tenant: "acme", App: "blog"}})
	if code, body, _ := getAs(t, s, http.MethodGet, "shop-acme.apps.example.com", browser); code != http.StatusOK || body != "shop serves" {
		t.Errorf("shop out of maintenance: %d %q", code, body)
	}
	tb.SetMaintenance([]edge.MaintenanceApp{{Tenant: "acme", App: "shop"}})
	if code, body, _ := getAs(t, s, http.MethodGet, "www.shop.example", browser); code != http.StatusServiceUnavailable || !strings.Contains(body, "<h1>shop is down for maintenance</h1>") {
		t.Errorf("shop in maintenance again, without a page: %d %q, want the edge's page", code, body)
	}
}
