// Package deploy holds what bex installs into a cluster: the CustomResourceDefinitions
// generated from apis/ (deploy/crds), and, as they arrive, manifests and
// Cluster API templates. The Go package embeds the CRDs so that binaries
// and tests install exactly the checked-in files.
package deploy
