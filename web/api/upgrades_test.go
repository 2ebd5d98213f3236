package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// testUpgrades: an operator plans a fleet upgrade over Cluster API objects,
// starts it, reads its status and records, pauses, resumes and aborts it;
// a tenant is refused everything and learns nothing; bad input is refused
// on its field and writes nothing. No controller runs: the test writes the
// status and the records the controller would.
func testUpgrades(t *testing.T, cp *controlplane.ControlPlane) {
	writer := &statusBeforePatch{}
	e := apitest.StartWith(t, cp, apitest.Options{WrapKube: func(c client.Client) client.Client {
		writer.Client = c
		return writer
	}})
	ctx := t.Context()
	_, tenantToken := e.TenantToken(t, "upgradetenant")
	op := e.OperatorToken
	const ns = "fleet-api"
	test := map[string]string{"fleet": "api-test"}
	with := func(k, v string) map[string]string { return map[string]string{"fleet": "api-test", k: v} }
	e.CreateCluster(t, ns, "canary", "v1.36.3", test)
	e.CreateCluster(t, ns, "eu-1", "v1.36.3", with("region", "eu"))
	e.CreateCluster(t, ns, "us-1", "v1.36.1", test)
	e.CreateCluster(t, ns, "done", "v1.37.2", test)
	e.CreateCluster(t, ns, "old", "v1.35.4", test)
	e.CreateCluster(t, ns, "mgmt", "v1.36.3", with("bex.co/management", "true"))
	e.CreateCluster(t, ns, "elsewhere", "v1.36.3", map[string]string{"fleet": "other"})

	planReq := apiclient.UpgradePlanRequest{
		TargetVersion: "v1.37.2", ClusterSelector: "fleet=api-test", CanaryCluster: ns + "/canary",
		Waves: []apiclient.UpgradeWave{{Name: "eu", ClusterSelector: "region=eu"}},
	}

	// A tenant's token gets the same 403 on every route, whether the
	// FleetUpgrade exists or not, and changes nothing.
	auditBefore := countRows(t, e, "audit_log")
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/upgrades/plan", planReq},
		{http.MethodPost, "/upgrades", apiclient.CreateUpgradeRequest{Name: "tenant-try", TargetVersion: "v1.37.2"}},
		{http.MethodGet, "/upgrades", nil},
		{http.MethodGet, "/upgrades/nope", nil},
		{http.MethodPost, "/upgrades/nope/pause", nil},
		{http.MethodPost, "/upgrades/nope/resume", nil},
		{http.MethodPost, "/upgrades/nope/abort", nil},
	} {
		a := call(t, e, r.method, r.path, tenantToken, r.body)
		if a.status != http.StatusForbidden || a.err().Message != "this needs an operator's token" {
			t.Errorf("tenant %s %s: %d %s, want 403", r.method, r.path, a.status, a.body)
		}
	}
	if n := upgradeCount(t, e); n != 0 {
		t.Errorf("%d FleetUpgrades after a tenant's attempts, want 0", n)
	}

	// The plan: canary, the eu wave, the rest, the management cluster last;
	// one cluster at the target is skipped, one too far behind refused.
	a := call(t, e, http.MethodPost, "/upgrades/plan", op, planReq)
	wantStatus(t, "planning", a, http.StatusOK)
	var p apiclient.UpgradePlan
	a.decode(t, &p)
	var stages []string
	for _, s := range p.Stages {
		var names []string
		for _, c := range s.Clusters {
			names = append(names, c.Name+"@"+c.FromVersion+"->"+c.ToVersion)
		}
		stages = append(stages, fmt.Sprintf("%s/%s/%d: %s", s.Name, s.Kind, s.MaxParallel, strings.Join(names, " ")))
	}
	if want := []string{
		"canary/Canary/1: fleet-api/canary@v1.36.3->v1.37.2",
		"eu/Wave/1: fleet-api/eu-1@v1.36.3->v1.37.2",
		"(remaining)/Remaining/1: fleet-api/us-1@v1.36.1->v1.37.2",
		"(management)/Management/1: fleet-api/mgmt@v1.36.3->v1.37.2",
	}; !slices.Equal(stages, want) {
		t.Errorf("stages = %q, want %q", stages, want)
	}
	if p.TargetVersion != "v1.37.2" || !p.Stages[3].Clusters[0].Management || p.Stages[0].Clusters[0].ControlPlane != "fleet-api/canary" {
		t.Errorf("plan = %+v", p)
	}
	want := []apiclient.UpgradeDecision{{Cluster: "fleet-api/done", Version: "v1.37.2", Decision: "skipped", Reason: "AlreadyAtTarget", Message: "cluster fleet-api/done already runs 1.37.2"}}
	if !slices.Equal(p.Skipped, want) {
		t.Errorf("skipped = %+v, want %+v", p.Skipped, want)
	}
	want = []apiclient.UpgradeDecision{{Cluster: "fleet-api/old", Version: "v1.35.4", Decision: "refused", Reason: "TooFarBehind",
		Message: "cluster fleet-api/old runs 1.35.4: upgrade it to 1.36 first; one minor version at a time"}}
	if !slices.Equal(p.Refused, want) {
		t.Errorf("refused = %+v, want %+v", p.Refused, want)
	}
	// fromVersion refuses the clusters on another minor.
	a = call(t, e, http.MethodPost, "/upgrades/plan", op, apiclient.UpgradePlanRequest{TargetVersion: "1.36.5", FromVersion: "1.35.0", ClusterSelector: "fleet=api-test"})
	wantStatus(t, "planning from 1.35", a, http.StatusOK)
	a.decode(t, &p)
	if len(p.Stages) != 1 || p.Stages[0].Clusters[0].Name != "fleet-api/old" || len(p.Refused) != 5 ||
		p.Refused[0].Reason != "NotFromVersion" || p.Refused[1].Reason != "AheadOfTarget" {
		t.Errorf("plan from 1.35 = %+v", p)
	}

	// Bad input: 422 on the field, whether this API, the CRD's schema, its
	// CEL rules or the planner refuses it; nothing is written.
	for _, tc := range []struct {
		name   string
		path   string
		body   any
		status int
		field  string
		says   string
	}{
		{"no target", "/upgrades/plan", apiclient.UpgradePlanRequest{}, 422, "targetVersion", "which version?"},
		{"target not a version", "/upgrades/plan", apiclient.UpgradePlanRequest{TargetVersion: "1.37"}, 422, "targetVersion", "should match"},
		{"a skipped minor (CEL)", "/upgrades/plan", apiclient.UpgradePlanRequest{TargetVersion: "v1.37.2", FromVersion: "v1.35.0"}, 422, "targetVersion",
			"must be exactly one minor version above fromVersion"},
		{"bad selector", "/upgrades/plan", apiclient.UpgradePlanRequest{TargetVersion: "v1.37.2", ClusterSelector: "env in ("}, 422, "clusterSelector", `selector "env in ("`},
		{"canary without namespace", "/upgrades/plan", apiclient.UpgradePlanRequest{TargetVersion: "v1.37.2", CanaryCluster: "canary"}, 422, "canaryCluster", "NAMESPACE/NAME"},
		{"canary missing", "/upgrades/plan", apiclient.UpgradePlanRequest{TargetVersion: "v1.37.2", CanaryCluster: ns + "/nope"}, 422, "canaryCluster",
			"canaryCluster fleet-api/nope does not exist or does not match clusterSelector"},
		{"canary is management", "/upgrades/plan", apiclient.UpgradePlanRequest{TargetVersion: "v1.37.2", CanaryCluster: ns + "/mgmt"}, 422, "canaryCluster", "is the management cluster"},
		{"bad wave name", "/upgrades/plan", apiclient.UpgradePlanRequest{TargetVersion: "v1.37.2", Waves: []apiclient.UpgradeWave{{Name: "EU_1"}}}, 422, "waves[0].name", "should match"},
		{"too parallel", "/upgrades/plan", apiclient.UpgradePlanRequest{TargetVersion: "v1.37.2", MaxParallelClusters: 99}, 422, "maxParallelClusters", "less than or equal to 50"},
		{"unknown field", "/upgrades/plan", map[string]any{"targetVersion": "v1.37.2", "canary": "x/y"}, 400, "", "unknown field"},
		{"no name", "/upgrades", apiclient.CreateUpgradeRequest{TargetVersion: "v1.37.2"}, 422, "name", "needs a name"},
		{"bad name", "/upgrades", apiclient.CreateUpgradeRequest{Name: "To_137", TargetVersion: "v1.37.2"}, 422, "name", "RFC 1123"},
		{"negative soak (CEL)", "/upgrades", apiclient.CreateUpgradeRequest{Name: "neg", TargetVersion: "v1.37.2", Soak: "-5m"}, 422, "soak", "must not be negative"},
		{"soak not a duration", "/upgrades", apiclient.CreateUpgradeRequest{Name: "soon", TargetVersion: "v1.37.2", Soak: "soon"}, 422, "soak", "want a duration"},
		{"create with a missing canary", "/upgrades", apiclient.CreateUpgradeRequest{Name: "nocanary", TargetVersion: "v1.37.2", CanaryCluster: ns + "/nope"}, 422, "canaryCluster", "does not exist"},
	} {
		a := call(t, e, http.MethodPost, tc.path, op, tc.body)
		if a.status != tc.status || a.err().Field != tc.field || !strings.Contains(a.err().Message, tc.says) {
			t.Errorf("%s: %d %s, want %d on %q saying %q", tc.name, a.status, a.body, tc.status, tc.field, tc.says)
		}
	}
	if n := upgradeCount(t, e); n != 0 {
		t.Errorf("%d FleetUpgrades after plans and refusals, want 0", n)
	}
	if n := countRows(t, e, "audit_log"); n != auditBefore {
		t.Errorf("audit_log has %d rows after reads and refusals, want %d", n, auditBefore)
	}

	// Start: the FleetUpgrade as asked, cluster-scoped.
	a = call(t, e, http.MethodPost, "/upgrades", op, apiclient.CreateUpgradeRequest{
		Name: "to-137", TargetVersion: "v1.37.2", FromVersion: "v1.36.0", ClusterSelector: "fleet=api-test", CanaryCluster: ns + "/canary",
		Waves: []apiclient.UpgradeWave{{Name: "eu", ClusterSelector: "region=eu"}}, Soak: "5m", WireMVP: true,
	})
	wantStatus(t, "starting", a, http.StatusCreated)
	var created apiclient.Upgrade
	a.decode(t, &created)
	if created.Name != "to-137" || created.TargetVersion != "v1.37.2" || created.FromVersion != "v1.36.0" || created.ClusterSelector != "fleet=api-test" ||
		created.CanaryCluster != "fleet-api/canary" || len(created.Waves) != 1 || created.Waves[0] != (apiclient.UpgradeWave{Name: "eu", ClusterSelector: "region=eu", MaxParallel: 1}) ||
		created.Soak != "5m0s" || !created.WireMVP || created.Paused || created.Aborted || created.MaxParallelClusters != 1 || created.Phase != "" || created.Run != nil || created.CreatedAt.IsZero() {
		t.Errorf("created = %+v", created)
	}
	fu := getUpgrade(t, e, "to-137")
	if fu.Namespace != "" || fu.Spec.ClusterSelector.MatchLabels["fleet"] != "api-test" || fu.Spec.CanaryCluster == nil || fu.Spec.CanaryCluster.Name != "canary" ||
		fu.Spec.SoakTime.Duration != 5*time.Minute || !fu.Spec.WireMVP || fu.Spec.Waves[0].ClusterSelector.MatchLabels["region"] != "eu" {
		t.Errorf("FleetUpgrade = %+v", fu.Spec)
	}
	a = call(t, e, http.MethodPost, "/upgrades", op, apiclient.CreateUpgradeRequest{Name: "to-137", TargetVersion: "v1.37.2"})
	if a.status != http.StatusConflict || a.err().Field != "name" || !strings.Contains(a.err().Message, `fleet upgrade "to-137" exists already`) {
		t.Errorf("starting it again: %d %s", a.status, a.body)
	}

	// Status as the controller reports it, and its records in Postgres.
	t0 := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC))
	evidence := "cp-1 list storagemigration.k8s.io/v1/storageversionmigrations: 404 page not found"
	fu.Status = fleetv1.FleetUpgradeStatus{
		Phase: fleetv1.FleetUpgradePhasePaused,
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: "InProgress", Message: "1 of 3 clusters upgraded", LastTransitionTime: t0},
			{Type: "Paused", Status: metav1.ConditionTrue, Reason: "GateFailed", Message: "fleet-api/canary: " + evidence, LastTransitionTime: t0},
		},
		Clusters: []fleetv1.ClusterUpgradeStatus{{
			Name: "fleet-api/canary", Wave: "canary", Phase: fleetv1.ClusterUpgradePhasePaused, FromVersion: "v1.36.3", ToVersion: "v1.37.2", StartedAt: &t0,
			Steps: []fleetv1.UpgradeStep{
				{Machine: "canary-a", OldVersion: "v1.36.3", NewVersion: "v1.37.2", Verdict: fleetv1.StepVerdictPassed, StartedAt: &t0, FinishedAt: &t0},
				{Machine: "canary-b", OldVersion: "v1.36.3", NewVersion: "v1.37.2", Verdict: fleetv1.StepVerdictFailed, Message: evidence, StartedAt: &t0},
			},
			LastVerification: &fleetv1.Verification{Time: t0, Passed: false, Reason: "Spurious404", Message: evidence, APIServers: []string{"cp-1", "cp-2"}},
		}, {Name: "fleet-api/eu-1", Wave: "eu", Phase: fleetv1.ClusterUpgradePhasePending, FromVersion: "v1.36.3", ToVersion: "v1.37.2"}},
	}
	if err := e.Kube.Status().Update(ctx, fu); err != nil {
		t.Fatal(err)
	}
	run, err := e.Store.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: fu.Name, UID: string(fu.UID), TargetVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.SetUpgradeRunState(ctx, run.ID, store.UpgradePaused, "gate failed"); err != nil {
		t.Fatal(err)
	}
	bump, err := e.Store.StartUpgradeStep(ctx, run.ID, store.NewUpgradeStep{Cluster: "fleet-api/canary", Kind: "bump", FromVersion: "v1.36.3", ToVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.FinishUpgradeStep(ctx, bump.ID, store.StepPassed, ""); err != nil {
		t.Fatal(err)
	}
	verifyStep, err := e.Store.StartUpgradeStep(ctx, run.ID, store.NewUpgradeStep{Cluster: "fleet-api/canary", Kind: "verify", Machine: "canary-b"})
	if err != nil {
		t.Fatal(err)
	}
	at := t0.Time
	if err := e.Store.RecordProbes(ctx, verifyStep.ID, []store.ProbeSample{
		{APIServer: "cp-1", Resource: "platform.bex.co/v1alpha1/apps", Verb: "list", Status: 200, Outcome: "ServedLocally", At: at},
		{APIServer: "cp-2", Resource: "platform.bex.co/v1alpha1/apps", Verb: "list", Status: 200, Outcome: "ServedLocally", At: at},
		{APIServer: "cp-1", Resource: "storagemigration.k8s.io/v1/storageversionmigrations", Verb: "list", Status: 404, Outcome: "Spurious404", Message: "404 page not found", At: at},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.FinishUpgradeStep(ctx, verifyStep.ID, store.StepFailed, evidence); err != nil {
		t.Fatal(err)
	}

	a = call(t, e, http.MethodGet, "/upgrades/to-137", op, nil)
	wantStatus(t, "status", a, http.StatusOK)
	var got apiclient.Upgrade
	a.decode(t, &got)
	if got.Phase != "Paused" || len(got.Conditions) != 2 || got.Conditions[0].Type != "Ready" || got.Conditions[1].Reason != "GateFailed" || !got.Conditions[1].Since.Equal(t0.Time) {
		t.Errorf("status conditions = %+v", got)
	}
	if len(got.Clusters) != 2 || len(got.Clusters[0].Steps) != 2 || got.Clusters[0].Steps[1].Verdict != "Failed" ||
		got.Clusters[0].LastVerification == nil || got.Clusters[0].LastVerification.Message != evidence || got.Clusters[0].LastVerification.Passed ||
		got.Clusters[1].Phase != "Pending" || len(got.Clusters[1].Steps) != 0 {
		t.Errorf("status clusters = %+v", got.Clusters)
	}
	if got.Run == nil || got.Run.ID != run.ID || got.Run.State != "paused" || got.Run.Message != "gate failed" || len(got.Run.Steps) != 2 {
		t.Fatalf("run = %+v", got.Run)
	}
	if s := got.Run.Steps[1]; s.Seq != 2 || s.Kind != "verify" || s.Outcome != "failed" || s.Machine != "canary-b" ||
		fmt.Sprint(s.Probes) != "map[ServedLocally:2 Spurious404:1]" || s.FailedProbes != nil ||
		fmt.Sprint(s.ProbesByAPIServer) != "map[cp-1:map[ServedLocally:1 Spurious404:1] cp-2:map[ServedLocally:1]]" {
		t.Errorf("verify step = %+v", s)
	}
	if s := got.Run.Steps[0]; s.Kind != "bump" || s.Probes != nil {
		t.Errorf("bump step = %+v", s)
	}
	a = call(t, e, http.MethodGet, "/upgrades/to-137?probes=true", op, nil)
	wantStatus(t, "status with probes", a, http.StatusOK)
	a.decode(t, &got)
	if fp := got.Run.Steps[1].FailedProbes; len(fp) != 1 || fp[0].APIServer != "cp-1" || fp[0].Status != 404 || fp[0].Outcome != "Spurious404" || fp[0].Message != "404 page not found" {
		t.Errorf("failed probes = %+v", fp)
	}
	a = call(t, e, http.MethodGet, "/upgrades", op, nil)
	wantStatus(t, "listing", a, http.StatusOK)
	var list []apiclient.Upgrade
	a.decode(t, &list)
	if len(list) != 1 || list[0].Name != "to-137" || list[0].Phase != "Paused" || list[0].Run == nil || list[0].Run.State != "paused" || list[0].Run.Steps != nil {
		t.Errorf("list = %+v", list)
	}
	if a := call(t, e, http.MethodGet, "/upgrades/nope", op, nil); a.status != http.StatusNotFound || !strings.Contains(a.err().Message, `fleet upgrade "nope" not found`) {
		t.Errorf("a missing upgrade: %d %s", a.status, a.body)
	}

	// Pause, resume, abort: the spec changes; abort is final.
	change := func(action string, status int) apiclient.UpgradeChange {
		t.Helper()
		a := call(t, e, http.MethodPost, "/upgrades/to-137/"+action, op, nil)
		wantStatus(t, action, a, status)
		var ch apiclient.UpgradeChange
		if status == http.StatusOK {
			a.decode(t, &ch)
		} else {
			ch.Message = a.err().Message
		}
		return ch
	}
	// The controller writes the status all through a rollout: a pause that
	// lands between the API's read and its write is decided again on the
	// new object, not refused (twice here).
	writer.arm(2)
	if ch := change("pause", 200); !ch.Changed || !ch.Upgrade.Paused || !strings.Contains(ch.Message, "next machine boundary") || !getUpgrade(t, e, "to-137").Spec.Paused {
		t.Errorf("pause: %+v", ch)
	}
	if n := writer.writes(); n != 2 {
		t.Errorf("the status was written %d times before the API's patches, want 2", n)
	}
	if fu := getUpgrade(t, e, "to-137"); fu.Status.ObservedGeneration != 2 || fu.Status.Phase != fleetv1.FleetUpgradePhasePaused {
		t.Errorf("after pausing: status %+v, want the controller's last write kept", fu.Status)
	}
	if ch := change("pause", 200); ch.Changed {
		t.Errorf("pausing again: %+v, want no change", ch)
	}
	if ch := change("resume", 200); !ch.Changed || ch.Upgrade.Paused || getUpgrade(t, e, "to-137").Spec.Paused {
		t.Errorf("resume: %+v", ch)
	}
	if ch := change("resume", 200); ch.Changed || !strings.Contains(ch.Message, "a gate holds it (fleet-api/canary: "+evidence) {
		t.Errorf("resuming what a gate holds: %+v", ch)
	}
	if ch := change("abort", 200); !ch.Changed || !ch.Upgrade.Aborted || !strings.Contains(ch.Message, "aborted, for good: it cannot be resumed") || !getUpgrade(t, e, "to-137").Spec.Abort {
		t.Errorf("abort: %+v", ch)
	}
	for _, action := range []string{"resume", "pause"} {
		if ch := change(action, http.StatusConflict); !strings.Contains(ch.Message, "fleet upgrade to-137 was aborted, which is final: it cannot be paused or resumed") {
			t.Errorf("%s after abort: %q", action, ch.Message)
		}
	}
	if ch := change("abort", 200); ch.Changed {
		t.Errorf("aborting again: %+v", ch)
	}
	if fu := getUpgrade(t, e, "to-137"); !fu.Spec.Abort || fu.Spec.Paused {
		t.Errorf("after abort: %+v", fu.Spec)
	}

	// One audit entry per change, by the operator.
	var actions []string
	for _, en := range auditActions(t, e, "") {
		if strings.HasPrefix(en.Action, "upgrade.") {
			var d struct{ TargetVersion string }
			if err := json.Unmarshal(en.Details, &d); err != nil {
				t.Fatal(err)
			}
			actions = append(actions, strings.Join([]string{en.Action, en.Target, d.TargetVersion, en.Actor}, " "))
		}
	}
	if want := []string{
		"upgrade.start to-137 v1.37.2 ops@bex.test",
		"upgrade.pause to-137 v1.37.2 ops@bex.test",
		"upgrade.resume to-137 v1.37.2 ops@bex.test",
		"upgrade.abort to-137 v1.37.2 ops@bex.test",
	}; !slices.Equal(actions, want) {
		t.Errorf("upgrade audit = %q, want %q", actions, want)
	}
}

func getUpgrade(t *testing.T, e *apitest.Env, name string) *fleetv1.FleetUpgrade {
	t.Helper()
	fu := &fleetv1.FleetUpgrade{}
	if err := e.Kube.Get(t.Context(), client.ObjectKey{Name: name}, fu); err != nil {
		t.Fatal(err)
	}
	return fu
}

func upgradeCount(t *testing.T, e *apitest.Env) int {
	t.Helper()
	var list fleetv1.FleetUpgradeList
	if err := e.Kube.List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// statusBeforePatch writes a FleetUpgrade's status, as its controller
// would, just before each of the next n patches of one.
type statusBeforePatch struct {
	client.Client
	mu      sync.Mutex
	left, n int
}

func (s *statusBeforePatch) arm(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.left = n
}

func (s *statusBeforePatch) writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *statusBeforePatch) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if fu, ok := obj.(*fleetv1.FleetUpgrade); ok {
		s.mu.Lock()
		write := s.left > 0
		if write {
			s.left--
			s.n++
		}
		n := s.n
		s.mu.Unlock()
		if write {
			current := &fleetv1.FleetUpgrade{}
			if err := s.Client.Get(ctx, client.ObjectKeyFromObject(fu), current); err != nil {
				return err
			}
			current.Status.ObservedGeneration = int64(n)
			if err := s.Client.Status().Update(ctx, current); err != nil {
				return err
			}
		}
	}
	return s.Client.Patch(ctx, obj, patch, opts...)
}
