package edge

import (
	"slices"
	"strings"
	"testing"
)

// fuzzApps runs a fixed set of "tenant/app" pairs, each with one upstream.
type fuzzApps map[string]bool

func (a fuzzApps) Runs(tenant, app string) bool { return a[tenant+"/"+app] }

func (a fuzzApps) Upstreams(tenant, app string) []string {
	if a.Runs(tenant, app) {
		return []string{tenant + "/" + app}
	}
	return nil
}

// fuzzRoutes are the admitted Routes of the fuzzed table, of two tenants,
// with the names and prefixes that make matching interesting.
var fuzzRoutes = []RouteEntry{
	{Hostname: "www.example.com", PathPrefix: "/", Tenant: "acme", App: "web"},
	{Hostname: "www.example.com", PathPrefix: "/api", Tenant: "acme", App: "api"},
	{Hostname: "www.example.com", PathPrefix: "/api/v2/", Tenant: "acme", App: "api2"},
	{Hostname: "*.example.com", PathPrefix: "/", Tenant: "acme", App: "wild"},
	{Hostname: "*.shop.example.org", PathPrefix: "/", Tenant: "other", App: "shop", PlainHTTP: true},
	{Hostname: "other.example.org", PathPrefix: "/docs", Tenant: "other", App: "docs"},
}

const fuzzDomain = "apps.bex.test"

// FuzzResolveHost resolves arbitrary Host headers and paths as the edge
// does (NormalizeHost, then the table of Routes over the default
// hostnames). A resolved request is claimed by a Route whose hostname is the
// request's host or a wildcard over exactly one label in front of it, with
// the longest prefix matching the path by whole segments, and goes to that
// Route's app; or by an app's default hostname, to that app. The claim, the
// metrics' host label, is therefore one of a bounded set of names, never
// what the client sent.
func FuzzResolveHost(f *testing.F) {
	for _, seed := range [][2]string{
		{"www.example.com", "/"}, {"WWW.Example.Com.:443", "/api/x"}, {"www.example.com", "/apix"},
		{"www.example.com", "/api/v2"}, {"www.example.com", "/api/v2/"}, {"a.b.example.com", "/"},
		{"example.com", "/"}, {"x.shop.example.org", "/"}, {"other.example.org", "/docs/"},
		{"other.example.org", "/"}, {"web-acme.apps.bex.test", "/"}, {"a-b-c.apps.bex.test", "/"},
		{"api-x-acme.apps.bex.test", "/"}, {"x.web-acme.apps.bex.test", "/"}, {"apps.bex.test", "/"},
		{"-acme.apps.bex.test", "/"}, {"web-.apps.bex.test", "/"}, {"[::1]:80", "/"}, {"*.example.com", "/"},
		{"www.example.com..", "/"}, {"", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	apps := fuzzApps{"acme/web": true, "acme/api-x": true, "c/a-b": true, "b-c/a": true}
	tb := &Table{Defaults: &DefaultHosts{Domain: fuzzDomain, Apps: apps}}
	tb.SetRoutes(fuzzRoutes)
	f.Fuzz(func(t *testing.T, hostHeader, path string) {
		host := NormalizeHost(hostHeader)
		r, ups, ok := tb.Resolve(host, path)
		claimed := tb.Claimed(host)
		if !ok {
			if claimed && !slices.ContainsFunc(fuzzRoutes, func(e RouteEntry) bool { return e.Hostname == host || wildcardOver(e.Hostname, host) }) {
				t.Fatalf("%q claimed for a certificate but resolves nowhere", host)
			}
			return
		}
		if r.Host != host {
			t.Fatalf("Resolve(%q).Host = %q", host, r.Host)
		}
		if label, isDefault := strings.CutSuffix(host, "."+fuzzDomain); isDefault && r.Claim == host {
			if !apps.Runs(r.Tenant, r.App) || label != r.App+"-"+r.Tenant {
				t.Fatalf("default hostname %q resolved to %s/%s", host, r.Tenant, r.App)
			}
			if !claimed {
				t.Fatalf("default hostname %q resolves but gets no certificate", host)
			}
			return
		}
		var best *RouteEntry
		for i, e := range fuzzRoutes {
			if e.Hostname != r.Claim || !prefixMatches(e.PathPrefix, path) {
				continue
			}
			if best == nil || len(e.PathPrefix) > len(best.PathPrefix) {
				best = &fuzzRoutes[i]
			}
		}
		switch {
		case best == nil:
			t.Fatalf("Resolve(%q, %q) = %+v: no Route of that claim serves the path", host, path, r)
		case r.Claim != host && !wildcardOver(r.Claim, host):
			t.Fatalf("Resolve(%q) claimed by %q, which does not cover it", host, r.Claim)
		case r.Tenant != best.Tenant || r.App != best.App || r.PathPrefix != best.PathPrefix:
			t.Fatalf("Resolve(%q, %q) = %+v, want the Route %+v", host, path, r, *best)
		case r.PlainHTTP != best.PlainHTTP || claimed == best.PlainHTTP && r.Claim == host:
			t.Fatalf("Resolve(%q) = %+v, Claimed %v: TLS not as the Route %+v asks", host, r, claimed, *best)
		}
		if r.Claim != host && slices.ContainsFunc(fuzzRoutes, func(e RouteEntry) bool { return e.Hostname == host && prefixMatches(e.PathPrefix, path) }) {
			t.Fatalf("Resolve(%q, %q) took the wildcard %q over the exact Route", host, path, r.Claim)
		}
		_ = ups
	})
}

// wildcardOver reports whether w is "*." followed by host without its first
// label, that label not empty.
func wildcardOver(w, host string) bool {
	suffix, ok := strings.CutPrefix(w, "*.")
	first, parent, found := strings.Cut(host, ".")
	return ok && found && first != "" && parent == suffix
}
