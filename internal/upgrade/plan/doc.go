// Package plan turns a FleetUpgrade and the Cluster API Clusters and
// KubeadmControlPlanes (v1beta2) it selects into an ordered upgrade plan.
//
// The plan is a list of stages run one after the other: the canary cluster
// alone, then each wave of spec.waves in order (clusters no wave selects form
// a last wave), then the management cluster (label bex.co/management=true),
// always last and alone. Within a stage clusters are ordered by
// namespace/name, and each stage carries how many of its clusters may be
// upgraded at once. Clusters that already run the target version are
// skipped; clusters more than one minor version behind the target (or ahead
// of it, or not on spec.fromVersion) are refused with a message that says
// what to do.
//
// A spec that cannot be planned is refused with an InvalidSpecError: a
// field.ErrorList with the FleetUpgrade's field paths (spec.canaryCluster),
// so the API answers on the request's field without reading the text, and
// the controller writes the text into a condition.
//
// Everything here is a pure function of its input: no client, no clock. The
// FleetUpgrade controller computes the plan every reconcile from what it
// reads, and records it in the status.
package plan
