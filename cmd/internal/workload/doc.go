// Package workload is the release side the commands of a cluster
// deployment (bex-controller-manager, bex-web, bex-git) share: the flags of
// the workload cluster apps run in, the registry, the scratch directory,
// the apps' domain, tenant confinement and release retention (Options), and
// what they build from them: the kube runtime driver and the
// release.Releaser over it (Runtime). Only bex-git builds: BuildOptions add
// its flags and NewPipeline its builder and pipeline; with --build-image the
// builder runs each build's steps in a Pod of the tenant's on the workload
// cluster (builder/buildpod).
//
// In a cluster the Releaser is a library each process holds, not a
// service: the git receiver deploys pushes with it, bex-web rolls back with
// it, and the controller manager keeps releases running and reads their
// health with it. What they share is the state behind it: Postgres (builds,
// releases), the App objects, and the workload cluster's Deployments. Each
// process's per-app lock is its own, so the controller manager's Releases
// leaves a release that has any Deployment alone.
//
// The workload cluster is the one --workload-kubeconfig names (in-cluster
// when empty): one cluster for every app, and where build Pods run. With
// --follow-placement each app runs instead on the cluster the scheduler
// placed it on (internal/runtime/placed): a Cluster API cluster of the
// management cluster, through its <cluster>-kubeconfig Secret, or the
// workload cluster under the name --workload-cluster gives it. Where each
// app runs is then recorded in Postgres and read by every process at each
// call (placed.Options.Shared); see docs/install.md.
package workload
