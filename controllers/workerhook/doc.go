// Package workerhook keeps a workload cluster's worker Machines until the
// apps they serve have moved. It puts Cluster API's pre-drain deletion hook
// Hook on every worker Machine (a Machine without the control-plane label)
// and, once Cluster API deletes such a Machine because its Cluster is being
// deleted, takes the hook off only when no app is served by that cluster
// any more (Apps, the runtime's record of where each app runs) and a short
// settle time has passed, so that the Machine controller drains the worker
// after the App controller moved its apps, not before. Cluster API deletes a
// Cluster's control plane only once its workers are gone, so the cluster's
// apiserver, through which the platform reads the old cluster's endpoints,
// stays up meanwhile.
//
// A worker deleted while its Cluster stays (a MachineDeployment's scale-down
// or rollout) is let go at once: the cluster keeps the apps, and its
// Deployments bring their Pods up on the other workers. A hold is bounded
// (MaxHold): past it the worker goes with a Warning event that names the
// apps still there, so that no app that cannot move blocks a cluster's
// deletion for ever.
package workerhook
