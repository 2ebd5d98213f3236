package fleetupgrade

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/preflight"
	"bex.co/bex/internal/upgrade/verify"
)

func TestJudge(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"}
	ok := verify.Probe{APIServer: "cp-1", Resource: gvr, Verb: "list", Status: 200, Outcome: verify.Proxied}
	s404 := verify.Probe{APIServer: "cp-2", Resource: gvr, Verb: "list", Status: 404, Outcome: verify.Spurious404, Message: "not found"}
	s503 := verify.Probe{APIServer: "cp-3", Resource: gvr, Verb: "list", Status: 503, Outcome: verify.Honest503, Message: "error trying to reach service"}
	for _, tc := range []struct {
		name      string
		probes    []verify.Probe
		discovery []verify.DiscoveryDiff
		max       int
		passed    bool
		reason    string
		contains  []string
	}{
		{name: "nothing to probe", discovery: []verify.DiscoveryDiff{{APIServer: "cp-1"}, {APIServer: "cp-2"}, {APIServer: "cp-3"}}, passed: true, reason: fleetv1.FleetUpgradeMVPVerifiedReason,
			contains: []string{"the discovery of 3 apiservers read; nothing to probe"}},
		{name: "counts servers probed or read", probes: []verify.Probe{ok}, discovery: []verify.DiscoveryDiff{{APIServer: "cp-1"}, {APIServer: "cp-2"}}, passed: true, reason: fleetv1.FleetUpgradeMVPVerifiedReason,
			contains: []string{"1 probes on 2 apiservers"}},
		{name: "all passed", probes: []verify.Probe{ok}, passed: true, reason: fleetv1.FleetUpgradeMVPVerifiedReason, contains: []string{"1 probes on 1 apiservers"}},
		{name: "spurious 404", probes: []verify.Probe{ok, s404}, reason: fleetv1.FleetUpgradeSpurious404Reason,
			contains: []string{"apiserver cp-2 answered list resource.k8s.io/v1 devicetaintrules with 404 (Spurious404): not found"}},
		{name: "404 within tolerance", probes: []verify.Probe{ok, s404}, max: 1, passed: true, reason: fleetv1.FleetUpgradeMVPVerifiedReason, contains: []string{"within gates.maxSpurious404"}},
		{name: "503 is never tolerated", probes: []verify.Probe{ok, s503}, max: 5, reason: fleetv1.FleetUpgradeProbeFailedReason, contains: []string{"cp-3", "503", "error trying to reach service"}},
		{name: "404 and 503", probes: []verify.Probe{s404, s503}, max: 1, reason: fleetv1.FleetUpgradeSpurious404Reason, contains: []string{"cp-2", "cp-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			passed, reason, msg := judge(verify.Report{Probes: tc.probes, Discovery: tc.discovery}, tc.max)
			if passed != tc.passed || reason != tc.reason {
				t.Errorf("judge = %v %s (%s)", passed, reason, msg)
			}
			for _, c := range tc.contains {
				if !strings.Contains(msg, c) {
					t.Errorf("message %q lacks %q", msg, c)
				}
			}
		})
	}
}

func TestClusterPreflight(t *testing.T) {
	wire := preflight.Finding{Check: preflight.CheckMVPWiring, Severity: preflight.Blocker, Reason: preflight.ReasonPeerCAFileMissing, Message: "--peer-ca-file is not set", FixedByWireMVP: true}
	gate := preflight.Finding{Check: preflight.CheckFeatureGate, Severity: preflight.Blocker, Reason: preflight.ReasonFeatureGateOff, Message: "the gate is off", FixedByWireMVP: true}
	capacity := preflight.Finding{Check: preflight.CheckSurgeCapacity, Severity: preflight.Blocker, Reason: preflight.ReasonInsufficientCapacity, Message: "no room"}
	hosts := preflight.Finding{Check: preflight.CheckHostnames, Severity: preflight.Blocker, Reason: preflight.ReasonDuplicateHostname, Message: "cp-1, cp-2 share a hostname"}
	warn := preflight.Finding{Severity: preflight.Warning, Reason: preflight.ReasonHostnameUnknown, Message: "cp-4 has no hostname yet"}
	for _, tc := range []struct {
		name     string
		cs       clusterScope
		status   metav1.ConditionStatus
		reason   string
		contains []string
	}{
		{name: "not checked", cs: clusterScope{}},
		{name: "too far behind", cs: clusterScope{refusal: &plan.Decision{Reason: plan.ReasonTooFarBehind, Message: "upgrade it to 1.36 first"}},
			status: metav1.ConditionFalse, reason: fleetv1.FleetUpgradeVersionSkewReason, contains: []string{"1.36 first"}},
		{name: "no control plane keeps the plan's reason", cs: clusterScope{refusal: &plan.Decision{Reason: plan.ReasonNoControlPlane, Message: "no KCP"}},
			status: metav1.ConditionFalse, reason: plan.ReasonNoControlPlane},
		{name: "passed with warnings", cs: clusterScope{preflightRan: true, warnings: []preflight.Finding{warn}},
			status: metav1.ConditionTrue, reason: fleetv1.FleetUpgradePreflightSucceededReason, contains: []string{"1 warnings", "cp-4 has no hostname"}},
		{name: "MVP not wired", cs: clusterScope{preflightRan: true, blockers: []preflight.Finding{wire, gate}},
			status: metav1.ConditionFalse, reason: fleetv1.FleetUpgradeMVPNotWiredReason, contains: []string{"PeerCAFileMissing: --peer-ca-file", "FeatureGateOff", "spec.wireMVP: true"}},
		{name: "capacity beats wiring", cs: clusterScope{preflightRan: true, blockers: []preflight.Finding{wire, capacity}},
			status: metav1.ConditionFalse, reason: fleetv1.FleetUpgradeInsufficientCapacityReason, contains: []string{"no room", "--peer-ca-file"}},
		{name: "another blocker keeps its reason", cs: clusterScope{preflightRan: true, blockers: []preflight.Finding{hosts}},
			status: metav1.ConditionFalse, reason: preflight.ReasonDuplicateHostname},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, reason, msg := clusterPreflight(&tc.cs)
			if status != tc.status || reason != tc.reason {
				t.Errorf("= %s %s (%s)", status, reason, msg)
			}
			for _, c := range tc.contains {
				if !strings.Contains(msg, c) {
					t.Errorf("message %q lacks %q", msg, c)
				}
			}
		})
	}
}

// TestSetConditions runs setConditions over scopes as the phases leave
// them and checks the FleetUpgrade's phase and conditions.
func TestSetConditions(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	failedVerification := &fleetv1.Verification{Time: metav1.NewTime(now), Reason: fleetv1.FleetUpgradeSpurious404Reason, Message: "apiserver cp-2 answered 404"}
	cluster := func(name, wave string, phase fleetv1.ClusterUpgradePhase, mut ...func(*clusterScope)) *clusterScope {
		cs := &clusterScope{status: &fleetv1.ClusterUpgradeStatus{Name: name, Wave: wave, Phase: phase, ToVersion: "v1.37.2"}}
		for _, m := range mut {
			m(cs)
		}
		return cs
	}
	type want struct {
		status  metav1.ConditionStatus
		reason  string
		message string
	}
	for _, tc := range []struct {
		name  string
		spec  fleetv1.FleetUpgradeSpec
		scope scope
		phase fleetv1.FleetUpgradePhase
		want  map[string]want
	}{
		{name: "invalid spec", scope: scope{invalid: plan.ErrInvalidSpec}, phase: fleetv1.FleetUpgradePhaseFailed,
			want: map[string]want{
				fleetv1.FleetUpgradeReadyCondition:           {metav1.ConditionFalse, fleetv1.FleetUpgradeFailedReason, "invalid"},
				fleetv1.FleetUpgradePreflightPassedCondition: {metav1.ConditionFalse, fleetv1.FleetUpgradeFailedReason, "invalid"},
			}},
		{name: "version skew refuses the start", scope: scope{
			refused: []plan.Decision{{Reason: plan.ReasonTooFarBehind, Message: "upgrade it to 1.36 first"}},
			clusters: []*clusterScope{cluster("f/a", "", fleetv1.ClusterUpgradePhasePending, func(cs *clusterScope) {
				cs.refusal = &plan.Decision{Reason: plan.ReasonTooFarBehind, Message: "upgrade it to 1.36 first"}
			})},
		}, phase: fleetv1.FleetUpgradePhasePreflight,
			want: map[string]want{
				fleetv1.FleetUpgradePreflightPassedCondition: {metav1.ConditionFalse, fleetv1.FleetUpgradeVersionSkewReason, "f/a: upgrade it to 1.36 first"},
				fleetv1.FleetUpgradeReadyCondition:           {metav1.ConditionFalse, fleetv1.FleetUpgradeVersionSkewReason, "refused"},
				fleetv1.FleetUpgradeProgressingCondition:     {metav1.ConditionFalse, fleetv1.FleetUpgradeVersionSkewReason, "refused"},
			}},
		{name: "canary rolling", scope: scope{activeStage: plan.CanaryStage, clusters: []*clusterScope{
			cluster("f/a", plan.CanaryStage, fleetv1.ClusterUpgradePhaseUpgrading, func(cs *clusterScope) { cs.waiting = "replacing machines" }),
			cluster("f/b", plan.RemainingStage, fleetv1.ClusterUpgradePhasePending),
		}}, phase: fleetv1.FleetUpgradePhaseCanary,
			want: map[string]want{
				fleetv1.FleetUpgradeProgressingCondition: {metav1.ConditionTrue, fleetv1.FleetUpgradeInProgressReason, "f/a: replacing machines"},
				fleetv1.FleetUpgradePausedCondition:      {metav1.ConditionFalse, fleetv1.FleetUpgradeInProgressReason, ""},
				fleetv1.FleetUpgradeVerifiedCondition:    {metav1.ConditionUnknown, fleetv1.FleetUpgradeAwaitingVerificationReason, ""},
				fleetv1.FleetUpgradeReadyCondition:       {metav1.ConditionFalse, fleetv1.FleetUpgradeInProgressReason, "0 of 2"},
			}},
		{name: "gate failed", scope: scope{clusters: []*clusterScope{
			cluster("f/a", plan.RemainingStage, fleetv1.ClusterUpgradePhasePaused, func(cs *clusterScope) {
				cs.gateFailed, cs.status.LastVerification = true, failedVerification
			}),
		}}, phase: fleetv1.FleetUpgradePhasePaused,
			want: map[string]want{
				fleetv1.FleetUpgradePausedCondition:      {metav1.ConditionTrue, fleetv1.FleetUpgradeGateFailedReason, "f/a: apiserver cp-2 answered 404"},
				fleetv1.FleetUpgradeVerifiedCondition:    {metav1.ConditionFalse, fleetv1.FleetUpgradeSpurious404Reason, "f/a: apiserver cp-2 answered 404"},
				fleetv1.FleetUpgradeProgressingCondition: {metav1.ConditionFalse, fleetv1.FleetUpgradeGateFailedReason, "cp-2"},
			}},
		{name: "a failing hand-off holds ahead of a failed gate", scope: scope{clusters: []*clusterScope{
			cluster("f/a", plan.RemainingStage, fleetv1.ClusterUpgradePhaseUpgrading, func(cs *clusterScope) {
				cs.handoffFailed = "removing server cp-1 failed: insufficient permissions (forbidden)"
			}),
			cluster("f/b", plan.RemainingStage, fleetv1.ClusterUpgradePhasePaused, func(cs *clusterScope) {
				cs.gateFailed, cs.status.LastVerification = true, failedVerification
			}),
		}}, phase: fleetv1.FleetUpgradePhasePaused,
			want: map[string]want{
				fleetv1.FleetUpgradePausedCondition:      {metav1.ConditionTrue, fleetv1.FleetUpgradeLoadBalancerHandoffFailedReason, "f/a: removing server cp-1 failed: insufficient permissions (forbidden)"},
				fleetv1.FleetUpgradeProgressingCondition: {metav1.ConditionFalse, fleetv1.FleetUpgradeLoadBalancerHandoffFailedReason, "insufficient permissions"},
				fleetv1.FleetUpgradeVerifiedCondition:    {metav1.ConditionFalse, fleetv1.FleetUpgradeSpurious404Reason, "f/b"},
			}},
		{name: "paused by the operator", spec: fleetv1.FleetUpgradeSpec{Paused: true}, scope: scope{clusters: []*clusterScope{
			cluster("f/a", plan.RemainingStage, fleetv1.ClusterUpgradePhasePaused, func(cs *clusterScope) { cs.heldForOperator, cs.waiting = true, "held" }),
		}}, phase: fleetv1.FleetUpgradePhasePaused,
			want: map[string]want{
				fleetv1.FleetUpgradePausedCondition: {metav1.ConditionTrue, fleetv1.FleetUpgradePausedByOperatorReason, "spec.paused"},
			}},
		{name: "soaking", scope: scope{soaking: plan.CanaryStage, soakUntil: now.Add(time.Hour), clusters: []*clusterScope{
			cluster("f/a", plan.CanaryStage, fleetv1.ClusterUpgradePhaseSucceeded),
			cluster("f/b", plan.RemainingStage, fleetv1.ClusterUpgradePhasePending),
		}}, phase: fleetv1.FleetUpgradePhaseSoaking,
			want: map[string]want{
				fleetv1.FleetUpgradeProgressingCondition: {metav1.ConditionTrue, fleetv1.FleetUpgradeSoakingReason, "canary soaks until 2026-05-01T13:00:00Z"},
			}},
		{name: "succeeded", scope: scope{clusters: []*clusterScope{
			cluster("f/a", plan.RemainingStage, fleetv1.ClusterUpgradePhaseSucceeded),
			cluster("f/b", "", fleetv1.ClusterUpgradePhaseSkipped),
		}}, phase: fleetv1.FleetUpgradePhaseSucceeded,
			want: map[string]want{
				fleetv1.FleetUpgradeReadyCondition:       {metav1.ConditionTrue, fleetv1.FleetUpgradeSucceededReason, "1 of 1 clusters upgraded to v1.37.2 (1 skipped)"},
				fleetv1.FleetUpgradeProgressingCondition: {metav1.ConditionFalse, fleetv1.FleetUpgradeSucceededReason, ""},
			}},
		{name: "aborted", spec: fleetv1.FleetUpgradeSpec{Abort: true}, scope: scope{clusters: []*clusterScope{
			cluster("f/a", plan.RemainingStage, fleetv1.ClusterUpgradePhaseAborted),
		}}, phase: fleetv1.FleetUpgradePhaseAborted,
			want: map[string]want{
				fleetv1.FleetUpgradeReadyCondition: {metav1.ConditionFalse, fleetv1.FleetUpgradeAbortedReason, "aborted"},
			}},
		{name: "a failed cluster stops the rollout", scope: scope{clusters: []*clusterScope{
			cluster("f/a", plan.CanaryStage, fleetv1.ClusterUpgradePhaseFailed, func(cs *clusterScope) { cs.waiting = "Cluster f/a does not exist any more" }),
			cluster("f/b", plan.RemainingStage, fleetv1.ClusterUpgradePhasePending),
		}}, phase: fleetv1.FleetUpgradePhaseFailed,
			want: map[string]want{
				fleetv1.FleetUpgradeReadyCondition: {metav1.ConditionFalse, fleetv1.FleetUpgradeFailedReason, "failed: f/a"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.scope
			s.fu = &fleetv1.FleetUpgrade{Spec: tc.spec}
			s.now, s.target = now, "v1.37.2"
			setConditions(&s)
			if s.fu.Status.Phase != tc.phase {
				t.Errorf("phase %s, want %s", s.fu.Status.Phase, tc.phase)
			}
			for typ, w := range tc.want {
				c := meta.FindStatusCondition(s.fu.Status.Conditions, typ)
				if c == nil || c.Status != w.status || c.Reason != w.reason || !strings.Contains(c.Message, w.message) {
					t.Errorf("%s = %+v, want %s/%s with %q", typ, c, w.status, w.reason, w.message)
				}
			}
		})
	}
}
