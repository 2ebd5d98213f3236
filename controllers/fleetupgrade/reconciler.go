package fleetupgrade

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/upgrade/preflight"
)

// ControllerName names the FleetUpgrade controller in logs and metrics.
const ControllerName = "fleetupgrade"

// Finalizer holds a FleetUpgrade until the Clusters it paused are handed
// back to Cluster API (see reconcileDelete).
const Finalizer = "fleet.bex.co/unpause-clusters"

// PausedByAnnotation is set on a Cluster the controller paused, with the
// FleetUpgrade's name. The controller only ever unpauses a Cluster that
// carries it with its own name.
const PausedByAnnotation = "fleet.bex.co/paused-by"

// Defaults of Options.
const (
	DefaultPollInterval        = 15 * time.Second
	DefaultVerifyRetryInterval = 30 * time.Second
)

// Options tune the controller; the zero value is production's.
type Options struct {
	// PollInterval is how often a cluster being upgraded is observed
	// again besides the watch events; DefaultPollInterval when zero.
	PollInterval time.Duration
	// VerifyRetryInterval is how long after a failed verification the
	// verifier runs again on a cluster held by the gate;
	// DefaultVerifyRetryInterval when zero.
	VerifyRetryInterval time.Duration
	// APIServerPort is the port the apiservers listen on, on each machine.
	// Zero means the Cluster's spec.controlPlaneEndpoint.port (6443 when
	// unset); set it when the load balancer's port differs from the
	// apiservers' (CAPH's load balancer listens on 443, for example).
	APIServerPort int32
	// HandoffRetryInterval is how long after a failed load-balancer
	// hand-off it is tried again; each further failure of the same
	// hand-off doubles the wait, up to HandoffMaxRetryInterval.
	// DefaultHandoffRetryInterval and DefaultHandoffMaxRetryInterval when
	// zero.
	HandoffRetryInterval    time.Duration
	HandoffMaxRetryInterval time.Duration
	// HandoffTimeout bounds one hand-off call: a removal with its drain
	// period, or an addition with the wait for the load balancer's health
	// checks. DefaultHandoffTimeout when zero.
	HandoffTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.VerifyRetryInterval <= 0 {
		o.VerifyRetryInterval = DefaultVerifyRetryInterval
	}
	if o.HandoffRetryInterval <= 0 {
		o.HandoffRetryInterval = DefaultHandoffRetryInterval
	}
	if o.HandoffMaxRetryInterval <= 0 {
		o.HandoffMaxRetryInterval = DefaultHandoffMaxRetryInterval
	}
	if o.HandoffTimeout <= 0 {
		o.HandoffTimeout = DefaultHandoffTimeout
	}
	return o
}

// Reconciler reconciles FleetUpgrades.
type Reconciler struct {
	Client client.Client
	// Reader reads the FleetUpgrade itself, uncached, so that a round
	// never acts on a status older than the last one it wrote (a machine
	// verified twice), and each cluster's kubeconfig Secret, so that the
	// manager caches no Secret; SetupWithManager sets the manager's API
	// reader when nil, and Client is used when it stays nil.
	Reader client.Reader
	// Verifier probes the apiservers of a cluster after each machine
	// replacement (and before the version bump). Required.
	Verifier Verifier
	// ManagementVerifier, when set, verifies the management cluster (its
	// Cluster labelled bex.co/management=true) instead of Verifier, so
	// that the platform's own APIs are probed there as well
	// (ManagementRunVerifier).
	ManagementVerifier Verifier
	// RESTConfig builds a workload cluster's rest.Config from its
	// kubeconfig Secret; DefaultRESTConfig when nil.
	RESTConfig RESTConfigFunc
	// Records, when set, keeps the history of each run (*store.Store).
	Records Records
	// Capacity, when set, answers preflight's surge-capacity check.
	Capacity preflight.Capacity
	// LoadBalancers, when set, turns the Hetzner load-balancer hand-off
	// on (HetznerLoadBalancers): the control-plane Machines of a cluster
	// being upgraded carry HandoffHook, a Machine's server leaves the
	// cluster's API load balancer before Cluster API drains and deletes
	// it, and a new Machine's server joins it before the verifier lets the
	// rollout go on. Nil: no hand-off.
	LoadBalancers LoadBalancerFunc
	// Events, when set, receives an Event for each bump, wiring, gate
	// failure and finished cluster.
	Events events.EventRecorder
	// Options tune intervals and the apiservers' port.
	Options Options
	// Metrics, when set, receives bex_fleetupgrade_steps_total and
	// bex_verifier_probes_total (docs/metrics.md) at SetupWithManager:
	// the manager's registry (controller-runtime's metrics.Registry) in
	// the platform's commands.
	Metrics prometheus.Registerer
	// Now returns the time; time.Now when nil (tests move it).
	Now func() time.Time

	retries retries
	// metrics is nil until SetupWithManager; nil counts nothing.
	metrics *metrics
}

// SetupWithManager registers the reconciler: it watches FleetUpgrades and
// the Cluster API Clusters, KubeadmControlPlanes and Machines they drive.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		return errors.New("fleetupgrade reconciler: Client is nil")
	}
	if r.Verifier == nil {
		return errors.New("fleetupgrade reconciler: Verifier is nil")
	}
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	m, err := newMetrics(r.Metrics)
	if err != nil {
		return err
	}
	r.metrics = m
	enqueue := handler.EnqueueRequestsFromMapFunc(r.upgradesInFlight)
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&fleetv1.FleetUpgrade{}).
		Watches(&clusterv1.Cluster{}, enqueue).
		Watches(&controlplanev1.KubeadmControlPlane{}, enqueue).
		Watches(&clusterv1.Machine{}, enqueue).
		Complete(r)
}

// upgradesInFlight maps a change of a Cluster API object to every
// FleetUpgrade that has not ended: there are few, and each reconcile reads
// only the clusters it drives.
func (r *Reconciler) upgradesInFlight(ctx context.Context, _ client.Object) []reconcile.Request {
	var list fleetv1.FleetUpgradeList
	if err := r.Client.List(ctx, &list); err != nil {
		logf.FromContext(ctx).Error(err, "Listing FleetUpgrades")
		return nil
	}
	var out []reconcile.Request
	for _, fu := range list.Items {
		if !finalPhase(fu.Status.Phase) || !fu.DeletionTimestamp.IsZero() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: fu.Name}})
		}
	}
	return out
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile observes a FleetUpgrade and the clusters it drives, moves them
// one step on, and writes the status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	fu := &fleetv1.FleetUpgrade{}
	if err := reader.Get(ctx, req.NamespacedName, fu); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log := logf.FromContext(ctx).WithValues("fleetUpgrade", klog.KObj(fu))
	ctx = logf.IntoContext(ctx, log)
	if !fu.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, r.reconcileDelete(ctx, fu)
	}
	if controllerutil.AddFinalizer(fu, Finalizer) {
		if err := r.Client.Update(ctx, fu); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	base := fu.DeepCopy()
	s := newScope(fu, r.now(), r.Options.withDefaults())
	defer func() {
		setConditions(s)
		if err := r.recordRunState(ctx, s, base.Status.Phase); err != nil {
			retErr = errors.Join(retErr, err)
		}
		if retErr == nil {
			fu.Status.ObservedGeneration = fu.Generation
		}
		if err := r.Client.Status().Patch(ctx, fu, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, fmt.Errorf("patching status: %w", err))
		}
	}()
	if err := r.reconcileNormal(ctx, s); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: s.requeue}, nil
}

// reconcileNormal runs the phases in order; a phase that returns done ends
// the round.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) error {
	for _, phase := range r.phases() {
		done, err := phase.run(ctx, s)
		r.metrics.countStep(phase.step, done, err)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
	return nil
}

// reconcileDelete hands the Clusters this FleetUpgrade paused back to
// Cluster API — unless it was aborted: an abort leaves them paused, and
// deleting the FleetUpgrade does not take the abort back. The hand-off hook
// it set comes off every Machine, also one being deleted: Cluster API then
// deletes it without the hand-off.
func (r *Reconciler) reconcileDelete(ctx context.Context, fu *fleetv1.FleetUpgrade) error {
	if !controllerutil.ContainsFinalizer(fu, Finalizer) {
		return nil
	}
	if err := r.releaseAllHooks(ctx, fu); err != nil {
		return err
	}
	if !fu.Spec.Abort {
		var clusters clusterv1.ClusterList
		if err := r.Client.List(ctx, &clusters); err != nil {
			return fmt.Errorf("listing clusters: %w", err)
		}
		for i := range clusters.Items {
			if err := r.unpauseCluster(ctx, fu, &clusters.Items[i]); err != nil {
				return err
			}
		}
	}
	controllerutil.RemoveFinalizer(fu, Finalizer)
	if err := r.Client.Update(ctx, fu); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}

func finalPhase(p fleetv1.FleetUpgradePhase) bool {
	return p == fleetv1.FleetUpgradePhaseSucceeded || p == fleetv1.FleetUpgradePhaseFailed || p == fleetv1.FleetUpgradePhaseAborted
}
