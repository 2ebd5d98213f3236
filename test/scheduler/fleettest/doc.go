// Package fleettest seeds a fleet for bex-apiserver's tests and benchmark:
// Cluster API v1beta2 Clusters, KubeadmControlPlanes, MachineDeployments and
// Machines in the management cluster, the kubeconfig Secret of each cluster,
// and the Nodes its Machines reference in a workload control plane.
package fleettest
