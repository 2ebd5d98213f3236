// Package localfleet runs the processes of local Cluster API clusters,
// whose machines are processes on this machine: per cluster an external
// etcd (internal/controlplane's Etcd) and a TCP load balancer
// (internal/tcplb) at the control-plane endpoint, each on its own loopback
// address of the cluster's /24; per control-plane machine a kube-apiserver,
// kube-controller-manager and kube-scheduler of the machine's version, in
// its own UTS namespace (its hostname is the machine's name, and so its
// identity to its peers and in leader election) on its own loopback
// address, on their standard ports (6443, 10257, 10259).
//
// A machine is made from the bootstrap data Cluster API's kubeadm
// bootstrap provider wrote for it, as kubeadm makes a node: the
// cloud-config's files are written under the machine's directory, the
// components' flags are kubeadm's (its defaults, then the
// ClusterConfiguration's extraArgs of each) with every path moved under
// that directory, the controller manager's and the scheduler's kubeconfigs
// are kubeadm's (a client certificate of the cluster CA, the machine's own
// kube-apiserver), and a join reads the ClusterConfiguration from the
// cluster's kubeadm-config with the bootstrap token. In place of the
// kubelet and kubeadm it restarts a component that exits and keeps up what
// Cluster API reads of a workload cluster: kubeadm-config, the Node
// (registered with node credentials, labelled and tainted as a
// control-plane node) and its lease, and the mirror Pods of the
// control-plane components, ready as their health checks answer.
// docs/fleet.md lists where this differs from a kubeadm node, and what
// CAPH does on Hetzner instead.
//
// A cluster may instead take over a running control plane registered with
// the Host (RegisterPlane: the platform's own, internal/controlplane's):
// its machines then join that plane's load balancer, on its port, and use
// its etcd, so that Cluster API manages the plane it runs on.
//
// The Cluster API side (the LocalCluster and LocalMachine objects) is
// controllers/localinfra's; this package knows nothing of it.
package localfleet
