// Package app is bex-embedded: it runs the whole bex platform on one machine, in the
// foreground: what `make run` starts.
//
// It starts the pinned etcd and kube-apiserver (internal/controlplane) with
// their data under the state directory, installs the platform CRDs, finds
// Postgres (DATABASE_URL, else a private server from the system's binaries
// under the state directory, else an error that says what to install), runs
// the store's migrations, starts buildkitd for Dockerfile builds
// (internal/buildkitd: as root with runc, under <state>/buildkit; without
// root or runc, none, and Dockerfile pushes are told what is missing), runs
// the controller manager in-process (with the local fleet's provider), and
// writes <state>/env — a shell-sourceable file with BEX_KUBECONFIG and
// BEX_DATABASE_URL — once everything is ready. On SIGINT or SIGTERM it stops
// everything in reverse order and removes <state>/env. A second run on the
// same state directory keeps the data of the first.
//
// Unless --no-local-fleet, it runs a local Cluster API fleet (fleet.go):
// the local infrastructure provider (controllers/localinfra) over a
// localfleet.Host under <state>/fleet, and Cluster API's managers
// (internal/capi, under <state>/capi), started in the background once the
// platform is ready; the API creates and deletes its clusters once they
// run.
package app
