// Package verify probes each apiserver of a control plane directly — never
// through its load balancer — and classifies what a tenant would get there
// while the plane runs two versions: served locally, proxied to a peer by the
// Mixed Version Proxy, a spurious 404 (a peer serves the resource, but this
// server answered as if nobody did), an honest 503 (the proxy knew a peer but
// could not reach it), or an error.
//
// The skew set is computed, not listed: for each server, the resources the
// other targets serve locally (their nopeer discovery) that it does not, and
// those its peer-merged discovery lists for a peer that is not a target (a
// dead apiserver whose identity lease is left). Each server is also asked
// for the platform's CRDs (create, get, list, delete of a probe object) and
// aggregated APIs, which MVP never proxies, so each server must serve them
// itself. Around the probes the verifier compares each server's merged and
// nopeer discovery, reads the deltas of its proxy counters, and finds (and
// on request removes) the identity leases of apiservers that are gone.
//
// Run hands a Report to its callers: the fleet-upgrade controller gates each
// rollout step on it (Report.Passed, or only spurious 404s within the
// FleetUpgrade's gates.maxSpurious404) and records its probes; `bex upgrade
// verify` prints it. AppProbe is the probe of the platform's own App CRD,
// which the controller adds on the management cluster; every object a CRD
// probe creates carries ProbeLabel, so that one left behind can be found.
package verify
