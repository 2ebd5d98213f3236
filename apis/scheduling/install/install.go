package install

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/v1alpha1"
)

// Install registers the API group and sets v1alpha1 as the preferred
// version.
func Install(scheme *runtime.Scheme) {
	utilruntime.Must(scheduling.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(v1alpha1.SchemeGroupVersion))
}
