package api

import (
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/edge"
)

// dnsLabel is RFC 1123's label: what a hostname's labels, and an app's
// default hostname label, must be.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// FuzzNormalizeHostname checks a Route's hostname validation against the
// DNS rules: an accepted hostname is lower-case, at most 253 characters, of
// two labels or more that are RFC 1123 labels of at most 63 characters, of
// which only the first may be '*'; it is no IP address, normalizing it again
// changes nothing, the edge looks it up under the same name, and the Route
// object named after it is a valid Kubernetes name. A refused one is a 422
// on the field.
func FuzzNormalizeHostname(f *testing.F) {
	for _, seed := range []string{
		"www.example.com", "Www.Example.COM.", " api.example.com ", "*.example.com", "*.co.uk",
		"example", "localhost", "127.0.0.1", "::1", "[::1]", "1.2.3.4.5", "0x7f.1",
		"a..b.com", "-a.com", "a-.com", "a_b.com", "*.*.example.com", "www.*.com", "*example.com",
		strings.Repeat("a", 63) + ".com", strings.Repeat("a", 64) + ".com",
		strings.Repeat("a.", 126) + "com", "xn--bcher-kva.example", "bücher.example", "www.example.com:443",
		"www.example.com\x00.evil.com", "www.example.com\n", "*.", ".", "..",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		host, err := normalizeHostname("hostname", raw)
		if err != nil {
			var he *httpError
			if !errors.As(err, &he) || he.status != 422 || he.field != "hostname" || he.message == "" {
				t.Fatalf("normalizeHostname(%q) = %v, want a 422 on hostname", raw, err)
			}
			return
		}
		if len(host) > 253 || host != strings.ToLower(host) || net.ParseIP(host) != nil {
			t.Fatalf("normalizeHostname(%q) accepted %q", raw, host)
		}
		labels := strings.Split(host, ".")
		if len(labels) < 2 {
			t.Fatalf("normalizeHostname(%q) accepted %q: one label", raw, host)
		}
		for i, l := range labels {
			if i == 0 && l == "*" {
				continue
			}
			if len(l) > 63 || !dnsLabel.MatchString(l) {
				t.Fatalf("normalizeHostname(%q) accepted %q: label %q", raw, host, l)
			}
		}
		if again, err := normalizeHostname("hostname", host); err != nil || again != host {
			t.Fatalf("normalizeHostname(%q) = %q, %v; want it unchanged", host, again, err)
		}
		if !strings.HasPrefix(host, "*.") && edge.NormalizeHost(host) != host {
			t.Fatalf("the edge looks %q up as %q", host, edge.NormalizeHost(host))
		}
		for _, prefix := range []string{"/", "/api"} {
			if name := routeObjectName(host, prefix); len(validation.IsDNS1123Subdomain(name)) > 0 {
				t.Fatalf("routeObjectName(%q, %q) = %q: %v", host, prefix, name, validation.IsDNS1123Subdomain(name))
			}
		}
	})
}

// FuzzHostnamesOverlap checks the API's rule that one hostname belongs to
// one tenant against the edge's routing: whenever a request for some name
// is routed by the edge both under a and under b (each alone in a table),
// the API must have judged a and b to overlap, in either order.
func FuzzHostnamesOverlap(f *testing.F) {
	for _, seed := range [][2]string{
		{"www.example.com", "www.example.com"},
		{"*.example.com", "www.example.com"},
		{"*.example.com", "a.b.example.com"},
		{"*.example.com", "example.com"},
		{"*.example.com", "*.www.example.com"},
		{"*.com", "example.com"},
		{"WWW.example.com.", "www.example.com"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, rawA, rawB string) {
		a, errA := normalizeHostname("hostname", rawA)
		b, errB := normalizeHostname("hostname", rawB)
		if errA != nil || errB != nil {
			return
		}
		if domains.Overlap(a, b) != domains.Overlap(b, a) {
			t.Fatalf("domains.Overlap(%q, %q) is not symmetric", a, b)
		}
		routes := func(h string) *edge.Table {
			tb := &edge.Table{}
			tb.SetRoutes([]edge.RouteEntry{{Hostname: h, Tenant: "t", App: "web"}})
			return tb
		}
		ta, tb := routes(a), routes(b)
		var names []string
		for _, h := range []string{a, b} {
			if suffix, ok := strings.CutPrefix(h, "*."); ok {
				names = append(names, "x."+suffix, "x.x."+suffix, suffix)
			} else {
				names = append(names, h)
			}
		}
		for _, name := range names {
			_, _, okA := ta.Resolve(name, "/")
			_, _, okB := tb.Resolve(name, "/")
			if okA && okB && !domains.Overlap(a, b) {
				t.Fatalf("the edge routes %q under both %q and %q, which the API lets two tenants hold", name, a, b)
			}
		}
	})
}

// FuzzDefaultHostname checks that every app name the API accepts for a
// tenant gives a default hostname whose first label is a DNS label, and
// that the edge, with that app alone running, routes the name to it and
// nothing else.
func FuzzDefaultHostname(f *testing.F) {
	for _, seed := range [][2]string{
		{"web", "acme"}, {"a-b", "c"}, {"a", "b-c"}, {strings.Repeat("a", 40), strings.Repeat("t", 22)},
		{"web-", "acme"}, {"2web", "acme"}, {"web", "kube-system"}, {"web", "-x"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, app, tenant string) {
		if validateTenantName(tenant) != nil || validateAppName(app, tenant) != nil {
			return
		}
		const domain = "apps.bex.test"
		host := edge.Hostname(tenant, app, domain)
		label, _ := strings.CutSuffix(host, "."+domain)
		if len(label) > 63 || !dnsLabel.MatchString(label) {
			t.Fatalf("app %q of tenant %q: default hostname %q", app, tenant, host)
		}
		dh := &edge.DefaultHosts{Domain: domain, Apps: oneApp{tenant: tenant, app: app}}
		r, _, ok := dh.Resolve(host, "/")
		if !ok || r.Tenant != tenant || r.App != app {
			t.Fatalf("the edge resolves %q to %+v (%v), want %s/%s", host, r, ok, tenant, app)
		}
	})
}

// oneApp is an edge.Apps running one app.
type oneApp struct{ tenant, app string }

func (o oneApp) Runs(tenant, app string) bool { return tenant == o.tenant && app == o.app }

func (o oneApp) Upstreams(tenant, app string) []string {
	if o.Runs(tenant, app) {
		return []string{"127.0.0.1:1"}
	}
	return nil
}
