package v1alpha1

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of this version.
const GroupName = "scheduling.bex.co"

// SchemeGroupVersion is the group and version of these types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// GroupVersion is SchemeGroupVersion, by the name controller-runtime users
// expect.
var GroupVersion = SchemeGroupVersion

// Resource takes an unqualified resource and returns a group-qualified
// GroupResource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder adds the types, their defaulting and (for the server)
	// their conversions to a scheme.
	SchemeBuilder      runtime.SchemeBuilder
	localSchemeBuilder = &SchemeBuilder
	// AddToScheme adds the v1alpha1 types to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// The generated conversion and defaulting functions register
	// themselves with localSchemeBuilder in their own init.
	localSchemeBuilder.Register(addKnownTypes, addDefaultingFuncs, addFieldLabelConversions)
}

// PlacementFields are the fields a list or watch of Placements may select
// on (--field-selector): each Placement's app, cluster and pool besides
// its name and namespace.
func PlacementFields() []string {
	return []string{"metadata.name", "metadata.namespace", "spec.app", "spec.cluster", "spec.pool"}
}

// addFieldLabelConversions lets the server take the Placement fields in
// field selectors; without it, it takes metadata.name and
// metadata.namespace only.
func addFieldLabelConversions(scheme *runtime.Scheme) error {
	return scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind("Placement"), func(label, value string) (string, string, error) {
		if slices.Contains(PlacementFields(), label) {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	})
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&ClusterCapacity{}, &ClusterCapacityList{},
		&PlacementReview{},
		&Placement{}, &PlacementList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
