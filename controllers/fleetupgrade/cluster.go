package fleetupgrade

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/store"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/preflight"
)

// Kinds of the recorded steps.
const (
	StepKindPreflight = "preflight"
	StepKindWireMVP   = "wire-mvp"
	StepKindBump      = "bump"
	StepKindMachine   = "machine"
	StepKindVerify    = "verify"
	// StepKindLBHandoff is a server leaving or joining the cluster's API
	// load balancer (the Hetzner hand-off), or a failed attempt.
	StepKindLBHandoff = "lb-handoff"
)

// observe reads the cluster's Cluster, KubeadmControlPlane and
// control-plane Machines. A Cluster or control plane that is gone fails the
// cluster (found false).
func (r *Reconciler) observe(ctx context.Context, s *scope, cs *clusterScope) (found bool, err error) {
	cs.cluster, cs.kcp, cs.machines = &clusterv1.Cluster{}, nil, nil
	if err := r.Client.Get(ctx, cs.key, cs.cluster); err != nil {
		if apierrors.IsNotFound(err) {
			r.failCluster(s, cs, fmt.Sprintf("Cluster %s does not exist any more", cs.key))
			return false, nil
		}
		return false, fmt.Errorf("reading cluster %s: %w", cs.key, err)
	}
	ref := cs.cluster.Spec.ControlPlaneRef
	if ref.Kind != "KubeadmControlPlane" || ref.Name == "" {
		r.failCluster(s, cs, fmt.Sprintf("Cluster %s has no KubeadmControlPlane any more", cs.key))
		return false, nil
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cs.key.Namespace, Name: ref.Name}, kcp); err != nil {
		if apierrors.IsNotFound(err) {
			r.failCluster(s, cs, fmt.Sprintf("KubeadmControlPlane %s/%s does not exist any more", cs.key.Namespace, ref.Name))
			return false, nil
		}
		return false, fmt.Errorf("reading control plane of %s: %w", cs.key, err)
	}
	cs.kcp = kcp
	var machines clusterv1.MachineList
	if err := r.Client.List(ctx, &machines, client.InNamespace(cs.key.Namespace),
		client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: kcp.Name}); err != nil {
		return false, fmt.Errorf("listing machines of %s: %w", cs.key, err)
	}
	cs.machines = machines.Items
	sort.Slice(cs.machines, func(i, j int) bool {
		a, b := cs.machines[i], cs.machines[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return true, nil
}

func (r *Reconciler) failCluster(s *scope, cs *clusterScope, msg string) {
	cs.status.Phase = fleetv1.ClusterUpgradePhaseFailed
	cs.waiting = msg
	if cs.status.FinishedAt == nil {
		cs.status.FinishedAt = s.nowTime()
	}
}

// advance moves one started cluster on by one step.
func (r *Reconciler) advance(ctx context.Context, s *scope, cs *clusterScope) error {
	found, err := r.observe(ctx, s, cs)
	if err != nil || !found {
		return err
	}
	// Every control-plane Machine carries the hand-off hook before
	// KubeadmControlPlane may delete one: the hooks are written before
	// the wiring or the version bump below start a rollout.
	if err := r.handoff(ctx, s, cs, true); err != nil {
		return err
	}
	// So does the gate's hook: from here on no Machine goes before its
	// gate passed.
	if err := r.ensureGateHooks(ctx, s, cs); err != nil {
		return err
	}
	if !sameVersion(cs.kcp.Spec.Version, s.target) {
		return r.beforeBump(ctx, s, cs)
	}
	return r.rolling(ctx, s, cs)
}

// beforeBump runs preflight, wires MVP when asked, waits for the control
// plane to settle, verifies it and bumps the version.
func (r *Reconciler) beforeBump(ctx context.Context, s *scope, cs *clusterScope) error {
	if cs.status.Phase != fleetv1.ClusterUpgradePhaseWiringMVP {
		cs.status.Phase = fleetv1.ClusterUpgradePhasePreflight
	}
	s.requeueAfter(s.opts.PollInterval)
	// A rollout before the bump (the MVP wiring) is gated too.
	if ok, err := r.releaseDeletions(ctx, s, cs, false); err != nil || !ok {
		return err
	}
	findings := preflight.Run(ctx, preflight.Input{Cluster: cs.cluster, ControlPlane: cs.kcp, Machines: cs.machines,
		LoadBalancerHandoff: cs.handsOff()}, r.Capacity)
	cs.preflightRan = true
	for _, f := range findings {
		if f.Severity == preflight.Warning {
			cs.warnings = append(cs.warnings, f)
		}
	}
	blockers := preflight.Blockers(findings)
	if len(blockers) > 0 && preflight.OnlyWireMVPBlockers(findings) && s.fu.Spec.WireMVP && !s.fu.Spec.Paused {
		if cs.handoffFailed != "" {
			cs.waiting = "the load-balancer hand-off fails; the MVP wiring waits for it"
			return nil
		}
		return r.wireMVP(ctx, s, cs)
	}
	cs.blockers = blockers
	if err := r.recordPreflight(ctx, s, cs); err != nil {
		return err
	}
	if len(blockers) > 0 {
		cs.waiting = "preflight found what must be fixed first (see PreflightPassed)"
		return nil
	}
	if !settled(cs.kcp, cs.machines, cs.kcp.Spec.Version) {
		cs.waiting = "waiting for the control plane's rollout to finish before the version bump: " + rolloutSummary(cs.kcp, cs.machines)
		return nil
	}
	if s.fu.Spec.Paused {
		cs.heldForOperator = true
		cs.status.Phase = fleetv1.ClusterUpgradePhasePaused
		cs.waiting = "spec.paused holds the cluster before its version bump"
		return nil
	}
	if cs.handoffFailed != "" {
		cs.waiting = "the load-balancer hand-off fails; the version bump waits for it"
		return nil
	}
	if s.gateOn() {
		ok, err := r.gate(ctx, s, cs, nil)
		if err != nil || !ok {
			return err
		}
	}
	return r.bump(ctx, s, cs)
}

func (r *Reconciler) wireMVP(ctx context.Context, s *scope, cs *clusterScope) error {
	current, _, err := plan.CurrentVersion(cs.kcp)
	if err != nil {
		return fmt.Errorf("reading the version of %s: %w", cs.key, err)
	}
	ver := "v" + current.String()
	base := cs.kcp.DeepCopy()
	cs.kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs = preflight.WireMVPPatch(cs.kcp, ver, cs.handsOff())
	if err := r.Client.Patch(ctx, cs.kcp, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("wiring MVP on %s: %w", cs.key, err)
	}
	logf.FromContext(ctx).Info("Wired MVP", "cluster", cs.key, "version", ver)
	cs.status.Phase = fleetv1.ClusterUpgradePhaseWiringMVP
	cs.waiting = "the Mixed Version Proxy flags were written to the KubeadmControlPlane; waiting for that rollout before the version bump"
	r.event(s, corev1.EventTypeNormal, "WiringMVP", "WireMVP", "Cluster %s: wrote the Mixed Version Proxy flags to KubeadmControlPlane %s at %s; the control plane rolls before the version bump", cs.key, cs.kcp.Name, ver)
	return r.record(ctx, s, store.NewUpgradeStep{Cluster: cs.status.Name, Kind: StepKindWireMVP, FromVersion: ver, ToVersion: ver},
		store.StepPassed, "wrote apiServer extraArgs: "+argNames(cs.kcp), nil)
}

func (r *Reconciler) bump(ctx context.Context, s *scope, cs *clusterScope) error {
	from := cs.kcp.Spec.Version
	base := cs.kcp.DeepCopy()
	cs.kcp.Spec.Version = s.target
	if err := r.Client.Patch(ctx, cs.kcp, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("bumping the version of %s: %w", cs.key, err)
	}
	logf.FromContext(ctx).Info("Bumped control plane version", "cluster", cs.key, "from", from, "to", s.target)
	cs.status.Phase = fleetv1.ClusterUpgradePhaseUpgrading
	cs.waiting = "KubeadmControlPlane is replacing its machines with " + s.target
	r.event(s, corev1.EventTypeNormal, "VersionBumped", "Bump", "Cluster %s: KubeadmControlPlane %s bumped from %s to %s", cs.key, cs.kcp.Name, from, s.target)
	return r.record(ctx, s, store.NewUpgradeStep{Cluster: cs.status.Name, Kind: StepKindBump, FromVersion: from, ToVersion: s.target},
		store.StepPassed, "spec.version set to "+s.target, nil)
}

// rolling gates a cluster whose KubeadmControlPlane runs the target
// version: every machine that joined is verified with the whole plane, and
// every machine KubeadmControlPlane marks for deletion stays (GateHook)
// until the verifier passed on every apiserver.
func (r *Reconciler) rolling(ctx context.Context, s *scope, cs *clusterScope) error {
	cs.status.Phase = fleetv1.ClusterUpgradePhaseUpgrading
	s.requeueAfter(s.opts.PollInterval)
	fresh, outdated := r.newMachines(s, cs)
	verified := false
	if len(fresh) > 0 {
		if err := r.addSteps(ctx, s, cs, fresh); err != nil {
			return err
		}
		// The new servers join the load balancer before the verifier
		// lets the rollout go on; until they are in, the gate holds the
		// next machine KubeadmControlPlane marks for deletion.
		ok, err := r.addServers(ctx, s, cs, fresh)
		if err != nil {
			return err
		}
		if !ok {
			cs.status.Phase = fleetv1.ClusterUpgradePhasePaused
			cs.waiting = "waiting for " + strings.Join(fresh, ", ") + " to join the load balancer"
			return nil
		}
		verdict := "not verified: gates.mvpVerified is false"
		if s.gateOn() {
			ok, err := r.gate(ctx, s, cs, fresh)
			if err != nil || !ok {
				return err
			}
			verified = true
			verdict = cs.status.LastVerification.Message
		}
		for i := range cs.status.Steps {
			st := &cs.status.Steps[i]
			if contains(fresh, st.Machine) {
				st.Verdict, st.Message, st.FinishedAt = fleetv1.StepVerdictPassed, verdict, s.nowTime()
			}
		}
	}
	if ok, err := r.releaseDeletions(ctx, s, cs, verified); err != nil || !ok {
		return err
	}
	if outdated == 0 && settled(cs.kcp, cs.machines, s.target) {
		if err := r.unpauseCluster(ctx, s.fu, cs.cluster); err != nil {
			return err
		}
		// Done: the Machines go back to Cluster API without the hooks.
		if err := r.releaseHooks(ctx, cs, false); err != nil {
			return err
		}
		if err := r.releaseGateHooks(ctx, s, cs); err != nil {
			return err
		}
		if done, err := r.workers(ctx, s, cs); err != nil || !done {
			return err
		}
		cs.status.Phase = fleetv1.ClusterUpgradePhaseSucceeded
		cs.status.FinishedAt = s.nowTime()
		cs.waiting = "every machine runs " + s.target + ": the control plane's passed verification"
		r.event(s, corev1.EventTypeNormal, "ClusterUpgraded", "Upgrade", "Cluster %s runs %s", cs.key, s.target)
		return nil
	}
	if s.fu.Spec.Paused {
		cs.heldForOperator = true
		cs.status.Phase = fleetv1.ClusterUpgradePhasePaused
		cs.waiting = "spec.paused: the next machine KubeadmControlPlane marks for deletion stays until the FleetUpgrade is resumed"
		return nil
	}
	// A Cluster paused by this FleetUpgrade before the gate moved to the
	// deletion hook is handed back.
	if err := r.unpauseCluster(ctx, s.fu, cs.cluster); err != nil {
		return err
	}
	if clusterPaused(cs.cluster) {
		cs.pausedElsewhere = true
		cs.waiting = "the Cluster is paused outside this FleetUpgrade (spec.paused or the cluster.x-k8s.io/paused annotation): unpause it to go on"
		return nil
	}
	cs.waiting = "KubeadmControlPlane is replacing machines: " + rolloutSummary(cs.kcp, cs.machines)
	return nil
}

// workers bumps the cluster's MachineDeployments to the target once its
// control plane runs it, one at a time and in name order, as Cluster API's
// topology controller does: the control plane first, since a kubelet may
// be older than its apiserver but never newer. Each MachineDeployment
// replaces its machines with its own rollout strategy; the next is bumped
// once every replica is up to date and available. It returns true when
// every MachineDeployment runs the target. spec.paused holds the next
// bump, not a rollout under way.
func (r *Reconciler) workers(ctx context.Context, s *scope, cs *clusterScope) (bool, error) {
	var list clusterv1.MachineDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(cs.key.Namespace)); err != nil {
		return false, fmt.Errorf("listing the MachineDeployments of %s: %w", cs.key, err)
	}
	mds := slices.DeleteFunc(list.Items, func(md clusterv1.MachineDeployment) bool { return md.Spec.ClusterName != cs.cluster.Name })
	slices.SortFunc(mds, func(a, b clusterv1.MachineDeployment) int { return strings.Compare(a.Name, b.Name) })
	for i := range mds {
		md := &mds[i]
		if !sameVersion(md.Spec.Template.Spec.Version, s.target) {
			if s.fu.Spec.Paused {
				cs.heldForOperator = true
				cs.status.Phase = fleetv1.ClusterUpgradePhasePaused
				cs.waiting = "spec.paused holds MachineDeployment " + md.Name + " before its version bump"
				return false, nil
			}
			s.requeueAfter(s.opts.PollInterval)
			return false, r.bumpWorkers(ctx, s, cs, md)
		}
		if want, ok := workersRolledOut(md); !ok {
			s.requeueAfter(s.opts.PollInterval)
			cs.waiting = fmt.Sprintf("MachineDeployment %s is replacing its workers with %s: %d of %d up to date, %d available",
				md.Name, s.target, ptr.Deref(md.Status.UpToDateReplicas, 0), want, ptr.Deref(md.Status.AvailableReplicas, 0))
			return false, nil
		}
	}
	return true, nil
}

// bumpWorkers sets md's machines' version to the target.
func (r *Reconciler) bumpWorkers(ctx context.Context, s *scope, cs *clusterScope, md *clusterv1.MachineDeployment) error {
	from := md.Spec.Template.Spec.Version
	base := md.DeepCopy()
	md.Spec.Template.Spec.Version = s.target
	if err := r.Client.Patch(ctx, md, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("bumping the version of MachineDeployment %s/%s: %w", md.Namespace, md.Name, err)
	}
	logf.FromContext(ctx).Info("Bumped workers' version", "cluster", cs.key, "machineDeployment", md.Name, "from", from, "to", s.target)
	cs.waiting = "MachineDeployment " + md.Name + " is replacing its workers with " + s.target
	r.event(s, corev1.EventTypeNormal, "WorkersBumped", "Bump", "Cluster %s: MachineDeployment %s bumped from %s to %s", cs.key, md.Name, from, s.target)
	return r.record(ctx, s, store.NewUpgradeStep{Cluster: cs.status.Name, Kind: StepKindBump, FromVersion: from, ToVersion: s.target},
		store.StepPassed, "MachineDeployment "+md.Name+": spec.template.spec.version set to "+s.target, nil)
}

// workersRolledOut returns how many replicas md wants, and whether its
// controller saw its last change and every one of them is up to date and
// available.
func workersRolledOut(md *clusterv1.MachineDeployment) (int32, bool) {
	want := ptr.Deref(md.Spec.Replicas, 1)
	return want, md.Status.ObservedGeneration >= md.Generation &&
		ptr.Deref(md.Status.Replicas, 0) == want &&
		ptr.Deref(md.Status.UpToDateReplicas, 0) == want &&
		ptr.Deref(md.Status.AvailableReplicas, 0) == want
}

// newMachines returns the up-to-date machines whose apiserver is ready and
// that no passed step covers, and the number of machines not at target.
func (r *Reconciler) newMachines(s *scope, cs *clusterScope) (fresh []string, outdated int) {
	passed := map[string]bool{}
	for _, st := range cs.status.Steps {
		if st.Verdict == fleetv1.StepVerdictPassed {
			passed[st.Machine] = true
		}
	}
	for i := range cs.machines {
		m := &cs.machines[i]
		if !sameVersion(m.Spec.Version, s.target) {
			outdated++
			continue
		}
		if apiServerReady(m) && !passed[m.Name] {
			fresh = append(fresh, m.Name)
		}
	}
	return fresh, outdated
}

// addSteps adds a step for each new machine, with the machine it most
// likely replaced (the oldest outdated one gone), and records it.
func (r *Reconciler) addSteps(ctx context.Context, s *scope, cs *clusterScope, fresh []string) error {
	for _, name := range fresh {
		if stepIndex(cs.status, name) >= 0 {
			continue
		}
		var m *clusterv1.Machine
		for i := range cs.machines {
			if cs.machines[i].Name == name {
				m = &cs.machines[i]
			}
		}
		started := m.CreationTimestamp
		cs.status.Steps = append(cs.status.Steps, fleetv1.UpgradeStep{
			Machine: name, OldVersion: cs.status.FromVersion, NewVersion: m.Spec.Version,
			StartedAt: &started, Verdict: fleetv1.StepVerdictRunning,
		})
		if err := r.record(ctx, s, store.NewUpgradeStep{Cluster: cs.status.Name, Kind: StepKindMachine, Machine: name,
			FromVersion: cs.status.FromVersion, ToVersion: m.Spec.Version},
			store.StepPassed, fmt.Sprintf("machine %s joined with %s", name, m.Spec.Version), nil); err != nil {
			return err
		}
	}
	return nil
}

// gate runs the verifier on every apiserver of the cluster, unless the last
// verification failed less than VerifyRetryInterval ago. It returns true
// when the verification passed; a failure marks the fresh machines' steps
// Failed and leaves the Cluster paused.
func (r *Reconciler) gate(ctx context.Context, s *scope, cs *clusterScope, fresh []string) (bool, error) {
	if last := cs.status.LastVerification; last != nil && !last.Passed {
		if wait := last.Time.Add(s.opts.VerifyRetryInterval).Sub(s.now); wait > 0 {
			cs.gateFailed = true
			cs.status.Phase = pausedPhase(cs, fresh)
			cs.waiting = "the verifier failed; it runs again in " + wait.Round(1e9).String()
			s.requeueAfter(wait)
			return false, nil
		}
	}
	v, probes := r.verify(ctx, s, cs)
	cs.status.LastVerification = &v
	outcome := store.StepPassed
	if !v.Passed {
		outcome = store.StepFailed
	}
	if err := r.record(ctx, s, store.NewUpgradeStep{Cluster: cs.status.Name, Kind: StepKindVerify, Machine: strings.Join(fresh, ","),
		FromVersion: cs.status.FromVersion, ToVersion: s.target}, outcome, v.Message, probes); err != nil {
		return false, err
	}
	if v.Passed {
		return true, nil
	}
	cs.gateFailed = true
	cs.status.Phase = pausedPhase(cs, fresh)
	cs.waiting = "the verifier failed; it runs again in " + s.opts.VerifyRetryInterval.String()
	s.requeueAfter(s.opts.VerifyRetryInterval)
	for i := range cs.status.Steps {
		st := &cs.status.Steps[i]
		if contains(fresh, st.Machine) {
			st.Verdict, st.Message, st.FinishedAt = fleetv1.StepVerdictFailed, v.Message, s.nowTime()
		}
	}
	r.event(s, corev1.EventTypeWarning, fleetv1.FleetUpgradeGateFailedReason, "Verify", "Cluster %s paused: %s", cs.key, v.Message)
	return false, nil
}

// pausedPhase is a gated cluster's phase: Paused once its rollout runs (the
// Cluster is paused), Preflight or WiringMVP before the bump.
func pausedPhase(cs *clusterScope, fresh []string) fleetv1.ClusterUpgradePhase {
	if len(fresh) > 0 {
		return fleetv1.ClusterUpgradePhasePaused
	}
	return cs.status.Phase
}

// abortRollingCluster pauses a cluster whose rollout runs at the next
// machine boundary and marks it Aborted; a cluster that already finished
// is Succeeded. Either way the hand-off hook comes off its Machines.
func (r *Reconciler) abortRollingCluster(ctx context.Context, s *scope, cs *clusterScope) error {
	_, outdated := r.newMachines(s, cs)
	if outdated == 0 && settled(cs.kcp, cs.machines, s.target) {
		if err := r.releaseHooks(ctx, cs, false); err != nil {
			return err
		}
		if err := r.releaseGateHooks(ctx, s, cs); err != nil {
			return err
		}
		if done, err := r.workers(ctx, s, cs); err != nil || !done {
			return err
		}
		cs.status.Phase = fleetv1.ClusterUpgradePhaseSucceeded
		cs.status.FinishedAt = s.nowTime()
		return nil
	}
	if !clusterPaused(cs.cluster) {
		// A machine held by its gate is a boundary too: nothing is
		// being replaced.
		if len(heldMachines(cs)) == 0 && !atBoundary(cs.kcp, cs.machines) {
			cs.waiting = "aborting: the Cluster is paused once the machine being replaced has joined"
			s.requeueAfter(s.opts.PollInterval)
			return nil
		}
		if err := r.pauseCluster(ctx, s, cs); err != nil {
			return err
		}
	}
	// The hand-off and the gate end with the abort: the Machines the
	// operator lets KubeadmControlPlane replace later go without them.
	if err := r.releaseHooks(ctx, cs, false); err != nil {
		return err
	}
	if err := r.releaseGateHooks(ctx, s, cs); err != nil {
		return err
	}
	cs.status.Phase = fleetv1.ClusterUpgradePhaseAborted
	cs.waiting = fmt.Sprintf("aborted with the Cluster paused at %s: unpause it (spec.paused: false) to let KubeadmControlPlane finish rolling to %s", rolloutSummary(cs.kcp, cs.machines), s.target)
	if cs.status.FinishedAt == nil {
		cs.status.FinishedAt = s.nowTime()
	}
	return nil
}

// pauseCluster sets spec.paused on the Cluster and marks it as paused by
// this FleetUpgrade; a Cluster paused already is left as it is.
func (r *Reconciler) pauseCluster(ctx context.Context, s *scope, cs *clusterScope) error {
	c := cs.cluster
	if clusterPaused(c) {
		return nil
	}
	base := c.DeepCopy()
	c.Spec.Paused = ptr.To(true)
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[PausedByAnnotation] = s.fu.Name
	if err := r.Client.Patch(ctx, c, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("pausing cluster %s: %w", cs.key, err)
	}
	logf.FromContext(ctx).Info("Paused cluster", "cluster", cs.key)
	return nil
}

// unpauseCluster clears spec.paused on a Cluster this FleetUpgrade paused;
// any other Cluster is left alone.
func (r *Reconciler) unpauseCluster(ctx context.Context, fu *fleetv1.FleetUpgrade, c *clusterv1.Cluster) error {
	if c.Annotations[PausedByAnnotation] != fu.Name {
		return nil
	}
	base := c.DeepCopy()
	c.Spec.Paused = nil
	delete(c.Annotations, PausedByAnnotation)
	if err := r.Client.Patch(ctx, c, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("unpausing cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	logf.FromContext(ctx).Info("Unpaused cluster", "cluster", client.ObjectKeyFromObject(c))
	return nil
}

// clusterPaused reports whether Cluster API is paused on the Cluster.
func clusterPaused(c *clusterv1.Cluster) bool {
	if c.Spec.Paused != nil && *c.Spec.Paused {
		return true
	}
	_, ok := c.Annotations[clusterv1.PausedAnnotation]
	return ok
}

// apiServerReady reports whether a Machine's apiserver serves: it is not
// being deleted and KubeadmControlPlane reports its apiserver pod healthy.
func apiServerReady(m *clusterv1.Machine) bool {
	return m.DeletionTimestamp.IsZero() &&
		meta.IsStatusConditionTrue(m.Status.Conditions, controlplanev1.KubeadmControlPlaneMachineAPIServerPodHealthyCondition)
}

func replicas(kcp *controlplanev1.KubeadmControlPlane) int32 {
	if kcp.Spec.Replicas == nil {
		return 1
	}
	return *kcp.Spec.Replicas
}

// atBoundary reports whether the control plane is between two machine
// replacements: no machine is being deleted, none is missing, and every
// apiserver is ready.
func atBoundary(kcp *controlplanev1.KubeadmControlPlane, machines []clusterv1.Machine) bool {
	if int32(len(machines)) < replicas(kcp) {
		return false
	}
	for i := range machines {
		if !apiServerReady(&machines[i]) {
			return false
		}
	}
	return true
}

// settled reports whether the KubeadmControlPlane finished its rollout to
// ver: status observed the current spec, every replica is up to date and
// runs one version, and the machines are at a boundary.
func settled(kcp *controlplanev1.KubeadmControlPlane, machines []clusterv1.Machine, ver string) bool {
	st := kcp.Status
	want := replicas(kcp)
	if st.ObservedGeneration < kcp.Generation || ptr.Deref(st.Replicas, 0) != want || ptr.Deref(st.UpToDateReplicas, 0) != want {
		return false
	}
	if len(st.Versions) > 1 || (len(st.Versions) == 1 && !sameVersion(st.Versions[0].Version, ver)) {
		return false
	}
	return atBoundary(kcp, machines)
}

func rolloutSummary(kcp *controlplanev1.KubeadmControlPlane, machines []clusterv1.Machine) string {
	var vs []string
	for _, v := range kcp.Status.Versions {
		vs = append(vs, fmt.Sprintf("%d at %s", v.Replicas, v.Version))
	}
	return fmt.Sprintf("%d of %d replicas up to date, %d machines (%s)", ptr.Deref(kcp.Status.UpToDateReplicas, 0), replicas(kcp), len(machines), strings.Join(vs, ", "))
}

// sameVersion compares two Kubernetes versions, with or without "v".
func sameVersion(a, b string) bool {
	va, err1 := version.ParseSemantic(strings.TrimPrefix(a, "v"))
	vb, err2 := version.ParseSemantic(strings.TrimPrefix(b, "v"))
	if err1 != nil || err2 != nil {
		return strings.TrimPrefix(a, "v") == strings.TrimPrefix(b, "v")
	}
	return va.EqualTo(vb)
}

func argNames(kcp *controlplanev1.KubeadmControlPlane) string {
	var names []string
	for _, a := range kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs {
		names = append(names, a.Name+"="+ptr.Deref(a.Value, ""))
	}
	return strings.Join(names, " ")
}

func stepIndex(st *fleetv1.ClusterUpgradeStatus, machine string) int {
	for i := range st.Steps {
		if st.Steps[i].Machine == machine {
			return i
		}
	}
	return -1
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// finalClusterPhase reports whether a cluster's upgrade has ended.
func finalClusterPhase(p fleetv1.ClusterUpgradePhase) bool {
	switch p {
	case fleetv1.ClusterUpgradePhaseSucceeded, fleetv1.ClusterUpgradePhaseFailed,
		fleetv1.ClusterUpgradePhaseAborted, fleetv1.ClusterUpgradePhaseSkipped:
		return true
	}
	return false
}

// startedClusterPhase reports whether a cluster's upgrade has started: it
// its phase is set and neither Pending nor Skipped.
func startedClusterPhase(p fleetv1.ClusterUpgradePhase) bool {
	return p != "" && p != fleetv1.ClusterUpgradePhasePending && p != fleetv1.ClusterUpgradePhaseSkipped
}
