package fleetupgrade

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/store"
	"bex.co/bex/internal/upgrade/verify"
)

// run returns the Records run of the FleetUpgrade, starting it on first use.
func (r *Reconciler) run(ctx context.Context, s *scope) (string, error) {
	if s.runID != "" {
		return s.runID, nil
	}
	run, err := r.Records.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: s.fu.Name, UID: string(s.fu.UID), TargetVersion: s.fu.Spec.TargetVersion})
	if err != nil {
		return "", fmt.Errorf("recording the upgrade run: %w", err)
	}
	s.runID = run.ID
	return run.ID, nil
}

// record adds a finished step, with its probes, to the run. Without
// Records it does nothing.
func (r *Reconciler) record(ctx context.Context, s *scope, n store.NewUpgradeStep, outcome store.UpgradeStepOutcome, message string, probes []verify.Probe) error {
	if r.Records == nil {
		return nil
	}
	runID, err := r.run(ctx, s)
	if err != nil {
		return err
	}
	step, err := r.Records.StartUpgradeStep(ctx, runID, n)
	if err != nil {
		return fmt.Errorf("recording a %s step: %w", n.Kind, err)
	}
	if step.Outcome != store.StepRunning {
		// Recorded by an earlier round whose status write failed (a
		// machine's join is recorded once).
		return nil
	}
	if len(probes) > 0 {
		samples := make([]store.ProbeSample, len(probes))
		for i, p := range probes {
			samples[i] = store.ProbeSample{APIServer: p.APIServer, Resource: verify.GVRString(p.Resource), Verb: p.Verb,
				Status: p.Status, Outcome: string(p.Outcome), Message: p.Message, At: p.At}
		}
		if err := r.Records.RecordProbes(ctx, step.ID, samples); err != nil {
			return fmt.Errorf("recording probes: %w", err)
		}
	}
	if _, err := r.Records.FinishUpgradeStep(ctx, step.ID, outcome, message); err != nil {
		return fmt.Errorf("finishing a %s step: %w", n.Kind, err)
	}
	return nil
}

// recordPreflight records a preflight step when the cluster's verdict
// changes (passed, or blocked with other findings).
func (r *Reconciler) recordPreflight(ctx context.Context, s *scope, cs *clusterScope) error {
	status, _, message := clusterPreflight(cs)
	if c := meta.FindStatusCondition(cs.status.Conditions, fleetv1.FleetUpgradePreflightPassedCondition); c != nil && c.Status == status && c.Message == message {
		return nil
	}
	outcome := store.StepPassed
	if status != metav1.ConditionTrue {
		outcome = store.StepFailed
	}
	return r.record(ctx, s, store.NewUpgradeStep{Cluster: cs.status.Name, Kind: StepKindPreflight, FromVersion: cs.status.FromVersion, ToVersion: s.target},
		outcome, message, nil)
}

// recordRunState moves the run along with the FleetUpgrade's phase. A run
// that already ended stays as it is.
func (r *Reconciler) recordRunState(ctx context.Context, s *scope, before fleetv1.FleetUpgradePhase) error {
	phase := s.fu.Status.Phase
	if r.Records == nil || phase == before || phase == "" || phase == fleetv1.FleetUpgradePhasePending {
		return nil
	}
	runID, err := r.run(ctx, s)
	if err != nil {
		return err
	}
	state := store.UpgradeRunning
	switch phase {
	case fleetv1.FleetUpgradePhasePaused:
		state = store.UpgradePaused
	case fleetv1.FleetUpgradePhaseSucceeded:
		state = store.UpgradeSucceeded
	case fleetv1.FleetUpgradePhaseFailed:
		state = store.UpgradeFailed
	case fleetv1.FleetUpgradePhaseAborted:
		state = store.UpgradeAborted
	}
	msg := ""
	if c := meta.FindStatusCondition(s.fu.Status.Conditions, fleetv1.FleetUpgradeReadyCondition); c != nil {
		msg = c.Message
	}
	if _, err := r.Records.SetUpgradeRunState(ctx, runID, state, msg); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("recording the run's state: %w", err)
	}
	return nil
}

// event emits an Event on the FleetUpgrade when an event recorder is set.
func (r *Reconciler) event(s *scope, eventType, reason, action, note string, args ...any) {
	if r.Events == nil {
		return
	}
	r.Events.Eventf(s.fu, nil, eventType, reason, action, note, args...)
}
