// Package localinfra is bex's Cluster API infrastructure provider for
// this machine (infrastructure.bex.co/v1alpha1): it reconciles
// LocalClusters and LocalMachines into the processes internal/localfleet
// runs, and reports them as Cluster API's v1beta2 provider contract asks.
//
// ClusterReconciler starts a LocalCluster's etcd and load balancer once a
// Cluster owns it, writes the etcd Secrets Cluster API reads for an
// external etcd (<cluster>-etcd, the CA; <cluster>-apiserver-etcd-client,
// the client certificate), sets spec.controlPlaneEndpoint and
// status.initialization.provisioned. MachineReconciler starts a
// LocalMachine once its Machine has bootstrap data (a control-plane
// machine's kube-apiserver and components, or a worker's bex-node with
// credentials from the cluster's <cluster>-ca Secret), sets
// spec.providerID, annotates the Machine's KubeadmConfig with the serving
// certificate's expiry (machine.cluster.x-k8s.io/certificates-expiry, which
// KubeadmControlPlane would otherwise read through a kubelet's port
// forward), and on deletion drains and stops it. Both honour a paused
// Cluster. docs/fleet.md describes the provider.
package localinfra
