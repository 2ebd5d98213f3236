package edge_test

import (
	"io"
	"net/http"
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
	if len(got) != 1 || got[0] != (edge.AppRef{Tenant: "acme", App: "shop"}) {
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
		req, err := http.NewRequest(http.MethodGet, s.URL+"/cart", nil)
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

	if code, body, _ := get("shop-acme.apps.example.com", ""); code != 200 || body != "shop serves" {
		t.Fatalf("before maintenance: %d %q", code, body)
	}
	// "gone" runs nothing in the runtime (after a restart of the
	// platform, in maintenance): its default hostname still answers.
	tb.SetMaintenance([]edge.AppRef{{Tenant: "acme", App: "shop"}, {Tenant: "acme", App: "gone"}})
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
