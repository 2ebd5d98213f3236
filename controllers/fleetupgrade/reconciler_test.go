package fleetupgrade_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

func newUpgrade(name, target, selectorValue string, mut ...func(*fleetv1.FleetUpgradeSpec)) *fleetv1.FleetUpgrade {
	fu := &fleetv1.FleetUpgrade{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: fleetv1.FleetUpgradeSpec{
			TargetVersion:   target,
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"fleet": selectorValue}},
			SoakTime:        &metav1.Duration{},
		},
	}
	for _, m := range mut {
		m(&fu.Spec)
	}
	return fu
}

func (e *env) cluster(ns, name string) *clusterv1.Cluster {
	e.t.Helper()
	c := &clusterv1.Cluster{}
	e.get(c, ns, name)
	return c
}

func (e *env) machines(ns, kcp string) map[string]string {
	e.t.Helper()
	var list clusterv1.MachineList
	if err := e.c.List(e.ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: kcp}); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range list.Items {
		out[m.Name] = m.Spec.Version
	}
	return out
}

func clusterStatus(fu *fleetv1.FleetUpgrade, name string) *fleetv1.ClusterUpgradeStatus {
	for i := range fu.Status.Clusters {
		if fu.Status.Clusters[i].Name == name {
			return &fu.Status.Clusters[i]
		}
	}
	return nil
}

// TestRolloutVerifiesEveryMachine: a three-machine control plane at 1.36.3
// with MVP wired goes to 1.37.2; the simulated KubeadmControlPlane replaces
// one machine at a time; the controller verifies every apiserver directly
// after each replacement joined, and holds each machine the simulator
// marks for deletion (GateHook) until the verifier passed. It ends
// Succeeded with every machine at the target, one passed step and one
// verification per machine, one release per machine deleted, no hook
// left, and the run recorded.
func TestRolloutVerifiesEveryMachine(t *testing.T) {
	e := startEnv(t)
	sim := e.createCluster(fixture{ns: "fleet-a", name: "alpha", version: "v1.36.3", labels: map[string]string{"fleet": "a"}, extraArgs: wired})
	go sim.run(e.ctx)

	fu := newUpgrade("to-137", "v1.37.2", "a")
	if err := e.c.Create(e.ctx, fu); err != nil {
		t.Fatal(err)
	}
	got := e.waitPhase("to-137", fleetv1.FleetUpgradePhaseSucceeded)

	if ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradeReadyCondition); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v", ready)
	}
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
	}
	ms := e.machines("fleet-a", "alpha")
	want := map[string]string{"cp-4": "v1.37.2", "cp-5": "v1.37.2", "cp-6": "v1.37.2"}
	if !mapsEqual(ms, want) {
		t.Errorf("machines = %v, want %v", ms, want)
	}
	if d := sim.deletedMachines(); !slices.Equal(d, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Errorf("deleted = %v", d)
	}
	cs := clusterStatus(got, "fleet-a/alpha")
	if cs == nil || cs.Phase != fleetv1.ClusterUpgradePhaseSucceeded {
		t.Fatalf("cluster status = %+v", cs)
	}
	var stepMachines []string
	for _, st := range cs.Steps {
		stepMachines = append(stepMachines, st.Machine)
		if st.Verdict != fleetv1.StepVerdictPassed || st.NewVersion != "v1.37.2" || st.OldVersion != "v1.36.3" {
			t.Errorf("step %+v", st)
		}
	}
	if !slices.Equal(stepMachines, []string{"cp-4", "cp-5", "cp-6"}) {
		t.Errorf("steps cover %v", stepMachines)
	}
	c := e.cluster("fleet-a", "alpha")
	if ptr.Deref(c.Spec.Paused, false) || c.Annotations[fleetupgrade.PausedByAnnotation] != "" {
		t.Errorf("cluster left paused: paused=%v annotations=%v", c.Spec.Paused, c.Annotations)
	}

	// Records: one verification per machine (plus the one before the
	// bump, with no machine), one bump, the probes, the run's end.
	var verified []string
	for _, st := range e.records.stepsOf(fleetupgrade.StepKindVerify) {
		if st.Outcome != store.StepPassed {
			t.Errorf("verify step %+v", st)
		}
		if len(e.records.probesOf(st.ID)) == 0 {
			t.Errorf("verify step %s has no probes", st.ID)
		}
		if st.Machine != "" {
			verified = append(verified, st.Machine)
		}
	}
	if !slices.Equal(verified, []string{"cp-4", "cp-5", "cp-6"}) {
		t.Errorf("verify steps per machine = %v", verified)
	}
	if n := len(e.records.stepsOf(fleetupgrade.StepKindBump)); n != 1 {
		t.Errorf("%d bump steps", n)
	}
	if n := len(e.records.stepsOf(fleetupgrade.StepKindMachine)); n != 3 {
		t.Errorf("%d machine steps", n)
	}
	var released []string
	for _, st := range e.records.stepsOf(fleetupgrade.StepKindRelease) {
		released = append(released, st.Machine)
	}
	if !slices.Equal(released, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Errorf("release steps = %v, want one per machine deleted", released)
	}
	for _, name := range []string{"cp-4", "cp-5", "cp-6"} {
		m := &clusterv1.Machine{}
		if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: "fleet-a", Name: name}, m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m.Annotations[fleetupgrade.GateHook]; ok {
			t.Errorf("machine %s keeps the gate's hook after the upgrade", name)
		}
	}
	if st := e.records.runState(string(got.UID)); st != store.UpgradeSucceeded {
		t.Errorf("run state %q", st)
	}

	// The verifier was pointed at each machine directly, with the
	// kubeconfig's credentials.
	last := e.verifier.lastCall()
	var hosts []string
	for _, tg := range last {
		hosts = append(hosts, tg.Name+"="+tg.Config.Host)
		if tg.Config.BearerToken != "admin-token" || tg.Config.TLSClientConfig.ServerName != "kubernetes.default.svc" {
			t.Errorf("target %s: token %q, server name %q", tg.Name, tg.Config.BearerToken, tg.Config.TLSClientConfig.ServerName)
		}
	}
	if want := []string{"cp-4=https://10.0.0.4:6443", "cp-5=https://10.0.0.5:6443", "cp-6=https://10.0.0.6:6443"}; !slices.Equal(hosts, want) {
		t.Errorf("last verification's targets = %v, want %v", hosts, want)
	}
}

// TestGateFailurePausesBeforeTheNextMachine: the verifier finds a spurious
// 404 on cp-2 once the first replacement joined. The machine
// KubeadmControlPlane marks for deletion next stays (its GateHook is kept,
// the Cluster is not paused), the FleetUpgrade
// says why (Paused/GateFailed, Verified/Spurious404 with the evidence, an
// Event, a failed verify step with its probes), the verifier keeps
// retrying without letting the rollout go, and once it turns green the
// rollout continues to the end.
func TestGateFailurePausesBeforeTheNextMachine(t *testing.T) {
	e := startEnv(t)
	sim := e.createCluster(fixture{ns: "fleet-b", name: "bravo", version: "v1.36.3", labels: map[string]string{"fleet": "b"}, extraArgs: wired})
	go sim.run(e.ctx)
	e.verifier.script(spurious404OnCP2AfterFirstMachine)

	if err := e.c.Create(e.ctx, newUpgrade("gated", "v1.37.2", "b")); err != nil {
		t.Fatal(err)
	}
	e.waitCondition("gated", fleetv1.FleetUpgradePausedCondition, metav1.ConditionTrue, fleetv1.FleetUpgradeGateFailedReason)
	got := e.waitCondition("gated", fleetv1.FleetUpgradeVerifiedCondition, metav1.ConditionFalse, fleetv1.FleetUpgradeSpurious404Reason)
	verified := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradeVerifiedCondition)
	for _, want := range []string{"fleet-b/bravo", "apiserver cp-2", "list resource.k8s.io/v1 devicetaintrules", "404", "could not find the requested resource"} {
		if !strings.Contains(verified.Message, want) {
			t.Errorf("Verified message %q lacks %q", verified.Message, want)
		}
	}
	if got.Status.Phase != fleetv1.FleetUpgradePhasePaused {
		t.Errorf("phase %s", got.Status.Phase)
	}
	cs := clusterStatus(got, "fleet-b/bravo")
	if cs.Phase != fleetv1.ClusterUpgradePhasePaused || len(cs.Steps) != 1 || cs.Steps[0].Machine != "cp-4" ||
		cs.Steps[0].Verdict != fleetv1.StepVerdictFailed || !strings.Contains(cs.Steps[0].Message, "cp-2") {
		t.Errorf("cluster status: phase %s, steps %+v", cs.Phase, cs.Steps)
	}

	// The verifier runs again and fails again; meanwhile nothing moves,
	// for longer than the simulator waits between two machines (six
	// retries at 500ms > its 2s settle time).
	calls := e.verifier.callCount()
	platformtest.Eventually(t, waitTimeout, "six more failed verifications", func(context.Context) error {
		if n := e.verifier.callCount() - calls; n < 6 {
			return fmt.Errorf("%d more", n)
		}
		return nil
	})
	if c := e.cluster("fleet-b", "bravo"); ptr.Deref(c.Spec.Paused, false) {
		t.Errorf("the gate paused the Cluster (annotations %v): the deletion hook holds the machine instead", c.Annotations)
	}
	platformtest.Eventually(t, waitTimeout, "cp-2 marked for deletion and held by the gate's hook", func(ctx context.Context) error {
		held := &clusterv1.Machine{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: "fleet-b", Name: "cp-2"}, held); err != nil {
			return err
		}
		if held.DeletionTimestamp.IsZero() || held.Annotations[fleetupgrade.GateHook] != "gated" {
			return fmt.Errorf("deleting %v, annotations %v", !held.DeletionTimestamp.IsZero(), held.Annotations)
		}
		return nil
	})
	// The simulated KubeadmControlPlane marked cp-2 for deletion at its
	// own pace; the hook keeps it (still listed below) until the gate
	// passes.
	if d := sim.deletedMachines(); !slices.Equal(d, []string{"cp-1", "cp-2"}) {
		t.Fatalf("marked for deletion = %v, want cp-1, then cp-2", d)
	}
	ms := e.machines("fleet-b", "bravo")
	if !mapsEqual(ms, map[string]string{"cp-2": "v1.36.3", "cp-3": "v1.36.3", "cp-4": "v1.37.2"}) {
		t.Errorf("machines = %v", ms)
	}
	var failed []store.UpgradeStep
	for _, st := range e.records.stepsOf(fleetupgrade.StepKindVerify) {
		if st.Outcome == store.StepFailed {
			failed = append(failed, st)
		}
	}
	if len(failed) == 0 || failed[0].Machine != "cp-4" || !strings.Contains(failed[0].Message, "cp-2") {
		t.Errorf("failed verify steps = %+v", failed)
	} else {
		var sawOutcome bool
		for _, p := range e.records.probesOf(failed[0].ID) {
			sawOutcome = sawOutcome || (p.APIServer == "cp-2" && p.Status == 404 && p.Outcome == "Spurious404")
		}
		if !sawOutcome {
			t.Errorf("the failed step's probes lack cp-2's 404: %+v", e.records.probesOf(failed[0].ID))
		}
	}
	if st := e.records.runState(string(got.UID)); st != store.UpgradePaused {
		t.Errorf("run state %q", st)
	}
	e.waitEvent("gated", fleetv1.FleetUpgradeGateFailedReason, "cp-2")

	// Green: the rollout resumes and finishes.
	e.verifier.script(nil)
	got = e.waitPhase("gated", fleetv1.FleetUpgradePhaseSucceeded)
	if d := sim.deletedMachines(); !slices.Equal(d, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Errorf("deleted = %v", d)
	}
	cs = clusterStatus(got, "fleet-b/bravo")
	for _, st := range cs.Steps {
		if st.Verdict != fleetv1.StepVerdictPassed {
			t.Errorf("step %+v", st)
		}
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradeVerifiedCondition); c.Status != metav1.ConditionTrue {
		t.Errorf("Verified = %+v", c)
	}
	if c := e.cluster("fleet-b", "bravo"); ptr.Deref(c.Spec.Paused, false) {
		t.Error("cluster left paused")
	}
}

// TestAbortLeavesThePausedClusterAndTheRestAlone: the canary is held by the
// gate; spec.abort ends the FleetUpgrade (Aborted), leaves the canary's
// Cluster paused mid-rollout, never starts the second cluster, and deleting
// the aborted FleetUpgrade does not unpause anything.
func TestAbortLeavesThePausedClusterAndTheRestAlone(t *testing.T) {
	e := startEnv(t)
	sim := e.createCluster(fixture{ns: "fleet-c", name: "canary", version: "v1.36.3", labels: map[string]string{"fleet": "c"}, extraArgs: wired})
	e.createCluster(fixture{ns: "fleet-c2", name: "later", version: "v1.36.3", labels: map[string]string{"fleet": "c"}, extraArgs: wired})
	go sim.run(e.ctx)
	e.verifier.script(spurious404OnCP2AfterFirstMachine)

	fu := newUpgrade("aborted", "v1.37.2", "c", func(s *fleetv1.FleetUpgradeSpec) {
		s.CanaryCluster = &fleetv1.ClusterReference{Namespace: "fleet-c", Name: "canary"}
	})
	if err := e.c.Create(e.ctx, fu); err != nil {
		t.Fatal(err)
	}
	e.waitCondition("aborted", fleetv1.FleetUpgradePausedCondition, metav1.ConditionTrue, fleetv1.FleetUpgradeGateFailedReason)

	// The controller writes the status all along: read and write again
	// on a conflict, as the API's abort does.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fu = e.upgrade("aborted")
		fu.Spec.Abort = true
		return e.c.Update(e.ctx, fu)
	}); err != nil {
		t.Fatal(err)
	}
	got := e.waitPhase("aborted", fleetv1.FleetUpgradePhaseAborted)
	platformtest.Eventually(t, waitTimeout, "observedGeneration", func(context.Context) error {
		got = e.upgrade("aborted")
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("observed generation %d, the FleetUpgrade is at %d", got.Status.ObservedGeneration, got.Generation)
		}
		return nil
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradeReadyCondition); c.Reason != fleetv1.FleetUpgradeAbortedReason {
		t.Errorf("Ready = %+v", c)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePausedCondition); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "fleet-c/canary") {
		t.Errorf("Paused = %+v", c)
	}
	for name, want := range map[string]fleetv1.ClusterUpgradePhase{"fleet-c/canary": fleetv1.ClusterUpgradePhaseAborted, "fleet-c2/later": fleetv1.ClusterUpgradePhaseAborted} {
		if cs := clusterStatus(got, name); cs == nil || cs.Phase != want {
			t.Errorf("%s: %+v", name, cs)
		}
	}
	later := &controlplanev1.KubeadmControlPlane{}
	e.get(later, "fleet-c2", "later")
	if later.Spec.Version != "v1.36.3" {
		t.Errorf("the cluster after the canary was bumped to %s", later.Spec.Version)
	}
	if !ptr.Deref(e.cluster("fleet-c", "canary").Spec.Paused, false) {
		t.Error("the canary was unpaused by the abort")
	}
	if d := sim.deletedMachines(); !slices.Equal(d, []string{"cp-1"}) {
		t.Errorf("deleted = %v", d)
	}
	if st := e.records.runState(string(got.UID)); st != store.UpgradeAborted {
		t.Errorf("run state %q", st)
	}

	// Deleting the aborted FleetUpgrade does not take the abort back.
	if err := e.c.Delete(e.ctx, got); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, waitTimeout, "the FleetUpgrade gone", func(ctx context.Context) error {
		fu := &fleetv1.FleetUpgrade{}
		if err := e.c.Get(ctx, client.ObjectKey{Name: "aborted"}, fu); err == nil {
			return fmt.Errorf("still there, phase %s, finalizers %v", fu.Status.Phase, fu.Finalizers)
		}
		return nil
	})
	if !ptr.Deref(e.cluster("fleet-c", "canary").Spec.Paused, false) {
		t.Error("deleting the aborted FleetUpgrade unpaused the canary")
	}
}

// TestPreflightRefusesUnwiredThenWiresMVP: a 1.35 control plane without
// the MVP flags (the gate is alpha and off there) is refused with
// PreflightPassed/MVPNotWired naming --peer-ca-file, the feature gate and
// spec.wireMVP, and nothing is touched. With spec.wireMVP the controller
// writes the extraArgs first, waits for that rollout (still 1.35), and only
// then bumps the version.
func TestPreflightRefusesUnwiredThenWiresMVP(t *testing.T) {
	e := startEnv(t)
	sim := e.createCluster(fixture{ns: "fleet-d", name: "delta", version: "v1.35.4", labels: map[string]string{"fleet": "d"}})
	go sim.run(e.ctx)

	if err := e.c.Create(e.ctx, newUpgrade("wire", "v1.36.3", "d")); err != nil {
		t.Fatal(err)
	}
	got := e.waitCondition("wire", fleetv1.FleetUpgradePreflightPassedCondition, metav1.ConditionFalse, fleetv1.FleetUpgradeMVPNotWiredReason)
	c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePreflightPassedCondition)
	for _, want := range []string{"fleet-d/delta", "--peer-ca-file", "/etc/kubernetes/pki/ca.crt", "UnknownVersionInteroperabilityProxy", "spec.wireMVP: true"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("PreflightPassed message lacks %q: %s", want, c.Message)
		}
	}
	if cs := clusterStatus(got, "fleet-d/delta"); cs.Phase != fleetv1.ClusterUpgradePhasePreflight {
		t.Errorf("cluster phase %s", cs.Phase)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	e.get(kcp, "fleet-d", "delta")
	if kcp.Spec.Version != "v1.35.4" || len(kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs) != 0 {
		t.Errorf("refused control plane changed: %s %v", kcp.Spec.Version, kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs)
	}
	if d := sim.deletedMachines(); len(d) != 0 {
		t.Errorf("deleted %v", d)
	}

	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fu := e.upgrade("wire")
		fu.Spec.WireMVP = true
		return e.c.Update(e.ctx, fu)
	}); err != nil {
		t.Fatal(err)
	}
	got = e.waitPhase("wire", fleetv1.FleetUpgradePhaseSucceeded)

	e.get(kcp, "fleet-d", "delta")
	args := map[string]string{}
	for _, a := range kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs {
		args[a.Name] = ptr.Deref(a.Value, "")
	}
	if args["peer-ca-file"] != "/etc/kubernetes/pki/ca.crt" || !strings.Contains(args["feature-gates"], "UnknownVersionInteroperabilityProxy=true") {
		t.Errorf("extraArgs = %v", args)
	}
	// The wiring rollout (1.35.4, new flags) came first, the version
	// rollout after it.
	var order []string
	for _, m := range sim.createdMachines() {
		wiredM := strings.Contains(m.config, "peer-ca-file")
		order = append(order, m.name+"@"+m.version+map[bool]string{true: "+mvp", false: ""}[wiredM])
	}
	want := []string{"cp-4@v1.35.4+mvp", "cp-5@v1.35.4+mvp", "cp-6@v1.35.4+mvp", "cp-7@v1.36.3+mvp", "cp-8@v1.36.3+mvp", "cp-9@v1.36.3+mvp"}
	if !slices.Equal(order, want) {
		t.Errorf("replacements = %v, want %v", order, want)
	}
	var kinds []string
	for _, k := range e.records.kinds() {
		if k == fleetupgrade.StepKindWireMVP || k == fleetupgrade.StepKindBump {
			kinds = append(kinds, k)
		}
	}
	if !slices.Equal(kinds, []string{fleetupgrade.StepKindWireMVP, fleetupgrade.StepKindBump}) {
		t.Errorf("recorded %v", kinds)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePreflightPassedCondition); c.Status != metav1.ConditionTrue {
		t.Errorf("PreflightPassed = %+v", c)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
