// Package workerhook keeps a workload cluster's worker Machines until the
// apps they serve have moved. It puts Cluster API's pre-drain deletion hook
// Hook, and the pre-terminate hook TerminateHook (Cluster API skips
// pre-drain hooks when the Cluster is being deleted), on every worker
// Machine (a Machine without the control-plane label) and, once Cluster API
// deletes such a Machine because its Cluster is being deleted, takes the
// hooks off only when no app is served by that cluster
// any more (Apps, the runtime's record of where each app runs) and a short
// settle time has passed, so that the Machine controller drains the worker
// after the App controller moved its apps, not before. Cluster API deletes a
// Cluster's control plane only once its workers are gone, so the cluster's
// apiserver, through which the platform reads the old cluster's endpoints,
// stays up meanwhile.
//
// A worker deleted while its Cluster stays (a MachineDeployment's scale-down
// or rollout) keeps the apps on the cluster's other workers: the hook stays
// until no Pod of the platform's (app.kubernetes.io/managed-by=bex) runs on
// it. The worker's Node is cordoned and each Deployment with a Pod there is
// rolled (MovedOffAnnotation on its pod template), so that a new Pod is
// ready on another worker before the old one stops: a drain alone would
// evict the old one first, and an app of one instance would be down until
// its new Pod is ready. With no other Ready, schedulable worker, or no
// Node, the worker goes at once. A hold is bounded
// (MaxHold): past it the worker goes with a Warning event that names the
// apps still there, so that no app that cannot move blocks a cluster's
// deletion for ever.
package workerhook
