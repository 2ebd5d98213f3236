// Package clustermode is what the standalone commands of a cluster
// deployment (bex-controller-manager, bex-web, bex-git, whose wiring is in
// cmd/<binary>/app) still share beyond cmd/internal/command: the clients
// each opens (the store, and the management cluster from a kubeconfig file,
// else in-cluster), the ops listener, the release pipeline over the kube
// runtime driver and its flags, and the store- and Kubernetes-backed
// implementations of the git receiver's and the API's contracts (which make
// run's bex-embedded uses too).
//
// In a cluster the pipeline is a library each process holds, not a service:
// the git receiver deploys pushes with it, bex-web rolls back with it, and
// the controller manager keeps releases running and reads their health with
// it. What they share is the state behind it: Postgres (builds, releases),
// the App objects, and the workload cluster's Deployments. Each process's
// per-app lock is its own, so Releases deliberately leaves a release that
// has any Deployment alone (see Releases.EnsureRunning).
//
// The workload cluster is the one --workload-kubeconfig names (in-cluster
// when empty): one cluster for every app. Placements computed by the
// scheduling API are not yet used to pick the cluster an app runs in; see
// docs/install.md.
package clustermode
