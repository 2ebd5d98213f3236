package app_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// TestUpgradeCLI runs bex upgrade plan, start, status, pause, resume and
// abort against the real API over Cluster API objects, with the status and
// records the controller would write.
func TestUpgradeCLI(t *testing.T) {
	cp := cptest.Start(t)
	e := apitest.Start(t, cp)
	ctx := t.Context()
	_, tenantToken := e.TenantToken(t, "cliupgrade")
	dir := t.TempDir()
	op := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": e.OperatorToken}
	tenant := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": tenantToken}
	fleet := map[string]string{"fleet": "cli"}
	e.CreateCluster(t, "fleet-cli", "canary", "v1.36.3", fleet)
	e.CreateCluster(t, "fleet-cli", "eu-1", "v1.36.3", map[string]string{"fleet": "cli", "region": "eu"})
	e.CreateCluster(t, "fleet-cli", "old", "v1.35.4", fleet)

	// writeStatus writes what the controller would report, and records a
	// failed verify step with its probes.
	writeStatus := func(t *testing.T) {
		fu := &fleetv1.FleetUpgrade{}
		if err := e.Kube.Get(ctx, client.ObjectKey{Name: "to-137"}, fu); err != nil {
			t.Fatal(err)
		}
		t0 := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC))
		evidence := "cp-1 list storagemigration.k8s.io/v1/storageversionmigrations: 404 page not found"
		fu.Status = fleetv1.FleetUpgradeStatus{
			Phase: fleetv1.FleetUpgradePhasePaused,
			Conditions: []metav1.Condition{
				{Type: "Paused", Status: metav1.ConditionTrue, Reason: "GateFailed", Message: "fleet-cli/canary: " + evidence, LastTransitionTime: t0},
			},
			Clusters: []fleetv1.ClusterUpgradeStatus{{
				Name: "fleet-cli/canary", Wave: "canary", Phase: fleetv1.ClusterUpgradePhasePaused, FromVersion: "v1.36.3", ToVersion: "v1.37.2",
				Steps:            []fleetv1.UpgradeStep{{Machine: "canary-a", Verdict: fleetv1.StepVerdictFailed, Message: evidence}},
				LastVerification: &fleetv1.Verification{Time: t0, Reason: "Spurious404", Message: evidence, APIServers: []string{"cp-1", "cp-2"}},
			}},
		}
		if err := e.Kube.Status().Update(ctx, fu); err != nil {
			t.Fatal(err)
		}
		run, err := e.Store.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: fu.Name, UID: string(fu.UID), TargetVersion: "v1.37.2"})
		if err != nil {
			t.Fatal(err)
		}
		step, err := e.Store.StartUpgradeStep(ctx, run.ID, store.NewUpgradeStep{Cluster: "fleet-cli/canary", Kind: "verify", Machine: "canary-a"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Store.RecordProbes(ctx, step.ID, []store.ProbeSample{
			{APIServer: "cp-2", Resource: "platform.bex.co/v1alpha1/apps", Verb: "list", Status: 200, Outcome: "ServedLocally", At: t0.Time},
			{APIServer: "cp-1", Resource: "storagemigration.k8s.io/v1/storageversionmigrations", Verb: "list", Status: 404, Outcome: "Spurious404", Message: "404 page not found", At: t0.Time},
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Store.FinishUpgradeStep(ctx, step.ID, store.StepFailed, evidence); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		before  func(*testing.T)
		want    string
		match   string
		wantErr string
		json    func(t *testing.T, out []byte)
	}{
		{name: "a tenant is refused", env: tenant, args: []string{"upgrade", "plan", "--to", "v1.37.2"},
			wantErr: "not allowed: this needs an operator's token"},
		{name: "plan", args: []string{"upgrade", "plan", "--to", "v1.37.2", "--selector", "fleet=cli", "--canary", "fleet-cli/canary"}, want: "" +
			"Plan to v1.37.2: 2 clusters in 2 stages; 0 skipped, 1 refused.\n\n" +
			"STAGE        AT ONCE  CLUSTER           VERSION  DECISION\n" +
			"canary       1        fleet-cli/canary  v1.36.3  upgrade to v1.37.2\n" +
			"(remaining)  1        fleet-cli/eu-1    v1.36.3  upgrade to v1.37.2\n" +
			"-            -        fleet-cli/old     v1.35.4  refused (TooFarBehind)\n\n" +
			"Refused:\n" +
			"  fleet-cli/old: cluster fleet-cli/old runs 1.35.4: upgrade it to 1.36 first; one minor version at a time\n\n" +
			"A fleet upgrade does not start while a selected cluster is refused (PreflightPassed=False, VersionSkew):\n" +
			"fix those clusters, or leave them out with --selector.\n"},
		{name: "plan with a wave, json", args: []string{"upgrade", "plan", "--to", "v1.37.2", "--selector", "fleet=cli", "--selector", "region=eu", "--wave", "eu:region=eu", "-o", "json"},
			json: func(t *testing.T, out []byte) {
				var p apiclient.UpgradePlan
				if err := json.Unmarshal(out, &p); err != nil || len(p.Stages) != 1 || p.Stages[0].Name != "eu" || p.Stages[0].Clusters[0].Name != "fleet-cli/eu-1" || len(p.Refused) != 0 {
					t.Errorf("plan = %s, %v", out, err)
				}
			}},
		{name: "plan without --to", args: []string{"upgrade", "plan"}, wantErr: "which version? add --to, such as --to v1.37.2"},
		{name: "plan with a bad wave", args: []string{"upgrade", "plan", "--to", "v1.37.2", "--wave", "eu"}, wantErr: `--wave "eu": want NAME:SELECTOR`},
		{name: "plan with a missing canary", args: []string{"upgrade", "plan", "--to", "v1.37.2", "--canary", "fleet-cli/nope"},
			wantErr: "canaryCluster fleet-cli/nope does not exist or does not match clusterSelector (field canaryCluster)"},
		{name: "start with a skipped minor", args: []string{"upgrade", "start", "skip", "--to", "v1.37.2", "--from", "v1.35.0"},
			wantErr: "must be exactly one minor version above fromVersion: an upgrade that skips a minor version is refused (field targetVersion)"},
		{name: "start", args: []string{"upgrade", "start", "to-137", "--to", "v1.37.2", "--selector", "fleet=cli", "--canary", "fleet-cli/canary", "--soak", "5m", "--wire-mvp"}, want: "" +
			"Started fleet upgrade to-137 to v1.37.2.\n" +
			"  clusters fleet=cli, canary fleet-cli/canary, 1 at once, soak 5m0s, wire MVP\n\n" +
			"Follow it with:\n  bex upgrade status to-137\n" +
			"Hold it with bex upgrade pause to-137; stop it for good with bex upgrade abort to-137.\n"},
		{name: "start it again", args: []string{"upgrade", "start", "to-137", "--to", "v1.37.2"}, wantErr: `fleet upgrade "to-137" exists already`},
		{name: "status before the controller", args: []string{"upgrade", "status", "to-137"}, want: "" +
			"Fleet upgrade to-137 to v1.37.2: - (the FleetUpgrade controller has not reported yet)\n" +
			"  clusters fleet=cli, canary fleet-cli/canary, 1 at once, soak 5m0s, wire MVP\n"},
		{name: "status", before: writeStatus, args: []string{"upgrade", "status", "to-137", "--probes"},
			match: `(?s)^Fleet upgrade to-137 to v1\.37\.2: Paused\n` +
				`  clusters fleet=cli, canary fleet-cli/canary, 1 at once, soak 5m0s, wire MVP\n` +
				`  Recorded run: running since \d{4}-\d\d-\d\d \d\d:\d\d\n\n` +
				`CLUSTER           WAVE    PHASE   VERSION             STEPS     VERIFIED\n` +
				`fleet-cli/canary  canary  Paused  v1\.36\.3 -> v1\.37\.2  1 failed  FAIL Spurious404\n\n` +
				`Last verification:\n` +
				`  fleet-cli/canary \(2026-03-04 05:06, 2 apiservers\): FAIL Spurious404: cp-1 list storagemigration\.k8s\.io/v1/storageversionmigrations: 404 page not found\n\n` +
				`TYPE    STATUS  REASON      SINCE             MESSAGE\n` +
				`Paused  True    GateFailed  2026-03-04 05:06  fleet-cli/canary: cp-1 list .*: 404 page not found\n\n` +
				`Recorded steps:\n` +
				`SEQ  CLUSTER           KIND    MACHINE   OUTCOME  PROBES                         MESSAGE\n` +
				`1    fleet-cli/canary  verify  canary-a  failed   ServedLocally=1 Spurious404=1  cp-1 list .*\n\n` +
				`Failed probes:\n` +
				`  step 1 cp-1 list storagemigration\.k8s\.io/v1/storageversionmigrations: 404 Spurious404 404 page not found\n$`},
		{name: "status json", args: []string{"upgrade", "status", "to-137", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var u apiclient.Upgrade
			if err := json.Unmarshal(out, &u); err != nil || u.Phase != "Paused" || u.Run == nil || len(u.Run.Steps) != 1 || u.Run.Steps[0].Probes["Spurious404"] != 1 ||
				u.Run.Steps[0].FailedProbes != nil || u.Clusters[0].LastVerification.Reason != "Spurious404" {
				t.Errorf("status = %s, %v", out, err)
			}
		}},
		{name: "list", args: []string{"upgrade", "status"},
			match: `^NAME    TARGET   PHASE   HELD  RUN      CREATED\nto-137  v1\.37\.2  Paused  -     running  \d{4}-\d\d-\d\d \d\d:\d\d\n$`},
		{name: "pause", args: []string{"upgrade", "pause", "to-137"},
			want: "Fleet upgrade to-137 paused: no new cluster starts and no version is bumped; a cluster whose rollout runs stops at the next machine boundary " +
				"(after the machine being replaced has joined and been verified), never in the middle of a replacement. Resume with bex upgrade resume to-137.\n"},
		{name: "pause again", args: []string{"upgrade", "pause", "to-137"}, want: "Fleet upgrade to-137 was paused already: nothing changed.\n"},
		{name: "resume", args: []string{"upgrade", "resume", "to-137"},
			want: "Fleet upgrade to-137 resumed: the controller unpauses the Clusters it paused and the rollout goes on.\n"},
		{name: "abort", args: []string{"upgrade", "abort", "to-137", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var ch apiclient.UpgradeChange
			if err := json.Unmarshal(out, &ch); err != nil || !ch.Changed || !ch.Upgrade.Aborted || !strings.HasPrefix(ch.Message, "aborted, for good: it cannot be resumed") {
				t.Errorf("abort = %s, %v", out, err)
			}
		}},
		{name: "resume after abort", args: []string{"upgrade", "resume", "to-137"},
			wantErr: "fleet upgrade to-137 was aborted, which is final: it cannot be paused or resumed"},
		{name: "status after abort", args: []string{"upgrade", "status", "to-137"},
			match: `(?m)^  Aborted: final; clusters stopped mid-rollout stay paused at mixed versions\.$`},
		{name: "missing", args: []string{"upgrade", "pause", "nope"}, wantErr: `fleet upgrade "nope" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			if tc.env == nil {
				tc.env = op
			}
			out, err := bex(t, dir, tc.env, "", tc.args...)
			if !checkRun(t, tc.args, out, err, tc.wantErr, tc.want, tc.match) {
				return
			}
			if tc.json != nil {
				tc.json(t, []byte(out))
			}
		})
	}
}
