package edge

import (
	"slices"
	"strings"
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

// Claimed reports whether a default hostname or a Route that wants TLS
// claims host: the edge obtains certificates for these names only.
func (t *Table) Claimed(host string) bool {
	if m := t.routes.Load(); m != nil {
		wantsTLS := func(es []RouteEntry) bool {
			return slices.ContainsFunc(es, func(e RouteEntry) bool { return !e.PlainHTTP })
		}
		if wantsTLS((*m)[host]) {
			return true
		}
		if _, parent, ok := strings.Cut(host, "."); ok && strings.Contains(parent, ".") && wantsTLS((*m)["*."+parent]) {
			return true
		}
	}
	if t.Defaults != nil {
		_, _, ok := t.Defaults.Resolve(host, "/")
		return ok
	}
	return false
}

// Resolve implements Resolver.
func (t *Table) Resolve(host, path string) (Route, []string, bool) {
	if e, ok := t.Entry(host, path); ok {
		r := Route{Tenant: e.Tenant, App: e.App, Host: host, Claim: e.Hostname, PathPrefix: e.PathPrefix, PlainHTTP: e.PlainHTTP}
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
		return t.Defaults.Resolve(host, path)
	}
	return Route{}, nil, false
}
