package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "bex.co/bex/apis/fleet/v1alpha1"
	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/controllers/app"
)

// NewScheme returns a scheme with every kind the controllers read.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		platformv1alpha1.AddToScheme,
		fleetv1alpha1.AddToScheme,
		schedulingv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("building scheme: %v", err)) // only a programming error gets here
		}
	}
	return s
}

// Names returns the names of the controllers Setup registers.
func Names() []string { return []string{app.ControllerName} }

// Deps are what the controllers need beyond the manager. Nil fields turn
// the parts that need them off (see each reconciler).
type Deps struct {
	// Releases keeps Apps' current releases running.
	Releases app.Releases
	// Schedule places Apps through the scheduling.bex.co API.
	Schedule bool
}

// Setup registers every controller with mgr.
func Setup(mgr ctrl.Manager, deps Deps) error {
	r := &app.Reconciler{Client: mgr.GetClient(), Releases: deps.Releases}
	if deps.Schedule {
		// Uncached: PlacementReviews are create-only and Placements are
		// read right after they are written.
		c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return fmt.Errorf("creating the scheduler client: %w", err)
		}
		r.Placer = app.SchedulerPlacer{Client: c}
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up %s: %w", app.ControllerName, err)
	}
	return nil
}
