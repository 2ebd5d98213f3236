// Package v1alpha1 holds the types of the fleet.bex.co/v1alpha1 API:
// FleetUpgrade, the cluster-scoped object an operator writes to move a set of
// workload clusters to the next Kubernetes minor version (canary first, then
// waves), with gates that stop the rollout when the Mixed Version Proxy
// verifier sees tenant requests fail.
//
// The spec is validated by the schema and CEL rules (no skipped minor version,
// the target version is immutable, an abort cannot be taken back). The
// FleetUpgrade controller owns the status: the overall phase, conditions and a
// per-cluster, per-machine record of every step. Nothing in this package talks
// to a cluster.
//
// +kubebuilder:object:generate=true
// +groupName=fleet.bex.co
package v1alpha1
