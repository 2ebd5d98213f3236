package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/store"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/verify"
	"bex.co/bex/web/api/apiclient"
)

// What the API shows of fleet upgrades: the list and one upgrade with its
// status, the run the controller recorded in Postgres with its steps and
// their probes, and a plan. Planning and changing upgrades are in
// upgrades.go.

// listUpgrades answers every FleetUpgrade, newest first, each with its
// recorded run but not the run's steps.
func (s *Server) listUpgrades(c echo.Context) error {
	ctx := c.Request().Context()
	var list fleetv1.FleetUpgradeList
	if err := s.kube.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) {
			return c.JSON(http.StatusOK, []apiclient.Upgrade{})
		}
		return fmt.Errorf("listing fleet upgrades: %w", err)
	}
	fus := make([]*fleetv1.FleetUpgrade, len(list.Items))
	for i := range list.Items {
		fus[i] = &list.Items[i]
	}
	runs, err := s.runsOf(ctx, fus...)
	if err != nil {
		return err
	}
	slices.SortFunc(list.Items, func(a, b fleetv1.FleetUpgrade) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	views := make([]apiclient.Upgrade, 0, len(list.Items))
	for i := range list.Items {
		fu := &list.Items[i]
		var run *apiclient.UpgradeRun
		if r, ok := runs[string(fu.UID)]; ok {
			run = runView(r)
		}
		views = append(views, upgradeView(fu, run))
	}
	return c.JSON(http.StatusOK, views)
}

// getUpgrade answers one FleetUpgrade with its recorded run and the run's
// steps; with ?probes=true, each step's failed probes too.
func (s *Server) getUpgrade(c echo.Context) error {
	withProbes, _ := strconv.ParseBool(c.QueryParam("probes"))
	fu, err := s.getUpgradeObject(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	runs, err := s.runsOf(ctx, fu)
	if err != nil {
		return err
	}
	var run *apiclient.UpgradeRun
	if r, ok := runs[string(fu.UID)]; ok {
		if run, err = s.recordedRun(ctx, r, withProbes); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, upgradeView(fu, run))
}

// runsOf returns the recorded runs of the given FleetUpgrades, by UID.
func (s *Server) runsOf(ctx context.Context, fus ...*fleetv1.FleetUpgrade) (map[string]store.UpgradeRun, error) {
	uids := make([]string, len(fus))
	for i, fu := range fus {
		uids[i] = string(fu.UID)
	}
	return s.store.UpgradeRunsByUID(ctx, uids)
}

// recordedRun returns the run r with its steps, each with its probes
// counted by outcome and by apiserver and, with withFailed, its failed
// probes; three queries whatever the run's length.
func (s *Server) recordedRun(ctx context.Context, r store.UpgradeRun, withFailed bool) (*apiclient.UpgradeRun, error) {
	run := runView(r)
	steps, err := s.store.ListUpgradeSteps(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	tallies, err := s.store.TallyProbes(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	var failed map[string][]store.ProbeSample
	if withFailed {
		if failed, err = s.store.ListRunProbes(ctx, r.ID, failedOutcomes()); err != nil {
			return nil, err
		}
	}
	byStep := map[string][]store.ProbeTally{}
	for _, t := range tallies {
		byStep[t.StepID] = append(byStep[t.StepID], t)
	}
	for _, st := range steps {
		run.Steps = append(run.Steps, recordedStepView(st, byStep[st.ID], failed[st.ID]))
	}
	return run, nil
}

// failedOutcomes are the outcomes of a failed probe.
func failedOutcomes() []string {
	var out []string
	for _, o := range verify.Outcomes() {
		if o.Failed() {
			out = append(out, string(o))
		}
	}
	return out
}

// recordedStepView is what the API shows of a recorded step, its probe
// tallies and its failed probes.
func recordedStepView(st store.UpgradeStep, tallies []store.ProbeTally, failed []store.ProbeSample) apiclient.UpgradeRecordedStep {
	v := apiclient.UpgradeRecordedStep{
		Seq: st.Seq, Cluster: st.Cluster, Kind: st.Kind, Machine: st.Machine, FromVersion: st.FromVersion, ToVersion: st.ToVersion,
		Outcome: string(st.Outcome), Message: st.Message, StartedAt: st.StartedAt.UTC(), FinishedAt: utcPtr(st.FinishedAt),
	}
	for _, t := range tallies {
		if v.Probes == nil {
			v.Probes, v.ProbesByAPIServer = map[string]int{}, map[string]map[string]int{}
		}
		v.Probes[t.Outcome] += t.Count
		if v.ProbesByAPIServer[t.APIServer] == nil {
			v.ProbesByAPIServer[t.APIServer] = map[string]int{}
		}
		v.ProbesByAPIServer[t.APIServer][t.Outcome] += t.Count
	}
	for _, p := range failed {
		v.FailedProbes = append(v.FailedProbes, apiclient.UpgradeProbe{
			APIServer: p.APIServer, Resource: p.Resource, Verb: p.Verb, Status: p.Status, Outcome: p.Outcome, Message: p.Message, At: p.At.UTC(),
		})
	}
	return v
}

// runView is what the API shows of a recorded run, without its steps.
func runView(r store.UpgradeRun) *apiclient.UpgradeRun {
	return &apiclient.UpgradeRun{ID: r.ID, State: string(r.State), Message: r.Message, StartedAt: r.StartedAt.UTC(), FinishedAt: utcPtr(r.FinishedAt)}
}

// upgradeView is what the API shows of a FleetUpgrade and its run.
func upgradeView(fu *fleetv1.FleetUpgrade, run *apiclient.UpgradeRun) apiclient.Upgrade {
	spec := fu.Spec
	v := apiclient.Upgrade{
		Name:                fu.Name,
		TargetVersion:       spec.TargetVersion,
		FromVersion:         spec.FromVersion,
		ClusterSelector:     selectorString(spec.ClusterSelector),
		MaxParallelClusters: max(spec.MaxParallelClusters, 1),
		Soak:                "10m0s",
		WireMVP:             spec.WireMVP,
		Paused:              spec.Paused,
		Aborted:             spec.Abort,
		Phase:               string(fu.Status.Phase),
		Conditions:          conditionViews(fu.Status.Conditions),
		Clusters:            []apiclient.UpgradeClusterStatus{},
		Run:                 run,
		CreatedAt:           fu.CreationTimestamp.UTC(),
	}
	if spec.SoakTime != nil {
		v.Soak = spec.SoakTime.Duration.String()
	}
	if spec.CanaryCluster != nil {
		v.CanaryCluster = spec.CanaryCluster.Namespace + "/" + spec.CanaryCluster.Name
	}
	for _, w := range spec.Waves {
		v.Waves = append(v.Waves, apiclient.UpgradeWave{Name: w.Name, ClusterSelector: selectorString(w.ClusterSelector), MaxParallel: max(w.MaxParallel, 1)})
	}
	for _, cs := range fu.Status.Clusters {
		cv := apiclient.UpgradeClusterStatus{
			Name: cs.Name, Wave: cs.Wave, Phase: string(cs.Phase), FromVersion: cs.FromVersion, ToVersion: cs.ToVersion,
			Steps: []apiclient.UpgradeMachineStep{}, StartedAt: metaTimePtr(cs.StartedAt), FinishedAt: metaTimePtr(cs.FinishedAt),
			Conditions: conditionViews(cs.Conditions),
		}
		for _, st := range cs.Steps {
			cv.Steps = append(cv.Steps, apiclient.UpgradeMachineStep{
				Machine: st.Machine, OldVersion: st.OldVersion, NewVersion: st.NewVersion,
				StartedAt: metaTimePtr(st.StartedAt), FinishedAt: metaTimePtr(st.FinishedAt), Verdict: string(st.Verdict), Message: st.Message,
			})
		}
		if lv := cs.LastVerification; lv != nil {
			cv.LastVerification = &apiclient.UpgradeVerification{
				Time: lv.Time.UTC(), Passed: lv.Passed, Reason: lv.Reason, Message: lv.Message, APIServers: lv.APIServers,
			}
		}
		v.Clusters = append(v.Clusters, cv)
	}
	return v
}

// upgradeConditionOrder is the order in which conditions are shown.
var upgradeConditionOrder = []string{
	fleetv1.FleetUpgradeReadyCondition,
	fleetv1.FleetUpgradePausedCondition,
	fleetv1.FleetUpgradeVerifiedCondition,
	fleetv1.FleetUpgradeProgressingCondition,
	fleetv1.FleetUpgradePreflightPassedCondition,
}

// conditionViews are the conditions in upgradeConditionOrder, others last.
func conditionViews(conds []metav1.Condition) []apiclient.UpgradeCondition {
	conds = slices.Clone(conds)
	rank := func(typ string) int {
		if i := slices.Index(upgradeConditionOrder, typ); i >= 0 {
			return i
		}
		return len(upgradeConditionOrder)
	}
	slices.SortStableFunc(conds, func(a, b metav1.Condition) int { return cmp.Compare(rank(a.Type), rank(b.Type)) })
	out := make([]apiclient.UpgradeCondition, 0, len(conds))
	for _, c := range conds {
		out = append(out, apiclient.UpgradeCondition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.UTC()})
	}
	return out
}

// selectorString writes a label selector in kubectl's syntax; "" selects
// everything.
func selectorString(sel metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		return "<invalid>"
	}
	return s.String()
}

// utcPtr is t in UTC; nil for nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// metaTimePtr is t in UTC; nil for nil.
func metaTimePtr(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// planView is what the API shows of a plan.
func planView(p *plan.Plan) apiclient.UpgradePlan {
	v := apiclient.UpgradePlan{TargetVersion: p.Target, Stages: []apiclient.UpgradeStage{},
		Skipped: []apiclient.UpgradeDecision{}, Refused: []apiclient.UpgradeDecision{}}
	for _, st := range p.Stages {
		sv := apiclient.UpgradeStage{Name: st.Name, Kind: string(st.Kind), MaxParallel: st.MaxParallel}
		for _, c := range st.Clusters {
			sv.Clusters = append(sv.Clusters, apiclient.PlannedCluster{
				Name: c.Name(), ControlPlane: c.ControlPlane.String(), FromVersion: c.FromVersion, ToVersion: c.ToVersion, Management: c.Management,
			})
		}
		v.Stages = append(v.Stages, sv)
	}
	decisions := func(ds []plan.Decision, decision string) []apiclient.UpgradeDecision {
		out := []apiclient.UpgradeDecision{}
		for _, d := range ds {
			out = append(out, apiclient.UpgradeDecision{Cluster: d.Key.String(), Version: d.Version, Decision: decision, Reason: d.Reason, Message: d.Message})
		}
		return out
	}
	v.Skipped = decisions(p.Skipped, "skipped")
	v.Refused = decisions(p.Refused, "refused")
	return v
}
