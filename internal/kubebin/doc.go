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
// kubebin hands file paths to internal/controlplane, which starts the binaries.
package kubebin
