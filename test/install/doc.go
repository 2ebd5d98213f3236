// Package install validates bex's production install artifacts: the Helm
// chart deploy/chart/bex (lint, render with default and production values)
// and the Cluster API templates deploy/capi/hetzner, by dry-running every
// object server-side against a real kube-apiserver with the CRDs they use,
// and by running the FleetUpgrade preflight on the templates'
// KubeadmControlPlanes. Each container of the chart that runs a bex binary
// is checked against the binary's own flag set and the endpoints its listen
// flags serve (the probes). No Hetzner account is involved.
package install
