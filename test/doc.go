// Package test holds bex's end-to-end suites, one folder each. They run the
// real binaries against real components: the pinned kube-apiserver and etcd,
// Postgres, git.
package test
