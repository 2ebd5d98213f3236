// Package scheduling holds the internal (hub) types of the
// scheduling.bex.co API group that bex-apiserver serves: ClusterCapacity,
// PlacementReview and Placement. The server works on these types; the wire
// versions (v1alpha1) convert to and from them. Nothing here talks to a
// cluster.
//
// +k8s:deepcopy-gen=package
// +groupName=scheduling.bex.co
package scheduling
