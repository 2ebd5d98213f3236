package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/controllers/app"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/controllers/route"
	"bex.co/bex/controllers/runtimecreds"
	"bex.co/bex/controllers/scheme"
	"bex.co/bex/controllers/workerhook"
	"bex.co/bex/internal/localfleet"
)

// NewScheme returns a scheme with every kind the controllers read
// (scheme.New).
func NewScheme() *runtime.Scheme { return scheme.New() }

// Names returns the names of the controllers Setup always registers; the
// FleetUpgrade and local fleet controllers run when Deps asks for them
// (LocalFleetNames).
func Names() []string { return []string{app.ControllerName, route.ControllerName} }

// LocalFleetNames returns the names of the controllers make run's local
// fleet adds (Deps.LocalFleet and Deps.ServedApps).
func LocalFleetNames() []string {
	return []string{localinfra.ClusterControllerName, localinfra.MachineControllerName, workerhook.ControllerName}
}

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

	// ServedApps, when set, says which apps each Cluster API cluster
	// serves (the *store.Store of a platform that runs apps on its fleet's
	// clusters, as make run does): the worker Machines of a cluster being
	// deleted are held until its apps moved (controllers/workerhook), and
	// the App controller looks at the Apps of a Cluster as soon as it
	// changes. The management cluster must serve Cluster API's Cluster and
	// Machine kinds. Nil leaves worker Machines alone.
	ServedApps workerhook.Apps

	// LocalFleet, when set, runs the local infrastructure provider
	// (controllers/localinfra: LocalClusters and LocalMachines) over this
	// host's processes, as make run's local fleet does; the management
	// cluster must serve deploy/localinfra-crds. Nil leaves them alone.
	LocalFleet *localfleet.Host

	// RuntimeCredentials, when set, keeps in each Cluster API cluster an
	// identity with the kube driver's rights only and writes its
	// kubeconfigs into its Secret (controllers/runtimecreds), for a
	// cluster install that follows the placement
	// (--runtime-kubeconfigs-secret); Setup fills in Client, Reader and
	// Events. The management cluster must serve Cluster API's Cluster
	// kind. Nil leaves the clusters alone.
	RuntimeCredentials *runtimecreds.Reconciler

	// RuntimeSecret, when set, is the Secret of the runtime kubeconfigs
	// that the processes' placed runtime reads (--runtime-kubeconfigs-secret):
	// the App controller looks at the Apps of a cluster as soon as the
	// cluster's key is written or renewed there. The zero value watches
	// nothing.
	RuntimeSecret types.NamespacedName
}

// Setup registers every controller with mgr.
func Setup(mgr ctrl.Manager, deps Deps) error {
	r := &app.Reconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Releases: deps.Releases,
		Events: mgr.GetEventRecorder(app.ControllerName), WatchClusters: deps.ServedApps != nil,
		RuntimeSecret: deps.RuntimeSecret,
	}
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
		Reader:        mgr.GetAPIReader(),
		DNS:           deps.DNS,
		EdgeAddresses: deps.EdgeAddresses,
		AppDomain:     deps.AppDomain,
		Certificates:  deps.Certificates,

		ReservedHostnames: deps.ReservedHostnames,
	}
	if err := rr.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up %s: %w", route.ControllerName, err)
	}
	if deps.ServedApps != nil {
		wh := &workerhook.Reconciler{
			Client: mgr.GetClient(), Apps: deps.ServedApps, Events: mgr.GetEventRecorder(workerhook.ControllerName),
			Workloads: workerhook.SecretWorkloads(mgr.GetAPIReader()),
		}
		if err := wh.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %s: %w", workerhook.ControllerName, err)
		}
	}
	if h := deps.LocalFleet; h != nil {
		if err := (&localinfra.ClusterReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Host: h}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %s: %w", localinfra.ClusterControllerName, err)
		}
		if err := (&localinfra.MachineReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Host: h}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %s: %w", localinfra.MachineControllerName, err)
		}
	}
	if rc := deps.RuntimeCredentials; rc != nil {
		rc.Client, rc.Reader, rc.Events = mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder(runtimecreds.ControllerName)
		if err := rc.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %s: %w", runtimecreds.ControllerName, err)
		}
	}
	if fu := deps.FleetUpgrades; fu != nil {
		fu.Client, fu.Events = mgr.GetClient(), mgr.GetEventRecorder(fleetupgrade.ControllerName)
		if err := fu.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up %s: %w", fleetupgrade.ControllerName, err)
		}
	}
	return nil
}
