// Package app is the bex-controller-manager command: a
// controller-runtime manager with leader election that runs the App, Route
// and FleetUpgrade controllers (controllers.Setup) of a cluster deployment.
//
// It hands the controllers what a cluster has: the releaser over the kube
// runtime driver (cmd/internal/workload) as the App controller's Releases
// (which leave a release that has any Deployment alone, and bind the
// tenant config role), the scheduling.bex.co API for placements, the system resolver
// (or --dns-resolver) and the edge's public addresses for Routes' DNS, the
// edge's certificate storage in Postgres for Routes' certificates (with
// --acme-directory), and for FleetUpgrades the MVP verifier (the
// management cluster's also probes the platform's own APIs) with the store
// as records and, given --hcloud-token-file, the Hetzner load-balancer
// hand-off. Surge capacity (the hcloud check of the preflight) is not
// wired: FleetUpgrades' preflight reports it as unknown.
//
// Options holds its flags (NewOptions, AddFlags, Complete, Validate, Run);
// Main is its command line.
package app
