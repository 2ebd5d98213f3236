// Package v1alpha1 is version v1alpha1 of the scheduling.bex.co API group,
// as bex-apiserver serves it: ClusterCapacity (read-only, cluster-scoped),
// PlacementReview (create-only, cluster-scoped) and Placement (namespaced,
// stored). Clients such as the App controller add it to their scheme with
// AddToScheme; the server converts it to the internal types of
// bex.co/bex/apis/scheduling.
//
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=co.bex.scheduling.v1alpha1
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=bex.co/bex/apis/scheduling
// +k8s:defaulter-gen=TypeMeta
// +groupName=scheduling.bex.co
package v1alpha1
