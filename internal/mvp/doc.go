// Package mvp reads what an apiserver says about the Kubernetes Mixed Version
// Proxy: its aggregated discovery with and without peers (the nopeer
// profile), the skew set between two servers (the resources one serves and
// the other does not), and the peer-proxy metrics.
//
// It talks to apiservers directly, through rest.Configs that point at one
// server each, never through a load balancer. The fleet-upgrade verifier and
// the tests build their verdicts on it. Two helpers act on what it reads,
// for whoever puts apiservers behind a control plane's load balancer (the
// local control plane of internal/controlplane, a Cluster API
// infrastructure provider):
//
//   - WaitListedByPeers is the admission gate of a new apiserver: it returns
//     once every peer's merged discovery lists what the new server serves,
//     so that a peer proxies those resources instead of answering 404;
//   - RemoveIdentityLease deletes the identity lease of an apiserver whose
//     process is known to be dead, so that its peers stop proxying to it
//     (503) at once rather than when the lease is garbage-collected.
package mvp
