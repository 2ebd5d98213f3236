// Package deploy holds what bex installs into a cluster: the CustomResourceDefinitions
// generated from apis/ (deploy/crds), the Helm chart of the management
// cluster (deploy/chart/bex, whose crds/ copies deploy/crds), the Cluster API
// templates for Hetzner (deploy/capi), and the third-party CRDs tests dry-run
// them against (deploy/install-crds). The Go package embeds the CRDs so that
// binaries and tests install exactly the checked-in files.
package deploy
