// Package v1alpha1 holds the types of the infrastructure.bex.co/v1alpha1
// API, bex's Cluster API infrastructure provider for machines that are
// processes on one machine: LocalCluster (a cluster's control-plane
// endpoint, a TCP load balancer on loopback, and its external etcd),
// LocalMachine (one control-plane machine: kube-apiserver,
// kube-controller-manager and kube-scheduler of the Machine's version in
// its own UTS namespace, with what kubeadm and the kubelet would keep up
// for Cluster API; or one worker: bex-node, the node agent) and
// LocalMachineTemplate (what KubeadmControlPlane and MachineDeployments
// clone LocalMachines from).
//
// The types follow Cluster API's v1beta2 provider contract: the CRDs carry
// the label cluster.x-k8s.io/v1beta2=v1alpha1, a LocalCluster reports
// spec.controlPlaneEndpoint and status.initialization.provisioned, a
// LocalMachine spec.providerID, status.initialization.provisioned and
// status.addresses. The controllers are in controllers/localinfra, the
// processes in internal/localfleet; docs/fleet.md says what they do and
// what differs from a kubeadm node.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.bex.co
package v1alpha1
