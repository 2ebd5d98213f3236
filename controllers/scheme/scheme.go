package scheme

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleetv1alpha1 "bex.co/bex/apis/fleet/v1alpha1"
	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
)

// New returns a scheme with every kind the controllers read.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		rbacv1.AddToScheme, // the tenant role bindings of the controller manager's Releases
		platformv1alpha1.AddToScheme,
		fleetv1alpha1.AddToScheme,
		schedulingv1alpha1.AddToScheme,
		clusterv1.AddToScheme,
		controlplanev1.AddToScheme,
		bootstrapv1.AddToScheme, // the local fleet's workers' KubeadmConfigTemplates
		infrav1.AddToScheme,     // the local fleet's LocalClusters and LocalMachines
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("building scheme: %v", err)) // only a programming error gets here
		}
	}
	return s
}
