package fleetupgrade

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/store"
)

// GateHook is the Cluster API pre-drain deletion hook the controller puts
// on every control-plane Machine of a cluster it upgrades, before it wires
// MVP or bumps the version. Cluster API neither drains nor deletes a
// Machine that carries it. When KubeadmControlPlane marks one for deletion
// the controller verifies every apiserver of the plane, hands the machine
// off the load balancer (HandoffHook, where that applies), and only then
// removes GateHook from that one Machine. A paused or failing FleetUpgrade
// keeps it: no machine goes before its gate passed, however fast
// KubeadmControlPlane moves. Its value is the FleetUpgrade's name.
const GateHook = clusterv1.PreDrainDeleteHookAnnotationPrefix + "/bex-gate"

// StepKindRelease is a Machine KubeadmControlPlane chose for deletion,
// released to Cluster API once its gate passed.
const StepKindRelease = "release"

func gated(m *clusterv1.Machine) bool {
	_, ok := m.Annotations[GateHook]
	return ok
}

// ensureGateHooks puts GateHook on every control-plane Machine of the
// cluster that is not being deleted.
func (r *Reconciler) ensureGateHooks(ctx context.Context, s *scope, cs *clusterScope) error {
	for i := range cs.machines {
		m := &cs.machines[i]
		if m.DeletionTimestamp.IsZero() && !gated(m) {
			if err := r.setHook(ctx, m, GateHook, s.fu.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// heldMachines returns the Machines KubeadmControlPlane marked for
// deletion that GateHook still holds.
func heldMachines(cs *clusterScope) []*clusterv1.Machine {
	var out []*clusterv1.Machine
	for i := range cs.machines {
		if m := &cs.machines[i]; !m.DeletionTimestamp.IsZero() && gated(m) {
			out = append(out, m)
		}
	}
	return out
}

// releaseDeletions lets the Machines KubeadmControlPlane marked for
// deletion go, once their gate passed: the FleetUpgrade is not paused, no
// hand-off fails, and the verifier passed on every apiserver of the plane
// (in this reconcile when verified is true, else it runs now; with
// gates.mvpVerified false it is not run), and the FleetUpgrade was not
// paused while it ran. Each released Machine first
// leaves the load balancer (HandoffHook), then loses GateHook. It returns
// false while a Machine stays held, with cs.waiting saying why.
func (r *Reconciler) releaseDeletions(ctx context.Context, s *scope, cs *clusterScope, verified bool) (bool, error) {
	held := heldMachines(cs)
	if len(held) == 0 {
		return true, nil
	}
	names := machineNames(held)
	holdForOperator := func() (bool, error) {
		cs.heldForOperator = true
		cs.status.Phase = fleetv1.ClusterUpgradePhasePaused
		cs.waiting = "spec.paused holds " + names + ", which KubeadmControlPlane marked for deletion: it goes once the FleetUpgrade is resumed"
		return false, nil
	}
	if s.fu.Spec.Paused {
		return holdForOperator()
	}
	if cs.handoffFailed != "" {
		cs.waiting = "the load-balancer hand-off fails; " + names + " stays until it succeeds"
		return false, nil
	}
	verdict := "not verified: gates.mvpVerified is false"
	if s.gateOn() {
		if !verified {
			ok, err := r.gate(ctx, s, cs, nil)
			if err != nil || !ok {
				if err == nil {
					cs.status.Phase = fleetv1.ClusterUpgradePhasePaused
					cs.waiting = "the gate holds " + names + ", which KubeadmControlPlane marked for deletion: " + cs.waiting
				}
				return false, err
			}
		}
		verdict = "every apiserver passed verification"
		if v := cs.status.LastVerification; v != nil && v.Message != "" {
			verdict = v.Message
		}
		// A round takes seconds: the operator may have paused while it
		// ran, and a pause holds every machine not yet released.
		paused, err := r.pausedNow(ctx, s)
		if err != nil {
			return false, err
		}
		if paused {
			return holdForOperator()
		}
	}
	for _, m := range held {
		if ok, err := r.releaseGate(ctx, s, cs, m); err != nil || !ok {
			return false, err
		}
		msg := fmt.Sprintf("KubeadmControlPlane chose machine %s (%s) for deletion; released to Cluster API: %s", m.Name, m.Spec.Version, verdict)
		logf.FromContext(ctx).Info("Released a machine to Cluster API", "cluster", cs.key, "machine", m.Name)
		r.event(s, corev1.EventTypeNormal, "MachineReleased", "Release", "Cluster %s: %s", cs.key, msg)
		if err := r.record(ctx, s, store.NewUpgradeStep{Cluster: cs.status.Name, Kind: StepKindRelease, Machine: m.Name,
			FromVersion: m.Spec.Version, ToVersion: s.target}, store.StepPassed, msg, nil); err != nil {
			return false, err
		}
	}
	return true, nil
}

// releaseGate hands a Machine being deleted off the load balancer, when the
// hand-off applies, and then takes GateHook off it. It returns false while
// the hand-off has not succeeded.
func (r *Reconciler) releaseGate(ctx context.Context, s *scope, cs *clusterScope, m *clusterv1.Machine) (bool, error) {
	if hooked(m) && cs.loadBalancer != "" {
		if err := r.removeServer(ctx, s, cs, m); err != nil {
			return false, err
		}
		cur := &clusterv1.Machine{}
		if err := r.reader().Get(ctx, client.ObjectKeyFromObject(m), cur); err == nil && hooked(cur) {
			return false, nil
		}
	}
	return true, r.setHook(ctx, m, GateHook, "")
}

// releaseGateHooks takes GateHook off the cluster's Machines: the cluster's
// upgrade ended. A Machine being deleted leaves the load balancer first.
func (r *Reconciler) releaseGateHooks(ctx context.Context, s *scope, cs *clusterScope) error {
	for i := range cs.machines {
		m := &cs.machines[i]
		if !gated(m) {
			continue
		}
		if !m.DeletionTimestamp.IsZero() {
			if _, err := r.releaseGate(ctx, s, cs, m); err != nil {
				return err
			}
			continue
		}
		if err := r.setHook(ctx, m, GateHook, ""); err != nil {
			return err
		}
	}
	return nil
}

func machineNames(ms []*clusterv1.Machine) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = "machine " + m.Name
	}
	return strings.Join(names, ", ")
}

// pausedNow reads the FleetUpgrade's spec.paused as it is now, past the
// cache: the scope's copy was read when the reconcile began.
func (r *Reconciler) pausedNow(ctx context.Context, s *scope) (bool, error) {
	fu := &fleetv1.FleetUpgrade{}
	if err := r.reader().Get(ctx, client.ObjectKeyFromObject(s.fu), fu); err != nil {
		return false, fmt.Errorf("reading FleetUpgrade %s: %w", s.fu.Name, err)
	}
	return fu.Spec.Paused, nil
}
