package edge

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// RouteEntry is one admitted Route as the edge serves it.
type RouteEntry struct {
	// Hostname is lower-case; "*.example.com" matches one label in front of
	// example.com.
	Hostname string
	// PathPrefix is "/" or longer; the longest matching prefix wins.
	PathPrefix string
	// Tenant and App name the app that serves the route.
	Tenant, App string
	// PlainHTTP is true when the Route asked for no TLS: the edge serves it
	// over plain HTTP without redirecting.
	PlainHTTP bool
}

// Table is a Resolver over the admitted Routes and, through Defaults, every
// app's default hostname. Routes are replaced as a whole with SetRoutes, so
// a reader never sees half an update; Resolve takes no lock.
type Table struct {
	// Defaults resolves default hostnames; nil serves Routes only.
	Defaults *DefaultHosts
	// Apps gives the upstreams of a Route's app; nil takes Defaults.Apps.
	Apps Apps

	routes atomic.Pointer[map[string][]RouteEntry] // hostname → entries, longest prefix first
	// maintenance holds the apps in maintenance mode and their pages
	// (empty: the edge's), as SetMaintenance gave them.
	maintenance atomic.Pointer[map[AppRef]string]

	// changedMu guards changed, closed by the next SetRoutes.
	changedMu sync.Mutex
	changed   chan struct{}
}

var _ Resolver = (*Table)(nil)

// SetRoutes replaces the Routes the table serves.
func (t *Table) SetRoutes(entries []RouteEntry) {
	m := make(map[string][]RouteEntry, len(entries))
	for _, e := range entries {
		e.Hostname = strings.ToLower(e.Hostname)
		if e.PathPrefix == "" {
			e.PathPrefix = "/"
		}
		m[e.Hostname] = append(m[e.Hostname], e)
	}
	for _, es := range m {
		slices.SortFunc(es, func(a, b RouteEntry) int { return len(b.PathPrefix) - len(a.PathPrefix) })
	}
	t.routes.Store(&m)
	t.changedMu.Lock()
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
	t.changedMu.Unlock()
}

// SetMaintenance replaces the apps the table knows in maintenance mode,
// and their pages: every route of theirs, and their default hostname
// whether or not the runtime runs them, resolves to a Route with
// Maintenance and the app's page set and no upstreams. The table holds
// the pages of these apps only: an app that leaves maintenance mode, or
// is deleted, takes its page with it.
func (t *Table) SetMaintenance(apps []MaintenanceApp) {
	m := make(map[AppRef]string, len(apps))
	for _, a := range apps {
		m[AppRef{Tenant: a.Tenant, App: a.App}] = a.Page
	}
	t.maintenance.Store(&m)
}

// inMaintenance reports whether tenant's app is in maintenance mode.
func (t *Table) inMaintenance(tenant, app string) bool {
	_, ok := t.maintenancePage(tenant, app)
	return ok
}

// maintenancePage returns the page of tenant's app, and whether the app is
// in maintenance mode.
func (t *Table) maintenancePage(tenant, app string) (string, bool) {
	m := t.maintenance.Load()
	if m == nil {
		return "", false
	}
	page, ok := (*m)[AppRef{Tenant: tenant, App: app}]
	return page, ok
}

// Changed returns a channel that is closed by the next SetRoutes. A reader
// takes it before reading the table, so that no change slips between.
func (t *Table) Changed() <-chan struct{} {
	t.changedMu.Lock()
	defer t.changedMu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.changed
}

// WildcardClaims returns the hostnames of the wildcard Routes that want
// TLS ("*.example.com"), sorted.
func (t *Table) WildcardClaims() []string {
	m := t.routes.Load()
	if m == nil {
		return nil
	}
	var claims []string
	for host, es := range *m {
		if strings.HasPrefix(host, "*.") && slices.ContainsFunc(es, func(e RouteEntry) bool { return !e.PlainHTTP }) {
			claims = append(claims, host)
		}
	}
	slices.Sort(claims)
	return claims
}

// Entry returns the Route entry that serves host and path: an exact
// hostname first, then a wildcard one label up.
func (t *Table) Entry(host, path string) (RouteEntry, bool) {
	m := t.routes.Load()
	if m == nil {
		return RouteEntry{}, false
	}
	if e, ok := match((*m)[host], path); ok {
		return e, true
	}
	if _, parent, ok := strings.Cut(host, "."); ok && strings.Contains(parent, ".") {
		return match((*m)["*."+parent], path)
	}
	return RouteEntry{}, false
}

func match(entries []RouteEntry, path string) (RouteEntry, bool) {
	for _, e := range entries {
		if prefixMatches(e.PathPrefix, path) {
			return e, true
		}
	}
	return RouteEntry{}, false
}

// prefixMatches reports whether path is under prefix, by whole segments:
// "/api" matches "/api" and "/api/x" but not "/apix".
func prefixMatches(prefix, path string) bool {
	if prefix == "/" {
		return true
	}
	p := strings.TrimSuffix(prefix, "/")
	return path == p || strings.HasPrefix(path, p+"/")
}

// Claimant is who claims a hostname for a certificate.
type Claimant struct {
	// Tenant is the tenant of the Route or app.
	Tenant string
	// Route is the hostname of the Route that claims the name, as the
	// Route has it ("*.example.com" for a name under a wildcard); empty
	// for an app's default hostname.
	Route string
}

// Claimant returns who claims host for a certificate: a Route that wants
// TLS, or an app's default hostname. ok is false when nobody does: the edge
// obtains certificates for claimed names only.
func (t *Table) Claimant(host string) (Claimant, bool) {
	if m := t.routes.Load(); m != nil {
		wantsTLS := func(es []RouteEntry) (RouteEntry, bool) {
			i := slices.IndexFunc(es, func(e RouteEntry) bool { return !e.PlainHTTP })
			if i < 0 {
				return RouteEntry{}, false
			}
			return es[i], true
		}
		if e, ok := wantsTLS((*m)[host]); ok {
			return Claimant{Tenant: e.Tenant, Route: e.Hostname}, true
		}
		if _, parent, ok := strings.Cut(host, "."); ok && strings.Contains(parent, ".") {
			if e, ok := wantsTLS((*m)["*."+parent]); ok {
				return Claimant{Tenant: e.Tenant, Route: e.Hostname}, true
			}
		}
	}
	if t.Defaults != nil {
		if r, _, ok := t.resolveDefault(host, "/"); ok {
			return Claimant{Tenant: r.Tenant}, true
		}
	}
	return Claimant{}, false
}

// Claimed reports whether a default hostname or a Route that wants TLS
// claims host.
func (t *Table) Claimed(host string) bool {
	_, ok := t.Claimant(host)
	return ok
}

// Serves reports whether claim (a Route's hostname, or an app's default
// hostname) still routes to tenant's app: the Table has a Route of that
// app for it, or the app's default hostname it is while the app runs or is
// in maintenance mode. What the edge keeps per claim (metrics series,
// round-robin counters) is dropped once it does not.
func (t *Table) Serves(tenant, app, claim string) bool {
	if m := t.routes.Load(); m != nil {
		if slices.ContainsFunc((*m)[claim], func(e RouteEntry) bool { return e.Tenant == tenant && e.App == app }) {
			return true
		}
	}
	if t.Defaults == nil {
		return false
	}
	r, ok := t.Defaults.find(claim, func(tn, a string) bool { return t.inMaintenance(tn, a) || t.Defaults.Apps.Runs(tn, a) })
	return ok && r.Tenant == tenant && r.App == app
}

// claimed reports whether some Route or app's default hostname claims
// claim, for whatever app.
func (t *Table) claimed(claim string) bool {
	if m := t.routes.Load(); m != nil && len((*m)[claim]) > 0 {
		return true
	}
	if t.Defaults == nil {
		return false
	}
	_, ok := t.Defaults.find(claim, func(tn, a string) bool { return t.inMaintenance(tn, a) || t.Defaults.Apps.Runs(tn, a) })
	return ok
}

// Resolve implements Resolver. The route of an app in maintenance mode
// (SetMaintenance) has Maintenance and its MaintenancePage set and no
// upstreams.
func (t *Table) Resolve(host, path string) (Route, []string, bool) {
	if e, ok := t.Entry(host, path); ok {
		r := Route{Tenant: e.Tenant, App: e.App, Host: host, Claim: e.Hostname, PathPrefix: e.PathPrefix, PlainHTTP: e.PlainHTTP}
		if page, ok := t.maintenancePage(e.Tenant, e.App); ok {
			r.Maintenance, r.MaintenancePage = true, page
			return r, nil, true
		}
		apps := t.Apps
		if apps == nil && t.Defaults != nil {
			apps = t.Defaults.Apps
		}
		if apps == nil {
			return r, nil, true
		}
		return r, apps.Upstreams(e.Tenant, e.App), true
	}
	if t.Defaults != nil {
		return t.resolveDefault(host, path)
	}
	return Route{}, nil, false
}

// resolveDefault resolves a default hostname: that of an app in
// maintenance mode first, which the runtime may run nothing of, then
// Defaults.
func (t *Table) resolveDefault(host, path string) (Route, []string, bool) {
	if m := t.maintenance.Load(); m != nil && len(*m) > 0 {
		if r, ok := t.Defaults.find(host, t.inMaintenance); ok {
			r.Maintenance = true
			r.MaintenancePage, _ = t.maintenancePage(r.Tenant, r.App)
			return r, nil, true
		}
	}
	return t.Defaults.Resolve(host, path)
}
