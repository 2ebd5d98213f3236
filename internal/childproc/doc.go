// Package childproc runs the platform's long-lived helper programs (etcd
// and the kube-apiservers of internal/controlplane, buildkitd,
// Cluster API's managers) as children of this process: each with its
// output appended to a log file, in a process group of its own, killed if
// this process dies, polled until it is ready, and stopped with SIGTERM,
// a grace period and SIGKILL. It also finds free TCP ports for them.
package childproc
