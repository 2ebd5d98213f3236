// Package kubebin builds the control-plane binaries bex runs in tests and in
// embedded mode — kube-apiserver at each pinned Kubernetes version and etcd —
// from the Go module proxy, and caches each build under the user's cache
// directory.
//
// A build is described by a recipe embedded in this package: the go.mod and
// go.sum of a small build module that requires k8s.io/kubernetes at the pinned
// version with every staging module replaced by the matching k8s.io/* release
// (for etcd: a one-line wrapper around etcdmain). The version is stamped with
// ldflags so that /version reports it. Builds are serialised per binary with a
// file lock, so two processes asking at once build once; while a build runs,
// progress is written to the caller's writer.
//
// The same machinery builds a few pinned tools the tests and benchmarks run,
// named by Tool: pebble and pebble-challtestsrv (Let's Encrypt's ACME test
// server and its mock DNS server, from one recipe whose go.mod lists both as
// tool directives), Caddy with its standard modules, Traefik, helm, BuildKit's
// buildkitd and buildctl, and Cluster API's three managers (the core
// manager, the kubeadm bootstrap provider and the KubeadmControlPlane
// controller, from one recipe that pins Cluster API's own k8s.io and
// controller-runtime versions, not bex's). ToolModuleDir finds the source of
// a tool's module in the Go module cache, through the tool's recipe, for
// what a binary does not embed (Cluster API's CRDs and webhook manifests).
// First builds, measured on 2 cores shared with other builds: pebble 53
// seconds, pebble-challtestsrv 2 seconds after pebble (they share nearly
// every package), Caddy 8.5 minutes (1018 packages, 3¼ minutes of CPU); the
// binaries are 8, 7 and 56 MB; Traefik 48 minutes on 2 cores loaded with
// other builds (2496 packages). Cluster API's first manager 17 minutes
// beside a kube-apiserver build (1305 packages; about 3½ minutes alone),
// the other two 74 and 26 seconds after it; 58 to 64 MB each. Each recipe's
// go.mod and go.sum were made with `go mod tidy` in a scratch copy of the
// build module, never in bex's own module.
//
// kubebin hands file paths to internal/controlplane, which starts the
// control-plane binaries, to internal/acmetest, which starts pebble, to
// internal/capi, which starts Cluster API's managers, and to the edge
// benchmark, which starts Caddy and Traefik.
package kubebin
