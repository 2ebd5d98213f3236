// Package upgrade is the root of the fleet-upgrade subsystem: the code that
// moves Cluster API workload clusters (and, last, the management cluster) to
// the next Kubernetes minor version while the Mixed Version Proxy keeps every
// tenant request working. It holds no code of its own.
//
// It is split by what each part needs:
//
//   - plan computes, from a FleetUpgrade and the Clusters and
//     KubeadmControlPlanes it selects, the ordered list of clusters to upgrade
//     (canary, waves, management cluster last) and the clusters it refuses or
//     skips. Pure functions.
//   - preflight checks one cluster before its version bump and returns
//     findings an operator can act on: MVP wiring in the KubeadmControlPlane's
//     apiServer extraArgs, the feature gate on the current version, the peer
//     address, serving certificate names, unique apiserver hostnames,
//     graceful shutdown, the rollout strategy and the capacity to surge.
//     Pure functions over the objects plus a small Capacity interface; it
//     also computes the extraArgs of the wire-MVP step.
//   - verify is the MVP verifier: it probes every apiserver of a control
//     plane directly and reports what a tenant would get from each while
//     the plane runs two versions (served, proxied, a spurious 404, an
//     honest 503), and the identity leases of apiservers that are gone.
//   - rollout replaces the apiservers of a local control plane
//     (internal/controlplane) one at a time, as KubeadmControlPlane does,
//     with a gate between machines: the mixed-version and continuity suites
//     (test/upgrade, test/continuity) upgrade with it.
//
// The FleetUpgrade controller (controllers/fleetupgrade) drives plan,
// preflight and verify on real clusters, and `bex upgrade verify`
// (cmd/bex/app) runs the verifier by hand; the Hetzner load-balancer
// hand-off lives in internal/hetzner. The operator's runbook for every
// preflight finding and verifier outcome is docs/upgrades.md.
package upgrade
