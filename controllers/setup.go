package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "bex.co/bex/apis/fleet/v1alpha1"
	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/controllers/app"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/controllers/route"
)

// NewScheme returns a scheme with every kind the controllers read.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		rbacv1.AddToScheme, // the tenant role bindings of the controller manager's Releases
		platformv1alpha1.AddToScheme,
		fleetv1alpha1.AddToScheme,
		schedulingv1alpha1.AddToScheme,
		clusterv1.AddToScheme,
		controlplanev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("building scheme: %v", err)) // only a programming error gets here
		}
	}
	return s
}

// Names returns the names of the controllers Setup registers.
func Names() []string { return []string{app.ControllerName, route.ControllerName} }

// Deps are what the controllers need beyond the manager. Nil fields turn
// the parts that need them off (see each reconciler).
type Deps struct {
	// Releases keeps Apps' current releases running.
	Releases app.Releases
	// Schedule places Apps through the scheduling.bex.co API.
	Schedule bool

	// DNS looks Routes' hostnames up: their ownership TXT records and
	// their addresses (net.DefaultResolver, or one aimed at the operator's
	// --dns-resolver). Required. With no EdgeAddresses, Routes' DNSReady
	// stays Unknown.
	DNS route.Resolver
	// EdgeAddresses are the edge's public IP addresses, which Routes'
	// hostnames must resolve to.
	EdgeAddresses []string
	// AppDomain is the domain of apps' default hostnames (a port is
	// ignored); Routes' DNS advice offers a CNAME to them, and it is part
	// of the ownership tokens (the API's must be the same).
	AppDomain string
	// ReservedHostnames are names the platform serves itself, which no
	// Route may claim (route.Reconciler.ReservedHostnames).
	ReservedHostnames []string
	// Certificates reads the edge's certificate storage (an
	// *edge.Certificates); nil leaves CertificateReady of Routes with
	// spec.tls.mode Auto Unknown. A typed nil pointer is not nil here.
	Certificates route.CertificateStates

	// FleetUpgrades, when set, runs FleetUpgrades: its Verifier, and
	// optionally Records (the *store.Store), RESTConfig, Capacity,
	// LoadBalancers and Options; Setup fills in Client and Events. Nil
	// leaves FleetUpgrades alone (a cluster without Cluster API's CRDs).
	// LoadBalancers (fleetupgrade.HetznerLoadBalancers with an hcloud
	// client) turns the Hetzner load-balancer hand-off on; nil upgrades
	// without it.
	FleetUpgrades *fleetupgrade.Reconciler
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
	rr := &route.Reconciler{
		Client:        mgr.GetClient(),
		DNS:           deps.DNS,
		EdgeAddresses: deps.EdgeAddresses,
		AppDomain:     deps.AppDomain,
		Certificates:  deps.Certificates,

		ReservedHostnames: deps.ReservedHostnames,
	}
	if err := rr.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up %s: %w", route.ControllerName, err)
	}
	if fu := deps.FleetUpgrades; fu != nil {
		fu.Client, fu.Events = mgr.GetClient(), mgr.GetEventRecorder(fleetupgrade.ControllerName)
		if err := fu.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %s: %w", fleetupgrade.ControllerName, err)
		}
	}
	return nil
}
