package v1alpha1

import "k8s.io/apimachinery/pkg/runtime"

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_PlacementReviewSpec places one replica when none is asked,
// and lists every candidate.
func SetDefaults_PlacementReviewSpec(obj *PlacementReviewSpec) { //nolint:revive,staticcheck // the name defaulter-gen looks for
	if obj.Replicas == 0 {
		obj.Replicas = 1
	}
	if obj.Candidates == "" {
		obj.Candidates = CandidatesAll
	}
}
