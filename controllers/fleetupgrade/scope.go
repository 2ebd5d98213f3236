package fleetupgrade

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/preflight"
)

// scope is what one reconcile of a FleetUpgrade observed and decided.
type scope struct {
	fu   *fleetv1.FleetUpgrade
	now  time.Time
	opts Options
	// target is the plan's normalised target version ("v1.37.2").
	target string
	// invalid is set when the spec cannot be planned (a terminal error).
	invalid error
	// refused are clusters the plan refuses (version skew and the like);
	// while there are any, nothing starts.
	refused []plan.Decision
	// clusters are the status entries, in plan order.
	clusters []*clusterScope
	// soaking names the stage that soaks, until soakUntil.
	soaking   string
	soakUntil time.Time
	// activeStage is the stage being upgraded.
	activeStage string
	// requeue is the shortest wait any phase asked for.
	requeue time.Duration
	// runID is the Records run, once started in this round.
	runID string
}

// clusterScope is one cluster of the plan: its status entry and what was
// observed of it this round.
type clusterScope struct {
	status *fleetv1.ClusterUpgradeStatus
	key    types.NamespacedName

	cluster  *clusterv1.Cluster
	kcp      *controlplanev1.KubeadmControlPlane
	machines []clusterv1.Machine

	// refusal is the plan's refusal of the cluster.
	refusal *plan.Decision
	// preflightRan is set when preflight ran this round; blockers and
	// warnings are its findings.
	preflightRan bool
	blockers     []preflight.Finding
	warnings     []preflight.Finding
	// gateFailed is set while a machine (or the version bump) waits for a
	// verification that failed.
	gateFailed bool
	// heldForOperator is set while spec.paused holds the cluster.
	heldForOperator bool
	// pausedElsewhere is set when the Cluster is paused by someone else.
	pausedElsewhere bool
	// waiting says what the cluster waits for, for Progressing.
	waiting string
	// loadBalancer is the cluster's API load balancer when the
	// load-balancer hand-off applies to it this round.
	loadBalancer string
	// handoffFailed is set, with the Hetzner API's error, while a
	// load-balancer hand-off fails.
	handoffFailed string
}

// newScope returns the scope of one reconcile of fu at now.
func newScope(fu *fleetv1.FleetUpgrade, now time.Time, opts Options) *scope {
	return &scope{fu: fu, now: now, opts: opts}
}

// requeueAfter asks for the next round within d; under a second counts as
// a second.
func (s *scope) requeueAfter(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	if s.requeue == 0 || d < s.requeue {
		s.requeue = d
	}
}

// gateOn reports whether the MVPVerified gate is on
// (spec.gates.mvpVerified, true unless set false).
func (s *scope) gateOn() bool {
	g := s.fu.Spec.Gates.MVPVerified
	return g == nil || *g
}

// soakTime is how long a finished stage soaks; ten minutes unless set.
func (s *scope) soakTime() time.Duration {
	if s.fu.Spec.SoakTime == nil {
		return 10 * time.Minute
	}
	return s.fu.Spec.SoakTime.Duration
}

// nowTime is the round's time as a status timestamp.
func (s *scope) nowTime() *metav1.Time {
	t := metav1.NewTime(s.now)
	return &t
}
