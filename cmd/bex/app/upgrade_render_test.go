package app

import (
	"bytes"
	"testing"
	"time"

	"bex.co/bex/web/api/apiclient"
)

func TestRenderUpgradePlan(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan apiclient.UpgradePlan
		want string
	}{{
		name: "stages, skipped and refused",
		plan: apiclient.UpgradePlan{
			TargetVersion: "v1.37.2",
			Stages: []apiclient.UpgradeStage{
				{Name: "canary", Kind: "Canary", MaxParallel: 1, Clusters: []apiclient.PlannedCluster{{Name: "fleet/canary", FromVersion: "v1.36.3", ToVersion: "v1.37.2"}}},
				{Name: "(remaining)", Kind: "Remaining", MaxParallel: 2, Clusters: []apiclient.PlannedCluster{
					{Name: "fleet/a", FromVersion: "v1.36.1", ToVersion: "v1.37.2"}, {Name: "fleet/b", FromVersion: "v1.36.3", ToVersion: "v1.37.2"}}},
				{Name: "(management)", Kind: "Management", MaxParallel: 1, Clusters: []apiclient.PlannedCluster{{Name: "fleet/mgmt", FromVersion: "v1.36.3", ToVersion: "v1.37.2", Management: true}}},
			},
			Skipped: []apiclient.UpgradeDecision{{Cluster: "fleet/done", Version: "v1.37.2", Decision: "skipped", Reason: "AlreadyAtTarget", Message: "cluster fleet/done already runs 1.37.2"}},
			Refused: []apiclient.UpgradeDecision{
				{Cluster: "fleet/old", Version: "v1.35.4", Decision: "refused", Reason: "TooFarBehind", Message: "cluster fleet/old runs 1.35.4: upgrade it to 1.36 first; one minor version at a time"},
				{Cluster: "fleet/bare", Decision: "refused", Reason: "NoKubeadmControlPlane", Message: "cluster fleet/bare references KubeadmControlPlane fleet/bare, which does not exist"},
			},
		},
		want: `Plan to v1.37.2: 4 clusters in 3 stages; 1 skipped, 2 refused.

STAGE         AT ONCE  CLUSTER       VERSION  DECISION
canary        1        fleet/canary  v1.36.3  upgrade to v1.37.2
(remaining)   2        fleet/a       v1.36.1  upgrade to v1.37.2
(remaining)   2        fleet/b       v1.36.3  upgrade to v1.37.2
(management)  1        fleet/mgmt    v1.36.3  upgrade to v1.37.2 (management cluster, last)
-             -        fleet/done    v1.37.2  skipped (AlreadyAtTarget)
-             -        fleet/old     v1.35.4  refused (TooFarBehind)
-             -        fleet/bare    -        refused (NoKubeadmControlPlane)

Refused:
  fleet/old: cluster fleet/old runs 1.35.4: upgrade it to 1.36 first; one minor version at a time
  fleet/bare: cluster fleet/bare references KubeadmControlPlane fleet/bare, which does not exist

A fleet upgrade does not start while a selected cluster is refused (PreflightPassed=False, VersionSkew):
fix those clusters, or leave them out with --selector.
`,
	}, {
		name: "one cluster",
		plan: apiclient.UpgradePlan{TargetVersion: "v1.37.2", Stages: []apiclient.UpgradeStage{
			{Name: "(remaining)", Kind: "Remaining", MaxParallel: 1, Clusters: []apiclient.PlannedCluster{{Name: "fleet/a", FromVersion: "v1.36.1", ToVersion: "v1.37.2"}}}}},
		want: `Plan to v1.37.2: 1 cluster in 1 stage; 0 skipped, 0 refused.

STAGE        AT ONCE  CLUSTER  VERSION  DECISION
(remaining)  1        fleet/a  v1.36.1  upgrade to v1.37.2
`,
	}, {
		name: "nothing selected",
		plan: apiclient.UpgradePlan{TargetVersion: "v1.37.2"},
		want: "Plan to v1.37.2: 0 clusters in 0 stages; 0 skipped, 0 refused.\nNo Cluster API cluster matches: check --selector, or the clusters' labels.\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := renderUpgradePlan(&b, tc.plan); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("printed\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestRenderUpgradeStatus(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	evidence := "cp-1 list storagemigration.k8s.io/v1/storageversionmigrations: 404 page not found"
	base := apiclient.Upgrade{Name: "to-137", TargetVersion: "v1.37.2", ClusterSelector: "env=prod", MaxParallelClusters: 1, Soak: "10m0s", Conditions: []apiclient.UpgradeCondition{}, Clusters: []apiclient.UpgradeClusterStatus{}}
	gated := base
	gated.FromVersion, gated.CanaryCluster, gated.WireMVP = "v1.36.0", "fleet/canary", true
	gated.Waves = []apiclient.UpgradeWave{{Name: "eu", ClusterSelector: "region=eu", MaxParallel: 1}}
	gated.Phase = "Paused"
	gated.Clusters = []apiclient.UpgradeClusterStatus{
		{Name: "fleet/canary", Wave: "canary", Phase: "Paused", FromVersion: "v1.36.3", ToVersion: "v1.37.2",
			Steps:            []apiclient.UpgradeMachineStep{{Machine: "m1", Verdict: "Passed"}, {Machine: "m2", Verdict: "Passed"}, {Machine: "m3", Verdict: "Failed", Message: evidence}},
			LastVerification: &apiclient.UpgradeVerification{Time: t0, Reason: "Spurious404", Message: evidence + "\nand 2 more", APIServers: []string{"cp-1", "cp-2", "cp-3"}}},
		{Name: "fleet/eu-1", Wave: "eu", Phase: "Succeeded", FromVersion: "v1.36.3", ToVersion: "v1.37.2",
			Steps:            []apiclient.UpgradeMachineStep{{Machine: "e1", Verdict: "Passed"}},
			LastVerification: &apiclient.UpgradeVerification{Time: t0, Passed: true, Reason: "MVPVerified", Message: "12 probes on 3 apiservers passed", APIServers: []string{"a", "b", "c"}}},
		{Name: "fleet/us-1", Wave: "(remaining)", Phase: "Pending", FromVersion: "v1.36.1", ToVersion: "v1.37.2"},
	}
	gated.Conditions = []apiclient.UpgradeCondition{
		{Type: "Ready", Status: "False", Reason: "InProgress", Message: "1 of 3 clusters upgraded", Since: t0},
		{Type: "Paused", Status: "True", Reason: "GateFailed", Message: "fleet/canary: " + evidence, Since: t0},
	}
	gated.Run = &apiclient.UpgradeRun{ID: "run-1", State: "paused", Message: "gate failed", StartedAt: t0, Steps: []apiclient.UpgradeRecordedStep{
		{Seq: 1, Cluster: "fleet/canary", Kind: "bump", Outcome: "passed"},
		{Seq: 2, Cluster: "fleet/canary", Kind: "verify", Machine: "m3", Outcome: "failed", Message: evidence,
			Probes:       map[string]int{"Spurious404": 1, "ServedLocally": 11},
			FailedProbes: []apiclient.UpgradeProbe{{APIServer: "cp-1", Verb: "list", Resource: "storagemigration.k8s.io/v1/storageversionmigrations", Status: 404, Outcome: "Spurious404", Message: "404 page not found"}}},
	}}
	aborted := base
	aborted.Aborted, aborted.Paused, aborted.Phase = true, true, "Aborted"

	for _, tc := range []struct {
		name string
		u    apiclient.Upgrade
		want string
	}{{
		name: "held by a gate, with records and failed probes",
		u:    gated,
		want: `Fleet upgrade to-137 to v1.37.2: Paused
  clusters env=prod, from v1.36.0, canary fleet/canary, wave eu (region=eu), 1 at once, soak 10m0s, wire MVP
  Recorded run: paused since 2026-03-04 05:06: gate failed

CLUSTER       WAVE         PHASE      VERSION             STEPS               VERIFIED
fleet/canary  canary       Paused     v1.36.3 -> v1.37.2  2 passed, 1 failed  FAIL Spurious404
fleet/eu-1    eu           Succeeded  v1.36.3 -> v1.37.2  1 passed            PASS MVPVerified
fleet/us-1    (remaining)  Pending    v1.36.1 -> v1.37.2  -                   -

Last verification:
  fleet/canary (2026-03-04 05:06, 3 apiservers): FAIL Spurious404: ` + evidence + `
  fleet/eu-1 (2026-03-04 05:06, 3 apiservers): PASS MVPVerified: 12 probes on 3 apiservers passed

TYPE    STATUS  REASON      SINCE             MESSAGE
Ready   False   InProgress  2026-03-04 05:06  1 of 3 clusters upgraded
Paused  True    GateFailed  2026-03-04 05:06  fleet/canary: ` + evidence + `

Recorded steps:
SEQ  CLUSTER       KIND    MACHINE  OUTCOME  PROBES                          MESSAGE
1    fleet/canary  bump    -        passed   -                               -
2    fleet/canary  verify  m3       failed   ServedLocally=11 Spurious404=1  ` + evidence + `

Failed probes:
  step 2 cp-1 list storagemigration.k8s.io/v1/storageversionmigrations: 404 Spurious404 404 page not found
`,
	}, {
		name: "not reported yet",
		u:    base,
		want: `Fleet upgrade to-137 to v1.37.2: - (the FleetUpgrade controller has not reported yet)
  clusters env=prod, 1 at once, soak 10m0s
`,
	}, {
		name: "aborted",
		u:    aborted,
		want: `Fleet upgrade to-137 to v1.37.2: Aborted
  clusters env=prod, 1 at once, soak 10m0s
  Aborted: final; clusters stopped mid-rollout stay paused at mixed versions.
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := renderUpgradeStatus(&b, tc.u); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("printed\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestRenderUpgradeList(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		us   []apiclient.Upgrade
		want string
	}{
		{"none", nil, "No fleet upgrades. Plan one with: bex upgrade plan --to VERSION\n"},
		{"two", []apiclient.Upgrade{
			{Name: "to-138", TargetVersion: "v1.38.0", Paused: true, CreatedAt: t0.Add(time.Hour)},
			{Name: "to-137", TargetVersion: "v1.37.2", Phase: "Aborted", Aborted: true, Run: &apiclient.UpgradeRun{State: "aborted"}, CreatedAt: t0},
		}, "" +
			"NAME    TARGET   PHASE    HELD     RUN      CREATED\n" +
			"to-138  v1.38.0  -        paused   -        2026-03-04 06:06\n" +
			"to-137  v1.37.2  Aborted  aborted  aborted  2026-03-04 05:06\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := renderUpgradeList(&b, tc.us); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("printed\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestRenderUpgradeChange(t *testing.T) {
	u := apiclient.Upgrade{Name: "to-137"}
	for _, tc := range []struct {
		verb, done string
		ch         apiclient.UpgradeChange
		want       string
	}{
		{"pause", "paused", apiclient.UpgradeChange{Upgrade: u, Changed: true, Message: "paused: no new cluster starts"}, "Fleet upgrade to-137 paused: no new cluster starts.\n"},
		{"pause", "paused", apiclient.UpgradeChange{Upgrade: u, Message: "paused: no new cluster starts"}, "Fleet upgrade to-137 was paused already: nothing changed.\n"},
		{"resume", "resumed", apiclient.UpgradeChange{Upgrade: u, Message: "not paused: nothing to resume"}, "Fleet upgrade to-137 is not paused: nothing to resume.\n"},
		{"abort", "aborted", apiclient.UpgradeChange{Upgrade: u, Changed: true, Message: "aborted, for good: it cannot be resumed"}, "Fleet upgrade to-137 aborted, for good: it cannot be resumed.\n"},
		{"abort", "aborted", apiclient.UpgradeChange{Upgrade: u}, "Fleet upgrade to-137 was aborted already: nothing changed.\n"},
	} {
		var b bytes.Buffer
		if err := renderUpgradeChange(&b, tc.verb, tc.done, tc.ch); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s %+v printed %q, want %q", tc.verb, tc.ch, b.String(), tc.want)
		}
	}
}
