package fleetupgrade

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/preflight"
)

// setConditions computes the phase and every condition of the FleetUpgrade
// and of its clusters from the scope.
func setConditions(s *scope) {
	for _, cs := range s.clusters {
		setClusterPreflightCondition(s, cs)
		setClusterProgressingCondition(s, cs)
		setClusterPausedCondition(s, cs)
		setClusterVerifiedCondition(s, cs)
	}
	setPhase(s)
	setPreflightPassedCondition(s)
	setPausedCondition(s)
	setVerifiedCondition(s)
	setProgressingCondition(s)
	setReadyCondition(s)
}

func setCondition(conds *[]metav1.Condition, gen int64, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: gen})
}

// clusterPreflight is the cluster's PreflightPassed verdict, or an empty
// status when nothing was checked this round.
func clusterPreflight(cs *clusterScope) (metav1.ConditionStatus, string, string) {
	if d := cs.refusal; d != nil {
		reason := d.Reason
		switch d.Reason {
		case plan.ReasonTooFarBehind, plan.ReasonAheadOfTarget, plan.ReasonNotFromVersion, plan.ReasonUnknownVersion:
			reason = fleetv1.FleetUpgradeVersionSkewReason
		}
		return metav1.ConditionFalse, reason, d.Message
	}
	if !cs.preflightRan {
		return "", "", ""
	}
	if len(cs.blockers) == 0 {
		msg := "no blockers"
		if len(cs.warnings) > 0 {
			msg += fmt.Sprintf("; %d warnings: %s", len(cs.warnings), findingMessages(cs.warnings))
		}
		return metav1.ConditionTrue, fleetv1.FleetUpgradePreflightSucceededReason, msg
	}
	if preflight.OnlyWireMVPBlockers(cs.blockers) {
		return metav1.ConditionFalse, fleetv1.FleetUpgradeMVPNotWiredReason,
			"the Mixed Version Proxy is not wired: " + findingMessages(cs.blockers) +
				". Set spec.wireMVP: true to have the controller wire it in a rollout of its own before the version bump, or wire it by hand (docs/upgrades.md, section 1)"
	}
	reason := ""
	for _, b := range cs.blockers {
		if b.FixedByWireMVP {
			continue
		}
		switch b.Reason {
		case preflight.ReasonInsufficientCapacity:
			reason = fleetv1.FleetUpgradeInsufficientCapacityReason
		case preflight.ReasonUnknownVersion:
			reason = fleetv1.FleetUpgradeVersionSkewReason
		default:
			reason = b.Reason
		}
		break
	}
	return metav1.ConditionFalse, reason, findingMessages(cs.blockers)
}

func findingMessages(fs []preflight.Finding) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.Reason + ": " + f.Message
	}
	return strings.Join(parts, "; ")
}

func setClusterPreflightCondition(s *scope, cs *clusterScope) {
	status, reason, msg := clusterPreflight(cs)
	if status == "" {
		return
	}
	setCondition(&cs.status.Conditions, s.fu.Generation, fleetv1.FleetUpgradePreflightPassedCondition, status, reason, msg)
}

// clusterHold is why a cluster is held, if it is: the Paused reason and
// message.
func clusterHold(cs *clusterScope) (reason, message string) {
	switch {
	case cs.handoffFailed != "":
		return fleetv1.FleetUpgradeLoadBalancerHandoffFailedReason, cs.handoffFailed
	case cs.gateFailed:
		msg := "the verifier failed"
		if v := cs.status.LastVerification; v != nil {
			msg = v.Message
		}
		return fleetv1.FleetUpgradeGateFailedReason, msg
	case cs.heldForOperator:
		return fleetv1.FleetUpgradePausedByOperatorReason, cs.waiting
	case cs.pausedElsewhere:
		return fleetv1.FleetUpgradePausedByOperatorReason, cs.waiting
	}
	return "", ""
}

func setClusterProgressingCondition(s *scope, cs *clusterScope) {
	gen := s.fu.Generation
	set := func(status metav1.ConditionStatus, reason, msg string) {
		setCondition(&cs.status.Conditions, gen, fleetv1.FleetUpgradeProgressingCondition, status, reason, msg)
	}
	switch cs.status.Phase {
	case fleetv1.ClusterUpgradePhaseSucceeded:
		set(metav1.ConditionFalse, fleetv1.FleetUpgradeSucceededReason, "the cluster runs "+cs.status.ToVersion)
	case fleetv1.ClusterUpgradePhaseSkipped:
		set(metav1.ConditionFalse, fleetv1.FleetUpgradeSucceededReason, "the cluster already ran "+cs.status.FromVersion)
	case fleetv1.ClusterUpgradePhaseFailed:
		set(metav1.ConditionFalse, fleetv1.FleetUpgradeFailedReason, nonEmpty(cs.waiting, "the cluster failed"))
	case fleetv1.ClusterUpgradePhaseAborted:
		set(metav1.ConditionFalse, fleetv1.FleetUpgradeAbortedReason, nonEmpty(cs.waiting, "spec.abort is true"))
	case fleetv1.ClusterUpgradePhasePending, "":
		if cs.refusal != nil {
			set(metav1.ConditionFalse, fleetv1.FleetUpgradeVersionSkewReason, cs.refusal.Message)
			return
		}
		set(metav1.ConditionFalse, fleetv1.FleetUpgradePendingReason, "waiting for its turn")
	default:
		if s.fu.Spec.Abort {
			set(metav1.ConditionTrue, fleetv1.FleetUpgradeAbortedReason, cs.waiting)
			return
		}
		if reason, msg := clusterHold(cs); reason != "" {
			set(metav1.ConditionFalse, reason, msg)
			return
		}
		if cs.waiting == "" {
			// Not observed this round: keep what was said.
			if meta.FindStatusCondition(cs.status.Conditions, fleetv1.FleetUpgradeProgressingCondition) != nil {
				return
			}
		}
		set(metav1.ConditionTrue, fleetv1.FleetUpgradeInProgressReason, nonEmpty(cs.waiting, "upgrading"))
	}
}

func setClusterPausedCondition(s *scope, cs *clusterScope) {
	gen := s.fu.Generation
	if reason, msg := clusterHold(cs); reason != "" {
		setCondition(&cs.status.Conditions, gen, fleetv1.FleetUpgradePausedCondition, metav1.ConditionTrue, reason, msg)
		return
	}
	if cs.status.Phase == fleetv1.ClusterUpgradePhaseAborted && cs.cluster != nil && clusterPaused(cs.cluster) {
		setCondition(&cs.status.Conditions, gen, fleetv1.FleetUpgradePausedCondition, metav1.ConditionTrue, fleetv1.FleetUpgradeAbortedReason, cs.waiting)
		return
	}
	if cs.status.Phase == fleetv1.ClusterUpgradePhaseAborted &&
		meta.IsStatusConditionTrue(cs.status.Conditions, fleetv1.FleetUpgradePausedCondition) {
		return // aborted while paused; not observed again
	}
	reason := fleetv1.FleetUpgradeInProgressReason
	if finalClusterPhase(cs.status.Phase) {
		reason = string(cs.status.Phase)
	}
	setCondition(&cs.status.Conditions, gen, fleetv1.FleetUpgradePausedCondition, metav1.ConditionFalse, reason, "not paused")
}

func setClusterVerifiedCondition(s *scope, cs *clusterScope) {
	gen := s.fu.Generation
	v := cs.status.LastVerification
	switch {
	case v == nil:
		setCondition(&cs.status.Conditions, gen, fleetv1.FleetUpgradeVerifiedCondition, metav1.ConditionUnknown,
			fleetv1.FleetUpgradeAwaitingVerificationReason, "the verifier has not run on this cluster yet")
	case v.Passed:
		setCondition(&cs.status.Conditions, gen, fleetv1.FleetUpgradeVerifiedCondition, metav1.ConditionTrue, v.Reason, v.Message)
	default:
		setCondition(&cs.status.Conditions, gen, fleetv1.FleetUpgradeVerifiedCondition, metav1.ConditionFalse, v.Reason, v.Message)
	}
}

// setPhase sets the FleetUpgrade's phase from its clusters'.
func setPhase(s *scope) {
	st := &s.fu.Status
	var active, failed, gated, wiring, preflightOnly int
	for _, cs := range s.clusters {
		p := cs.status.Phase
		if p == fleetv1.ClusterUpgradePhaseFailed {
			failed++
		}
		if !startedClusterPhase(p) || finalClusterPhase(p) {
			continue
		}
		active++
		if cs.gateFailed || cs.handoffFailed != "" {
			gated++
		}
		switch p {
		case fleetv1.ClusterUpgradePhaseWiringMVP:
			wiring++
		case fleetv1.ClusterUpgradePhasePreflight:
			preflightOnly++
		}
	}
	pending := 0
	for _, cs := range s.clusters {
		if cs.status.Phase == fleetv1.ClusterUpgradePhasePending {
			pending++
		}
	}
	switch {
	case s.invalid != nil:
		st.Phase = fleetv1.FleetUpgradePhaseFailed
	case s.fu.Spec.Abort:
		st.Phase = fleetv1.FleetUpgradePhaseAborted
	case len(s.refused) > 0:
		st.Phase = fleetv1.FleetUpgradePhasePreflight
	case failed > 0 && active == 0:
		st.Phase = fleetv1.FleetUpgradePhaseFailed
	case active == 0 && pending == 0 && s.soaking == "":
		st.Phase = fleetv1.FleetUpgradePhaseSucceeded
	case gated > 0 || s.fu.Spec.Paused:
		st.Phase = fleetv1.FleetUpgradePhasePaused
	case s.soaking != "":
		st.Phase = fleetv1.FleetUpgradePhaseSoaking
	case wiring > 0:
		st.Phase = fleetv1.FleetUpgradePhaseWiringMVP
	case active > 0 && preflightOnly == active:
		st.Phase = fleetv1.FleetUpgradePhasePreflight
	case s.activeStage == plan.CanaryStage:
		st.Phase = fleetv1.FleetUpgradePhaseCanary
	case active == 0:
		st.Phase = fleetv1.FleetUpgradePhasePending
	default:
		st.Phase = fleetv1.FleetUpgradePhaseRolling
	}
}

// clusterConditions collects one condition type of the clusters with the
// given status as "cluster: message" lines, and the first reason.
func clusterConditions(s *scope, typ string, status metav1.ConditionStatus) (reason, message string, n int) {
	var parts []string
	for _, cs := range s.clusters {
		c := meta.FindStatusCondition(cs.status.Conditions, typ)
		if c == nil || c.Status != status {
			continue
		}
		if reason == "" {
			reason = c.Reason
		}
		parts = append(parts, cs.status.Name+": "+c.Message)
	}
	return reason, strings.Join(parts, "\n"), len(parts)
}

func setPreflightPassedCondition(s *scope) {
	conds, gen := &s.fu.Status.Conditions, s.fu.Generation
	if s.invalid != nil {
		setCondition(conds, gen, fleetv1.FleetUpgradePreflightPassedCondition, metav1.ConditionFalse, fleetv1.FleetUpgradeFailedReason, s.invalid.Error())
		return
	}
	if reason, msg, _ := clusterConditions(s, fleetv1.FleetUpgradePreflightPassedCondition, metav1.ConditionFalse); reason != "" {
		setCondition(conds, gen, fleetv1.FleetUpgradePreflightPassedCondition, metav1.ConditionFalse, reason, msg)
		return
	}
	if _, _, n := clusterConditions(s, fleetv1.FleetUpgradePreflightPassedCondition, metav1.ConditionTrue); n > 0 {
		setCondition(conds, gen, fleetv1.FleetUpgradePreflightPassedCondition, metav1.ConditionTrue, fleetv1.FleetUpgradePreflightSucceededReason,
			fmt.Sprintf("%d clusters passed preflight", n))
		return
	}
	setCondition(conds, gen, fleetv1.FleetUpgradePreflightPassedCondition, metav1.ConditionUnknown, fleetv1.FleetUpgradePendingReason, "no cluster was checked yet")
}

func setPausedCondition(s *scope) {
	conds, gen := &s.fu.Status.Conditions, s.fu.Generation
	var gated, handoffs []string
	for _, cs := range s.clusters {
		switch reason, msg := clusterHold(cs); reason {
		case fleetv1.FleetUpgradeGateFailedReason:
			gated = append(gated, cs.status.Name+": "+msg)
		case fleetv1.FleetUpgradeLoadBalancerHandoffFailedReason:
			handoffs = append(handoffs, cs.status.Name+": "+msg)
		}
	}
	switch {
	case s.fu.Spec.Abort:
		_, msg, n := clusterConditions(s, fleetv1.FleetUpgradePausedCondition, metav1.ConditionTrue)
		if n > 0 {
			setCondition(conds, gen, fleetv1.FleetUpgradePausedCondition, metav1.ConditionTrue, fleetv1.FleetUpgradeAbortedReason,
				"aborted; these clusters stay paused until you unpause them:\n"+msg)
			return
		}
		setCondition(conds, gen, fleetv1.FleetUpgradePausedCondition, metav1.ConditionFalse, fleetv1.FleetUpgradeAbortedReason, "aborted; no cluster is paused")
	case len(handoffs) > 0:
		setCondition(conds, gen, fleetv1.FleetUpgradePausedCondition, metav1.ConditionTrue, fleetv1.FleetUpgradeLoadBalancerHandoffFailedReason,
			"the Hetzner load-balancer hand-off holds the rollout (retried with backoff; spec.abort stops for good):\n"+strings.Join(handoffs, "\n"))
	case len(gated) > 0:
		setCondition(conds, gen, fleetv1.FleetUpgradePausedCondition, metav1.ConditionTrue, fleetv1.FleetUpgradeGateFailedReason,
			"the MVP gate holds the rollout (the verifier runs again until it passes; spec.abort stops for good):\n"+strings.Join(gated, "\n"))
	case s.fu.Spec.Paused:
		setCondition(conds, gen, fleetv1.FleetUpgradePausedCondition, metav1.ConditionTrue, fleetv1.FleetUpgradePausedByOperatorReason,
			"spec.paused is true: clusters being upgraded stop after the machine being replaced, no cluster starts")
	default:
		setCondition(conds, gen, fleetv1.FleetUpgradePausedCondition, metav1.ConditionFalse, fleetv1.FleetUpgradeInProgressReason, "not paused")
	}
}

func setVerifiedCondition(s *scope) {
	conds, gen := &s.fu.Status.Conditions, s.fu.Generation
	if reason, msg, _ := clusterConditions(s, fleetv1.FleetUpgradeVerifiedCondition, metav1.ConditionFalse); reason != "" {
		setCondition(conds, gen, fleetv1.FleetUpgradeVerifiedCondition, metav1.ConditionFalse, reason, msg)
		return
	}
	if _, _, n := clusterConditions(s, fleetv1.FleetUpgradeVerifiedCondition, metav1.ConditionTrue); n > 0 {
		setCondition(conds, gen, fleetv1.FleetUpgradeVerifiedCondition, metav1.ConditionTrue, fleetv1.FleetUpgradeMVPVerifiedReason,
			fmt.Sprintf("the last verification of %d clusters passed", n))
		return
	}
	setCondition(conds, gen, fleetv1.FleetUpgradeVerifiedCondition, metav1.ConditionUnknown, fleetv1.FleetUpgradeAwaitingVerificationReason, "the verifier has not run yet")
}

func setProgressingCondition(s *scope) {
	conds, gen := &s.fu.Status.Conditions, s.fu.Generation
	set := func(status metav1.ConditionStatus, reason, msg string) {
		setCondition(conds, gen, fleetv1.FleetUpgradeProgressingCondition, status, reason, msg)
	}
	switch s.fu.Status.Phase {
	case fleetv1.FleetUpgradePhaseSucceeded:
		set(metav1.ConditionFalse, fleetv1.FleetUpgradeSucceededReason, "every selected cluster runs "+s.target)
	case fleetv1.FleetUpgradePhaseFailed:
		set(metav1.ConditionFalse, fleetv1.FleetUpgradeFailedReason, readyMessage(s))
	case fleetv1.FleetUpgradePhaseAborted:
		_, msg, n := clusterConditions(s, fleetv1.FleetUpgradeProgressingCondition, metav1.ConditionTrue)
		if n > 0 {
			set(metav1.ConditionTrue, fleetv1.FleetUpgradeAbortedReason, msg)
			return
		}
		set(metav1.ConditionFalse, fleetv1.FleetUpgradeAbortedReason, "spec.abort is true")
	case fleetv1.FleetUpgradePhasePaused:
		c := meta.FindStatusCondition(*conds, fleetv1.FleetUpgradePausedCondition)
		set(metav1.ConditionFalse, c.Reason, c.Message)
	case fleetv1.FleetUpgradePhaseSoaking:
		set(metav1.ConditionTrue, fleetv1.FleetUpgradeSoakingReason,
			fmt.Sprintf("stage %s soaks until %s", s.soaking, s.soakUntil.UTC().Format("2006-01-02T15:04:05Z")))
	default:
		if len(s.refused) > 0 {
			c := meta.FindStatusCondition(*conds, fleetv1.FleetUpgradePreflightPassedCondition)
			set(metav1.ConditionFalse, c.Reason, "refused: "+c.Message)
			return
		}
		if _, msg, n := clusterConditions(s, fleetv1.FleetUpgradeProgressingCondition, metav1.ConditionTrue); n > 0 {
			set(metav1.ConditionTrue, fleetv1.FleetUpgradeInProgressReason, msg)
			return
		}
		if _, msg, n := clusterConditions(s, fleetv1.FleetUpgradePreflightPassedCondition, metav1.ConditionFalse); n > 0 {
			set(metav1.ConditionFalse, fleetv1.FleetUpgradePendingReason, "preflight holds: "+msg)
			return
		}
		set(metav1.ConditionTrue, fleetv1.FleetUpgradeInProgressReason, readyMessage(s))
	}
}

func readyMessage(s *scope) string {
	if s.invalid != nil {
		return s.invalid.Error()
	}
	counts := map[fleetv1.ClusterUpgradePhase]int{}
	var failed []string
	for _, cs := range s.clusters {
		counts[cs.status.Phase]++
		if cs.status.Phase == fleetv1.ClusterUpgradePhaseFailed {
			failed = append(failed, cs.status.Name)
		}
	}
	msg := fmt.Sprintf("%d of %d clusters upgraded to %s (%d skipped)", counts[fleetv1.ClusterUpgradePhaseSucceeded],
		len(s.clusters)-counts[fleetv1.ClusterUpgradePhaseSkipped], s.target, counts[fleetv1.ClusterUpgradePhaseSkipped])
	if len(failed) > 0 {
		msg += "; failed: " + strings.Join(failed, ", ")
	}
	return msg
}

func setReadyCondition(s *scope) {
	conds, gen := &s.fu.Status.Conditions, s.fu.Generation
	switch s.fu.Status.Phase {
	case fleetv1.FleetUpgradePhaseSucceeded:
		setCondition(conds, gen, fleetv1.FleetUpgradeReadyCondition, metav1.ConditionTrue, fleetv1.FleetUpgradeSucceededReason, readyMessage(s))
	case fleetv1.FleetUpgradePhaseFailed:
		setCondition(conds, gen, fleetv1.FleetUpgradeReadyCondition, metav1.ConditionFalse, fleetv1.FleetUpgradeFailedReason, readyMessage(s))
	case fleetv1.FleetUpgradePhaseAborted:
		setCondition(conds, gen, fleetv1.FleetUpgradeReadyCondition, metav1.ConditionFalse, fleetv1.FleetUpgradeAbortedReason, "aborted: "+readyMessage(s))
	default:
		if len(s.refused) > 0 {
			c := meta.FindStatusCondition(*conds, fleetv1.FleetUpgradePreflightPassedCondition)
			setCondition(conds, gen, fleetv1.FleetUpgradeReadyCondition, metav1.ConditionFalse, c.Reason, "refused: "+c.Message)
			return
		}
		setCondition(conds, gen, fleetv1.FleetUpgradeReadyCondition, metav1.ConditionFalse, fleetv1.FleetUpgradeInProgressReason, readyMessage(s))
	}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
