package api

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestRouteObjectName(t *testing.T) {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	seen := map[string]string{}
	for _, tc := range []struct{ host, prefix string }{
		{"www.example.com", "/"},
		{"www.example.com", "/api"},
		{"*.example.com", "/"},
		{"wildcard.example.com", "/"},
		{long, "/"},
		{long, "/x"},
	} {
		name := routeObjectName(tc.host, tc.prefix)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("routeObjectName(%q, %q) = %q: %v", tc.host, tc.prefix, name, errs)
		}
		if routeObjectName(tc.host, tc.prefix) != name {
			t.Errorf("routeObjectName(%q, %q) is not deterministic", tc.host, tc.prefix)
		}
		if prev, ok := seen[name]; ok {
			t.Errorf("routeObjectName(%q, %q) = %q, as for %s", tc.host, tc.prefix, name, prev)
		}
		seen[name] = tc.host + tc.prefix
	}
	if got := routeObjectName("www.example.com", "/"); !strings.HasPrefix(got, "www.example.com-") {
		t.Errorf("routeObjectName = %q, want it to start with the hostname", got)
	}
}

func TestNormalizeHostname(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"www.example.com", "www.example.com"},
		{" WWW.Example.COM. ", "www.example.com"},
		{"*.example.com", "*.example.com"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"example", ""},
		{"*.com.", ""}, // a wildcard over a top-level domain
		{"a.*.example.com", ""},
		{"-a.example.com", ""},
		{"a..example.com", ""},
		{"bücher.example", ""},
		{"10.0.0.1", ""},
		{"::1", ""},
		{strings.Repeat("a.", 127) + "com", ""},
	} {
		got, err := normalizeHostname("hostname", tc.in)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("normalizeHostname(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if he, ok := err.(*httpError); err != nil && (!ok || he.field != "hostname" || he.status != 422) {
			t.Errorf("normalizeHostname(%q): %v, want a 422 on hostname", tc.in, err)
		}
	}
}

func TestCheckHostnamePolicy(t *testing.T) {
	s := &Server{appDomain: "Apps.Example.net:8080", reservedHosts: []string{"registry.example.org", "*.bex.example.org"}}
	for host, refused := range map[string]bool{
		"web-acme.apps.example.net": true,
		"apps.example.net":          true,
		"*.apps.example.net":        true,
		"*.example.net":             true, // covers apps.example.net
		"a.b.apps.example.net":      true,
		"www.example.net":           false,
		"apps.example.net.evil.com": false,
		"myapps.example.net":        false,
		"*.co.uk":                   true,
		"co.uk":                     true,
		"*.example.co.uk":           false,
		"registry.example.org":      true,
		"*.example.org":             true, // covers registry.example.org
		"api.bex.example.org":       true,
		"www.example.org":           false,
	} {
		if err := s.checkHostnamePolicy(host); (err != nil) != refused {
			t.Errorf("checkHostnamePolicy(%q) = %v, want refused %v", host, err, refused)
		}
	}
}

func TestInvalidRouteField(t *testing.T) {
	gk := schema.GroupKind{Group: "platform.bex.co", Kind: "Route"}
	for _, tc := range []struct {
		errs field.ErrorList
		want string
	}{
		{field.ErrorList{field.Invalid(field.NewPath("spec", "hostname"), "x", "must be a lowercase DNS name")}, "hostname"},
		{field.ErrorList{field.Invalid(field.NewPath("spec", "pathPrefix"), "x", "must start with '/'")}, "pathPrefix"},
		{field.ErrorList{field.Required(field.NewPath("spec", "tls", "secretName"), "")}, "tls"},
		{field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), "x", "")}, "hostname"},
	} {
		if got := invalidRouteField(apierrors.NewInvalid(gk, "r", tc.errs)); got != tc.want {
			t.Errorf("invalidRouteField(%v) = %q, want %q", tc.errs, got, tc.want)
		}
	}
}

func TestValidatePathPrefix(t *testing.T) {
	for in, want := range map[string]string{"": "/", "/": "/", "/api": "/api", "api": "", "/a b": "", "/a?x": "", "/" + strings.Repeat("a", maxPathPrefix): ""} {
		got, err := validatePathPrefix(in)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("validatePathPrefix(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
