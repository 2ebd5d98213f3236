// Package placed is the runtime driver that follows the scheduler: each
// app runs on the workload cluster it is placed on (Release.Cluster), and
// every call goes to the driver of the cluster that serves it.
//
// Driver routes runtime.Driver calls to the drivers Clusters gives by name
// (the embedded process runtime for the static cluster "local", a kube
// driver per Cluster API cluster, built from its <cluster>-kubeconfig
// Secret: KubeClusters), records in a Ledger which cluster serves each app
// (the store, so that it is known after a restart), and is the edge's
// routing table over the clusters' own (edge.Apps). A Deploy onto another
// cluster than the one that serves is a move: the release starts and
// passes its health check there, the edge switches to it, then the app is
// removed from the old cluster.
package placed
