// Package upgrade is the root of the fleet-upgrade subsystem: the code that
// moves Cluster API workload clusters (and, last, the management cluster) to
// the next Kubernetes minor version while the Mixed Version Proxy keeps every
// tenant request working.
//
// It is split by what each part needs:
//
//   - plan computes, from a FleetUpgrade and the Clusters and
//     KubeadmControlPlanes it selects, the ordered list of clusters to upgrade
//     (canary, waves, management cluster last) and the clusters it refuses or
//     skips. Pure functions.
//   - preflight checks one cluster before its version bump and returns
//     findings an operator can act on: MVP wiring in the KubeadmControlPlane's
//     apiServer extraArgs, the feature gate on the current version, serving
//     certificate names, unique apiserver hostnames, the rollout strategy and
//     the capacity to surge. Pure functions over the objects plus a small
//     Capacity interface; it also computes the extraArgs of the wire-MVP step.
//
// The FleetUpgrade controller and the MVP verifier build on these; the
// Hetzner load-balancer hand-off lives in internal/hetzner. The operator's
// runbook for every preflight finding is docs/upgrades.md.
package upgrade
