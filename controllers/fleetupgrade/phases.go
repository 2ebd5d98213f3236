package fleetupgrade

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/upgrade/plan"
)

// phase is one step of a reconcile of a FleetUpgrade: it reads and writes the
// world and records what it observed and decided in the scope. A phase that
// returns done ends the round; the status is written either way.
type phase func(ctx context.Context, s *scope) (done bool, err error)

// phases are the steps of a reconcile, in order: plan the rollout, stop it
// when aborted, move the stages on.
func (r *Reconciler) phases() []namedPhase {
	return []namedPhase{
		{StepPlan, r.planPhase},
		{StepAbort, r.abortPhase},
		{StepStages, r.stagesPhase},
	}
}

// namedPhase is a phase with its step label (bex_fleetupgrade_steps_total).
type namedPhase struct {
	step string
	run  phase
}

// planPhase computes the plan until a cluster has started; from then on the
// status entries are the plan, so that a cluster that reached the target
// stays Succeeded instead of turning Skipped. Refused clusters stop the
// start: the operator fixes them or takes them out of the selector.
func (r *Reconciler) planPhase(ctx context.Context, s *scope) (bool, error) {
	started := false
	for _, c := range s.fu.Status.Clusters {
		if startedClusterPhase(c.Phase) {
			started = true
		}
	}
	if started {
		s.target = s.fu.Status.Clusters[0].ToVersion
		for i := range s.fu.Status.Clusters {
			st := &s.fu.Status.Clusters[i]
			if st.ToVersion != "" {
				s.target = st.ToVersion
			}
			s.clusters = append(s.clusters, &clusterScope{status: st, key: keyOf(st.Name)})
		}
		if s.target == "" {
			s.target = s.fu.Spec.TargetVersion
		}
		return false, nil
	}

	var clusters clusterv1.ClusterList
	if err := r.Client.List(ctx, &clusters); err != nil {
		return false, fmt.Errorf("listing clusters: %w", err)
	}
	var kcps controlplanev1.KubeadmControlPlaneList
	if err := r.Client.List(ctx, &kcps); err != nil {
		return false, fmt.Errorf("listing control planes: %w", err)
	}
	p, err := plan.Compute(plan.Input{Upgrade: s.fu, Clusters: clusters.Items, ControlPlanes: kcps.Items})
	if errors.Is(err, plan.ErrInvalidSpec) {
		s.invalid = err
		s.fu.Status.Clusters = nil
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("planning: %w", err)
	}
	s.target = p.Target
	s.refused = p.Refused

	old := map[string]fleetv1.ClusterUpgradeStatus{}
	for _, c := range s.fu.Status.Clusters {
		old[c.Name] = c
	}
	entry := func(name string) fleetv1.ClusterUpgradeStatus {
		e := fleetv1.ClusterUpgradeStatus{Name: name}
		// Keep conditions (their transition times) across rounds.
		e.Conditions = old[name].Conditions
		return e
	}
	var entries []fleetv1.ClusterUpgradeStatus
	for _, st := range p.Stages {
		for _, c := range st.Clusters {
			e := entry(c.Name())
			e.Wave, e.Phase, e.FromVersion, e.ToVersion = st.Name, fleetv1.ClusterUpgradePhasePending, c.FromVersion, c.ToVersion
			entries = append(entries, e)
		}
	}
	for _, d := range p.Skipped {
		e := entry(d.Key.String())
		e.Phase, e.FromVersion, e.ToVersion = fleetv1.ClusterUpgradePhaseSkipped, d.Version, p.Target
		entries = append(entries, e)
	}
	for _, d := range p.Refused {
		e := entry(d.Key.String())
		e.Phase, e.FromVersion, e.ToVersion = fleetv1.ClusterUpgradePhasePending, d.Version, p.Target
		entries = append(entries, e)
	}
	s.fu.Status.Clusters = entries
	refusals := map[string]*plan.Decision{}
	for i := range p.Refused {
		refusals[p.Refused[i].Key.String()] = &p.Refused[i]
	}
	for i := range s.fu.Status.Clusters {
		st := &s.fu.Status.Clusters[i]
		s.clusters = append(s.clusters, &clusterScope{status: st, key: keyOf(st.Name), refusal: refusals[st.Name]})
	}
	if len(s.refused) > 0 {
		s.requeueAfter(s.opts.PollInterval)
		return true, nil
	}
	return false, nil
}

// abortPhase stops everything once spec.abort is set: clusters not yet
// bumped are left alone, and a cluster in the middle of its rollout is
// paused at the next machine boundary (never in the middle of a
// replacement) and left paused.
func (r *Reconciler) abortPhase(ctx context.Context, s *scope) (bool, error) {
	if !s.fu.Spec.Abort {
		return false, nil
	}
	for _, cs := range s.clusters {
		if finalClusterPhase(cs.status.Phase) {
			continue
		}
		if !startedClusterPhase(cs.status.Phase) {
			cs.status.Phase = fleetv1.ClusterUpgradePhaseAborted
			continue
		}
		found, err := r.observe(ctx, s, cs)
		if err != nil {
			return false, err
		}
		if found {
			// A Machine being deleted leaves the load balancer first,
			// also when aborting; the cluster ends once it did.
			if err := r.handoff(ctx, s, cs, false); err != nil {
				return false, err
			}
			if cs.handoffFailed != "" {
				cs.waiting = "aborting once the machine being deleted has left the load balancer"
				continue
			}
		}
		if !found || !sameVersion(cs.kcp.Spec.Version, s.target) {
			if found {
				if err := r.releaseHooks(ctx, cs, false); err != nil {
					return false, err
				}
				if err := r.releaseGateHooks(ctx, s, cs); err != nil {
					return false, err
				}
			}
			cs.status.Phase = fleetv1.ClusterUpgradePhaseAborted
			continue
		}
		if err := r.abortRollingCluster(ctx, s, cs); err != nil {
			return false, err
		}
	}
	return true, nil
}

// stagesPhase walks the stages in order: it moves the started clusters of
// the first unfinished stage on, starts its pending ones up to the stage's
// parallelism, and soaks a finished stage before the next starts. A stage
// with a failed cluster stops the rollout.
func (r *Reconciler) stagesPhase(ctx context.Context, s *scope) (bool, error) {
	for i, stage := range stages(s) {
		active, failed := 0, false
		for _, cs := range stage.clusters {
			if !startedClusterPhase(cs.status.Phase) || finalClusterPhase(cs.status.Phase) {
				continue
			}
			if err := r.advance(ctx, s, cs); err != nil {
				return false, err
			}
			if !finalClusterPhase(cs.status.Phase) {
				active++
			}
		}
		for _, cs := range stage.clusters {
			if s.fu.Spec.Paused || active >= stage.maxParallel {
				break
			}
			if cs.status.Phase != fleetv1.ClusterUpgradePhasePending {
				continue
			}
			cs.status.Phase = fleetv1.ClusterUpgradePhasePreflight
			cs.status.StartedAt = s.nowTime()
			if err := r.advance(ctx, s, cs); err != nil {
				return false, err
			}
			if !finalClusterPhase(cs.status.Phase) {
				active++
			}
		}
		var last time.Time
		done := true
		for _, cs := range stage.clusters {
			switch {
			case !finalClusterPhase(cs.status.Phase):
				done = false
			case cs.status.Phase == fleetv1.ClusterUpgradePhaseFailed:
				failed = true
			case cs.status.FinishedAt != nil && cs.status.FinishedAt.After(last):
				last = cs.status.FinishedAt.Time
			}
		}
		if !done {
			s.activeStage = stage.name
			return true, nil
		}
		if failed {
			return true, nil
		}
		if i < len(stages(s))-1 && !last.IsZero() {
			if until := last.Add(s.soakTime()); s.now.Before(until) {
				s.soaking, s.soakUntil = stage.name, until
				s.requeueAfter(until.Sub(s.now))
				return true, nil
			}
		}
	}
	return true, nil
}

// stage is one stage of the plan as the status entries hold it.
type stage struct {
	name        string
	maxParallel int
	clusters    []*clusterScope
}

// stages groups the clusters by their wave, in plan order; Skipped entries
// belong to none.
func stages(s *scope) []stage {
	var out []stage
	index := map[string]int{}
	for _, cs := range s.clusters {
		if cs.status.Wave == "" {
			continue
		}
		i, ok := index[cs.status.Wave]
		if !ok {
			i = len(out)
			index[cs.status.Wave] = i
			out = append(out, stage{name: cs.status.Wave, maxParallel: stageParallelism(s.fu, cs.status.Wave)})
		}
		out[i].clusters = append(out[i].clusters, cs)
	}
	return out
}

// stageParallelism is how many clusters of a stage run at once, as
// plan.Compute decides it.
func stageParallelism(fu *fleetv1.FleetUpgrade, name string) int {
	atLeastOne := func(n int32) int {
		if n < 1 {
			return 1
		}
		return int(n)
	}
	all := atLeastOne(fu.Spec.MaxParallelClusters)
	switch name {
	case plan.CanaryStage, plan.ManagementStage:
		return 1
	}
	for _, w := range fu.Spec.Waves {
		if w.Name == name {
			return min(atLeastOne(w.MaxParallel), all)
		}
	}
	return all
}

func keyOf(name string) types.NamespacedName {
	ns, n, ok := strings.Cut(name, "/")
	if !ok {
		return types.NamespacedName{Name: name}
	}
	return types.NamespacedName{Namespace: ns, Name: n}
}
