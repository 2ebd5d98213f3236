package api_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/domains"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// testRoutes: two tenants add, list and remove custom hostnames. A
// hostname one tenant has is refused to the other without naming it; the
// platform's own domain and malformed names are refused; refused requests
// change nothing; neither tenant sees the other's routes.
func testRoutes(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	ctx := t.Context()
	tenantA, tokenA := e.TenantToken(t, "routesa")
	tenantB, tokenB := e.TenantToken(t, "routesb")
	createApp(t, e, tokenA, "web")
	createApp(t, e, tokenA, "api")
	createApp(t, e, tokenB, "web")
	const host = "www.routes-test.example"

	// Added as typed: lowercased, default prefix and TLS, DNS target.
	a := call(t, e, http.MethodPost, "/apps/web/routes", tokenA, apiclient.AddRouteRequest{Hostname: "WWW.Routes-Test.example."})
	wantStatus(t, "adding a route", a, http.StatusCreated)
	var added apiclient.Route
	a.decode(t, &added)
	want := apiclient.Route{
		Hostname: host, PathPrefix: "/", App: "web", Process: "web", TLS: "Auto", Status: "pending", Conditions: []apiclient.RouteCondition{},
		DNSTarget: apiclient.DNSTarget{CNAME: "web-routesa." + apitest.AppDomain, Addresses: []string{apitest.EdgeAddress}},
		Verification: &apiclient.DomainVerification{
			Type: "TXT", Name: "_bex-challenge." + host, Value: domains.Token(apitest.AppDomain, "routesa", host),
		},
	}
	added.CreatedAt = want.CreatedAt
	if !reflect.DeepEqual(added, want) {
		t.Errorf("added route = %+v (verification %+v), want %+v (verification %+v)", added, added.Verification, want, want.Verification)
	}
	var objs platformv1alpha1.RouteList
	if err := e.Kube.List(ctx, &objs, client.InNamespace("routesa")); err != nil || len(objs.Items) != 1 {
		t.Fatalf("Route objects of A: %d, %v", len(objs.Items), err)
	}
	obj := objs.Items[0]
	if errs := validation.IsDNS1123Subdomain(obj.Name); len(errs) > 0 || !strings.HasPrefix(obj.Name, host+"-") {
		t.Errorf("Route object name %q: %v", obj.Name, errs)
	}
	if obj.Spec.Hostname != host || obj.Spec.AppRef.Name != "web" || obj.Spec.TLS.Mode != platformv1alpha1.TLSModeAuto ||
		obj.Labels[api.TenantLabel] != "routesa" || obj.Labels[api.AppLabel] != "web" {
		t.Errorf("Route object = %+v %+v", obj.ObjectMeta.Labels, obj.Spec)
	}

	// The same tenant may send another prefix of the hostname to another
	// app, not the same prefix twice.
	a = call(t, e, http.MethodPost, "/apps/api/routes", tokenA, apiclient.AddRouteRequest{Hostname: host, PathPrefix: "/api", TLS: "none"})
	wantStatus(t, "adding another prefix", a, http.StatusCreated)
	a = call(t, e, http.MethodPost, "/apps/api/routes", tokenA, apiclient.AddRouteRequest{Hostname: host})
	if a.status != http.StatusConflict || a.err().Field != "hostname" || !strings.Contains(a.err().Message, "routes to app web already") {
		t.Errorf("the same hostname and prefix for another app: %d %s, want 409 naming app web", a.status, a.body)
	}
	a = call(t, e, http.MethodPost, "/apps/web/routes", tokenA, apiclient.AddRouteRequest{Hostname: "*.wild.routes-test.example"})
	wantStatus(t, "adding a wildcard", a, http.StatusCreated)

	// Before A proves it owns the names, B is not refused them: a Route
	// that is not verified holds nothing (B would wait for its own TXT
	// record). The Route controller then finds A's records.
	verify := func(ns string) {
		t.Helper()
		var list platformv1alpha1.RouteList
		if err := e.Kube.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			r := &list.Items[i]
			meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: platformv1alpha1.RouteDomainVerifiedCondition,
				Status: metav1.ConditionTrue, Reason: platformv1alpha1.RouteTXTRecordFoundReason, Message: "found"})
			if err := e.Kube.Status().Update(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := call(t, e, http.MethodPost, "/apps/web/routes", tokenB, apiclient.AddRouteRequest{Hostname: "shop.wild.routes-test.example"})
	wantStatus(t, "B adding a name under A's wildcard before A proved it", b, http.StatusCreated)
	var squat apiclient.Route
	b.decode(t, &squat)
	if squat.Verification == nil || squat.Verification.Value != domains.Token(apitest.AppDomain, "routesb", "shop.wild.routes-test.example") ||
		squat.Verification.Value == domains.Token(apitest.AppDomain, "routesa", "shop.wild.routes-test.example") || squat.Verified {
		t.Errorf("B's route verification = %+v, verified %v: want B's own token", squat.Verification, squat.Verified)
	}
	if err := call(t, e, http.MethodDelete, "/apps/web/routes/shop.wild.routes-test.example", tokenB, nil); err.status != http.StatusNoContent {
		t.Fatalf("B removing its route: %d %s", err.status, err.body)
	}
	verify("routesa")

	// What tenant B is refused.
	routesBefore, auditBefore := routeCount(t, e), countRows(t, e, "audit_log")
	for _, tc := range []struct {
		name   string
		req    apiclient.AddRouteRequest
		status int
		field  string
		says   string
	}{
		{"A's hostname", apiclient.AddRouteRequest{Hostname: host}, http.StatusConflict, "hostname",
			"hostname www.routes-test.example is already in use by another tenant: if it is yours, remove it from the app that has it there, or use another hostname"},
		{"A's hostname, another prefix", apiclient.AddRouteRequest{Hostname: host, PathPrefix: "/b"}, http.StatusConflict, "hostname", "already in use by another tenant"},
		{"a wildcard over A's hostname", apiclient.AddRouteRequest{Hostname: "*.routes-test.example"}, http.StatusConflict, "hostname", "already in use by another tenant"},
		{"a name under A's wildcard", apiclient.AddRouteRequest{Hostname: "shop.wild.routes-test.example"}, http.StatusConflict, "hostname", "already in use by another tenant"},
		{"a default hostname", apiclient.AddRouteRequest{Hostname: "web-routesa." + apitest.AppDomain}, http.StatusUnprocessableEntity, "hostname", "default hostnames"},
		{"the app domain", apiclient.AddRouteRequest{Hostname: apitest.AppDomain}, http.StatusUnprocessableEntity, "hostname", "default hostnames"},
		{"a wildcard of the app domain", apiclient.AddRouteRequest{Hostname: "*." + apitest.AppDomain}, http.StatusUnprocessableEntity, "hostname", "default hostnames"},
		{"a wildcard over a public suffix", apiclient.AddRouteRequest{Hostname: "*.co.uk"}, http.StatusUnprocessableEntity, "hostname",
			"*.co.uk is a wildcard over co.uk, a public suffix under which anyone may register names: a wildcard must be under a domain of your own"},
		{"a public suffix", apiclient.AddRouteRequest{Hostname: "github.io"}, http.StatusUnprocessableEntity, "hostname", "is a public suffix"},
		{"the platform's registry", apiclient.AddRouteRequest{Hostname: apitest.ReservedHostname}, http.StatusUnprocessableEntity, "hostname",
			"the platform serves " + apitest.ReservedHostname + " itself"},
		{"a wildcard over the platform's registry", apiclient.AddRouteRequest{Hostname: "*.bex-platform.test"}, http.StatusUnprocessableEntity, "hostname", "reserved"},
		{"underscore", apiclient.AddRouteRequest{Hostname: "bad_host.example"}, http.StatusUnprocessableEntity, "hostname", "must be a DNS name of at least two labels"},
		{"one label", apiclient.AddRouteRequest{Hostname: "localhost"}, http.StatusUnprocessableEntity, "hostname", "at least two labels"},
		{"inner wildcard", apiclient.AddRouteRequest{Hostname: "www.*.example.com"}, http.StatusUnprocessableEntity, "hostname", "leading '*.'"},
		{"an IP address", apiclient.AddRouteRequest{Hostname: "192.0.2.1"}, http.StatusUnprocessableEntity, "hostname", "an IP address is not a hostname"},
		{"long label", apiclient.AddRouteRequest{Hostname: strings.Repeat("a", 64) + ".example.com"}, http.StatusUnprocessableEntity, "hostname", "longer than 63"},
		{"empty", apiclient.AddRouteRequest{}, http.StatusUnprocessableEntity, "hostname", "needs a hostname"},
		{"relative path", apiclient.AddRouteRequest{Hostname: "b.routes-other.example", PathPrefix: "api"}, http.StatusUnprocessableEntity, "pathPrefix", "must start with '/'"},
		{"tls Secret", apiclient.AddRouteRequest{Hostname: "b.routes-other.example", TLS: "Secret"}, http.StatusUnprocessableEntity, "tls", "use Auto"},
		{"tls unknown", apiclient.AddRouteRequest{Hostname: "b.routes-other.example", TLS: "strict"}, http.StatusUnprocessableEntity, "tls", "want Auto"},
	} {
		a := call(t, e, http.MethodPost, "/apps/web/routes", tokenB, tc.req)
		if a.status != tc.status || a.err().Field != tc.field || !strings.Contains(a.err().Message, tc.says) {
			t.Errorf("%s: %d %s, want %d on %s saying %q", tc.name, a.status, a.body, tc.status, tc.field, tc.says)
		}
		if strings.Contains(string(a.body), "routesa") && tc.status == http.StatusConflict {
			t.Errorf("%s: the refusal names the other tenant: %s", tc.name, a.body)
		}
	}
	if n := routeCount(t, e); n != routesBefore {
		t.Errorf("%d Routes after refused requests, want %d", n, routesBefore)
	}
	if n := countRows(t, e, "audit_log"); n != auditBefore {
		t.Errorf("audit_log has %d rows after refused requests, want %d", n, auditBefore)
	}

	// A's list shows what the controller observed, Ready first.
	if err := e.Kube.Get(ctx, client.ObjectKeyFromObject(&obj), &obj); err != nil {
		t.Fatal(err)
	}
	obj.Status.Conditions = nil
	for _, c := range []metav1.Condition{
		{Type: platformv1alpha1.RouteDomainVerifiedCondition, Status: metav1.ConditionTrue, Reason: platformv1alpha1.RouteTXTRecordFoundReason},
		{Type: platformv1alpha1.RouteDNSReadyCondition, Status: metav1.ConditionFalse, Reason: platformv1alpha1.RouteDNSNotPointingHereReason,
			Message: "DNS not pointing here: www.routes-test.example resolves to 1.2.3.4: create a CNAME record"},
		{Type: platformv1alpha1.RouteAdmittedCondition, Status: metav1.ConditionTrue, Reason: platformv1alpha1.RouteAcceptedReason},
		{Type: platformv1alpha1.RouteReadyCondition, Status: metav1.ConditionFalse, Reason: platformv1alpha1.RouteNotServingReason,
			Message: "DNSReady is False (DNSNotPointingHere): DNS not pointing here: www.routes-test.example resolves to 1.2.3.4"},
	} {
		meta.SetStatusCondition(&obj.Status.Conditions, c)
	}
	if err := e.Kube.Status().Update(ctx, &obj); err != nil {
		t.Fatal(err)
	}
	a = call(t, e, http.MethodGet, "/apps/web/routes", tokenA, nil)
	wantStatus(t, "listing A's routes", a, http.StatusOK)
	var routes []apiclient.Route
	a.decode(t, &routes)
	if len(routes) != 2 || routes[0].Hostname != "*.wild.routes-test.example" || routes[1].Hostname != host {
		t.Fatalf("A's web routes = %+v", routes)
	}
	r := routes[1]
	var types []string
	for _, c := range r.Conditions {
		types = append(types, c.Type)
	}
	if r.Ready || r.Status != "not ready" || !strings.Contains(r.StatusMessage, "resolves to 1.2.3.4") || !r.Verified ||
		!slices.Equal(types, []string{"Ready", "Admitted", "DomainVerified", "DNSReady"}) || r.Conditions[3].Reason != "DNSNotPointingHere" || r.Conditions[3].Since.IsZero() {
		t.Errorf("route with conditions = %+v", r)
	}

	// B sees none of A's routes and cannot remove them.
	for _, r := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/apps/api/routes", http.StatusNotFound},
		{http.MethodPost, "/apps/api/routes", http.StatusNotFound},
		{http.MethodDelete, "/apps/api/routes/" + host + "?pathPrefix=/api", http.StatusNotFound},
		{http.MethodDelete, "/apps/web/routes/" + host, http.StatusNotFound},
	} {
		var body any
		if r.method == http.MethodPost {
			body = apiclient.AddRouteRequest{Hostname: "b.routes-other.example"}
		}
		got := call(t, e, r.method, r.path, tokenB, body)
		if got.status != r.status || strings.Contains(string(got.body), "routesa") {
			t.Errorf("tenant B: %s %s: %d %s, want %d", r.method, r.path, got.status, got.body, r.status)
		}
	}
	got := call(t, e, http.MethodGet, "/apps/web/routes", tokenB, nil)
	if got.status != http.StatusOK || strings.TrimSpace(string(got.body)) != "[]" {
		t.Errorf("tenant B's routes: %d %s, want []", got.status, got.body)
	}
	if n := routeCount(t, e); n != routesBefore {
		t.Errorf("%d Routes after B's attempts, want %d", n, routesBefore)
	}

	// A removes routes: by prefix, and a wildcard through the client.
	a = call(t, e, http.MethodDelete, "/apps/api/routes/"+host+"?pathPrefix=/api", tokenA, nil)
	wantStatus(t, "removing a prefix", a, http.StatusNoContent)
	a = call(t, e, http.MethodDelete, "/apps/api/routes/"+host+"?pathPrefix=/api", tokenA, nil)
	if a.status != http.StatusNotFound || !strings.Contains(a.err().Message, `app "api" has no route for www.routes-test.example/api`) {
		t.Errorf("removing it again: %d %s", a.status, a.body)
	}
	ca, err := apiclient.New(e.URL, tokenA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.RemoveRoute(ctx, "web", "*.wild.routes-test.example", ""); err != nil {
		t.Fatalf("removing the wildcard: %v", err)
	}
	if rs, err := ca.ListRoutes(ctx, "web"); err != nil || len(rs) != 1 || rs[0].Hostname != host {
		t.Errorf("A's routes after removals = %+v, %v", rs, err)
	}

	// Deleting the app frees its hostnames.
	a = call(t, e, http.MethodDelete, "/apps/web", tokenA, nil)
	wantStatus(t, "deleting A's app", a, http.StatusNoContent)
	a = call(t, e, http.MethodPost, "/apps/web/routes", tokenB, apiclient.AddRouteRequest{Hostname: host})
	wantStatus(t, "B adding the freed hostname", a, http.StatusCreated)
	// B's Route, not verified, does not keep A from the name: A may add it
	// again and prove it (the Route controller then gives it to A).
	a = call(t, e, http.MethodPost, "/apps/api/routes", tokenA, apiclient.AddRouteRequest{Hostname: host})
	wantStatus(t, "A adding the hostname B claimed without proof", a, http.StatusCreated)

	var actions []string
	for _, en := range auditActions(t, e, tenantA.ID) {
		if !strings.HasPrefix(en.Action, "route.") {
			continue
		}
		var d struct{ Hostname, PathPrefix, TLS string }
		if err := json.Unmarshal(en.Details, &d); err != nil {
			t.Fatal(err)
		}
		actions = append(actions, strings.TrimSpace(strings.Join([]string{en.Action, en.Target, d.Hostname + d.PathPrefix, d.TLS}, " ")))
	}
	if want := []string{
		"route.add web www.routes-test.example/ Auto",
		"route.add api www.routes-test.example/api None",
		"route.add web *.wild.routes-test.example/ Auto",
		"route.remove api www.routes-test.example/api",
		"route.remove web *.wild.routes-test.example/",
		"route.add api www.routes-test.example/ Auto",
	}; !slices.Equal(actions, want) {
		t.Errorf("A's route audit = %q, want %q", actions, want)
	}
	var bActions []string
	for _, en := range auditActions(t, e, tenantB.ID) {
		bActions = append(bActions, en.Action)
	}
	if want := []string{"app.create", "route.add", "route.remove", "route.add"}; !slices.Equal(bActions, want) {
		t.Errorf("B's audit = %q, want %q", bActions, want)
	}
}

// routeCount counts the Routes of every tenant.
func routeCount(t *testing.T, e *apitest.Env) int {
	t.Helper()
	var list platformv1alpha1.RouteList
	if err := e.Kube.List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}
