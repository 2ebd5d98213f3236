package edge

import (
	"strings"
)

// Apps is a runtime's routing table, as DefaultHosts reads it. The process
// driver implements it.
type Apps interface {
	// Upstreams returns the addresses of the healthy web instances of the
	// app's current release.
	Upstreams(tenant, app string) []string
	// Runs reports whether the app has a release rolled out.
	Runs(tenant, app string) bool
}

// DefaultHosts resolves every app's default hostname,
// "<app>-<tenant>.<Domain>", to its upstreams in Apps. Both names may
// contain '-', so the label is split at each '-' in turn, left to right,
// and the first split naming an app that Apps runs wins; the API refuses an
// app whose default hostname another app already has.
type DefaultHosts struct {
	Domain string
	Apps   Apps
}

var _ Resolver = (*DefaultHosts)(nil)

// Resolve implements Resolver.
func (h *DefaultHosts) Resolve(host, path string) (Route, []string, bool) {
	r, ok := h.find(host, h.Apps.Runs)
	if !ok {
		return Route{}, nil, false
	}
	return r, h.Apps.Upstreams(r.Tenant, r.App), true
}

// find returns the route of the default hostname host of the first app,
// split as Resolve splits it, for which known is true.
func (h *DefaultHosts) find(host string, known func(tenant, app string) bool) (Route, bool) {
	domain := strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(h.Domain), "."), ".")
	label, ok := strings.CutSuffix(host, "."+domain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return Route{}, false
	}
	for i := 1; i < len(label)-1; i++ {
		if label[i] != '-' {
			continue
		}
		app, tenant := label[:i], label[i+1:]
		if known(tenant, app) {
			return Route{Tenant: tenant, App: app, Host: host, Claim: host}, true
		}
	}
	return Route{}, false
}

// Hostname returns the default hostname of an app.
func Hostname(tenant, app, domain string) string {
	return app + "-" + tenant + "." + strings.TrimPrefix(domain, ".")
}
