// Package localfleet runs the processes of local Cluster API clusters,
// whose machines are processes on this machine: per cluster an external
// etcd (internal/controlplane's Etcd) and a TCP load balancer
// (internal/tcplb) at the control-plane endpoint, each on its own loopback
// address of the cluster's /24; per control-plane machine a kube-apiserver
// of the machine's version, in its own UTS namespace (its hostname is the
// machine's name, and so its identity to its peers) on its own loopback
// address, port 6443.
//
// A machine is made from the bootstrap data Cluster API's kubeadm
// bootstrap provider wrote for it, as kubeadm makes a node: the
// cloud-config's files are written under the machine's directory, the
// kube-apiserver's flags are kubeadm's (its defaults, then the
// ClusterConfiguration's apiServer.extraArgs) with every path moved under
// that directory, and a join reads the ClusterConfiguration from the
// cluster's kubeadm-config with the bootstrap token. In place of the
// kubelet and kubeadm it keeps up what Cluster API reads of a workload
// cluster: kubeadm-config, the Node (registered with node credentials,
// labelled and tainted as a control-plane node), and the mirror Pods of
// the control-plane components. docs/fleet.md lists where this differs
// from a kubeadm node, and what CAPH does on Hetzner instead.
//
// The Cluster API side (the LocalCluster and LocalMachine objects) is
// controllers/localinfra's; this package knows nothing of it.
package localfleet
