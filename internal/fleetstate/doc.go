// Package fleetstate reads the fleet of workload clusters the scheduler
// places apps onto, and hands bex-apiserver a snapshot of it: per cluster its
// region, plans, control-plane versions, whether it is mid-upgrade, healthy,
// cordoned or being deleted (or, for a static cluster, standby), and per node
// pool its nodes and their allocatable resources.
//
// Two sources make a fleet. Static clusters come from flags (embedded mode's
// "local" process runtime is one). Cluster API clusters come from the
// management cluster's Cluster, KubeadmControlPlane, MachineDeployment and
// Machine objects (v1beta2), held in an informer cache, and from each
// workload cluster's Nodes, watched through the kubeconfig Secret Cluster API
// writes (<cluster>-kubeconfig, key "value"). A node counts in a pool when a
// Machine of that pool's MachineDeployment references it; nodes no Machine
// references (control-plane nodes included) do not count.
//
// What the Placements on a cluster request is not the fleet's business: the
// apiserver adds that from its own storage.
package fleetstate
