// Package scheduler is the end-to-end suite of bex-apiserver: a real
// kube-apiserver and etcd (the management cluster) with the Cluster API CRDs,
// a second control plane whose Nodes play the workload clusters' nodes, and
// bex-apiserver in-process, registered through an APIService. Every request
// of the tests goes through the kube-apiserver's aggregator. The benchmark
// is the program in bench/.
package scheduler
