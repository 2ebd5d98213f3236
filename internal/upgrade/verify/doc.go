// Package verify probes each apiserver of a control plane directly — never
// through its load balancer — and classifies what a tenant would get there
// while the plane runs two versions: served locally, proxied to a peer by the
// Mixed Version Proxy, a spurious 404 (a peer serves the resource, but this
// server answered as if nobody did), an honest 503 (the proxy knew a peer but
// could not reach it), or an error.
//
// The skew set is computed, not listed: for each server, the resources its
// peers serve locally (their nopeer discovery) that it does not. Every server
// is also asked for the platform's own CRDs, which MVP never proxies, so
// each server must serve them itself. The fleet-upgrade controller gates each
// rollout step on the verdict; `bex upgrade verify` prints it.
package verify
