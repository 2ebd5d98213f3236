package plan_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/upgrade/plan"
)

// cluster is a Cluster named ns/name with a KubeadmControlPlane "<name>-cp"
// at version, and labels as k=v pairs.
type cluster struct {
	ns, name, version string
	labels            map[string]string
	statusVersions    []string
}

func build(cs ...cluster) ([]clusterv1.Cluster, []controlplanev1.KubeadmControlPlane) {
	var clusters []clusterv1.Cluster
	var kcps []controlplanev1.KubeadmControlPlane
	for _, c := range cs {
		ns := c.ns
		if ns == "" {
			ns = "fleet"
		}
		clusters = append(clusters, clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.name, Labels: c.labels},
			Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: c.name + "-cp"}},
		})
		kcp := controlplanev1.KubeadmControlPlane{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.name + "-cp"},
			Spec:       controlplanev1.KubeadmControlPlaneSpec{Version: c.version},
		}
		for _, v := range c.statusVersions {
			kcp.Status.Versions = append(kcp.Status.Versions, clusterv1.StatusVersion{Version: v})
		}
		kcps = append(kcps, kcp)
	}
	return clusters, kcps
}

func upgrade(target string, mut ...func(*fleetv1.FleetUpgradeSpec)) *fleetv1.FleetUpgrade {
	fu := &fleetv1.FleetUpgrade{Spec: fleetv1.FleetUpgradeSpec{TargetVersion: target, MaxParallelClusters: 1}}
	for _, m := range mut {
		m(&fu.Spec)
	}
	return fu
}

// stages renders a plan as "stage(maxParallel): ns/a ns/b | ...".
func stages(p *plan.Plan) string {
	var parts []string
	for _, s := range p.Stages {
		var names []string
		for _, c := range s.Clusters {
			names = append(names, c.Name())
		}
		parts = append(parts, s.Name+"("+string(rune('0'+s.MaxParallel))+"): "+strings.Join(names, " "))
	}
	return strings.Join(parts, " | ")
}

func decisions(ds []plan.Decision) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Key.String()+"="+d.Reason)
	}
	return out
}

func TestCompute(t *testing.T) {
	mgmt := map[string]string{plan.ManagementLabel: "true"}
	tests := []struct {
		name     string
		clusters []cluster
		fu       *fleetv1.FleetUpgrade
		stages   string
		skipped  []string
		refused  []string
		messages []string // substrings of refusal messages, in order
	}{
		{
			name:     "no waves: one remaining stage ordered by name",
			clusters: []cluster{{name: "c", version: "v1.36.3"}, {name: "a", version: "v1.36.3"}, {ns: "alpha", name: "z", version: "v1.36.1"}},
			fu:       upgrade("v1.37.2"),
			stages:   "(remaining)(1): alpha/z fleet/a fleet/c",
		},
		{
			name: "canary first, waves in spec order, rest last, management after all",
			clusters: []cluster{
				{name: "mgmt", version: "v1.36.3", labels: mapOf("tier", "prod", plan.ManagementLabel, "true")},
				{name: "p2", version: "v1.36.3", labels: mapOf("tier", "prod")},
				{name: "p1", version: "v1.36.3", labels: mapOf("tier", "prod")},
				{name: "s1", version: "v1.36.3", labels: mapOf("tier", "staging")},
				{name: "x", version: "v1.36.3"},
				{name: "canary", version: "v1.36.3", labels: mapOf("tier", "staging")},
			},
			fu: upgrade("v1.37.2", func(s *fleetv1.FleetUpgradeSpec) {
				s.MaxParallelClusters = 2
				s.CanaryCluster = &fleetv1.ClusterReference{Namespace: "fleet", Name: "canary"}
				s.Waves = []fleetv1.Wave{
					{Name: "staging", MaxParallel: 5, ClusterSelector: metav1.LabelSelector{MatchLabels: mapOf("tier", "staging")}},
					{Name: "prod", MaxParallel: 1, ClusterSelector: metav1.LabelSelector{MatchLabels: mapOf("tier", "prod")}},
				}
			}),
			stages: "canary(1): fleet/canary | staging(1): fleet/s1 | prod(1): fleet/p1 fleet/p2 | (remaining)(1): fleet/x | (management)(1): fleet/mgmt",
		},
		{
			name:     "wave maxParallel capped by spec.maxParallelClusters and stage size",
			clusters: []cluster{{name: "a", version: "1.36.3"}, {name: "b", version: "1.36.3"}, {name: "c", version: "1.36.3"}},
			fu: upgrade("1.37.2", func(s *fleetv1.FleetUpgradeSpec) {
				s.MaxParallelClusters = 2
				s.Waves = []fleetv1.Wave{{Name: "all", MaxParallel: 10}}
			}),
			stages: "all(2): fleet/a fleet/b fleet/c",
		},
		{
			name:     "a cluster matched by two waves goes to the first",
			clusters: []cluster{{name: "a", version: "1.36.3", labels: mapOf("x", "1", "y", "1")}, {name: "b", version: "1.36.3", labels: mapOf("y", "1")}},
			fu: upgrade("1.37.2", func(s *fleetv1.FleetUpgradeSpec) {
				s.Waves = []fleetv1.Wave{
					{Name: "first", ClusterSelector: metav1.LabelSelector{MatchLabels: mapOf("x", "1")}},
					{Name: "second", ClusterSelector: metav1.LabelSelector{MatchLabels: mapOf("y", "1")}},
				}
			}),
			stages: "first(1): fleet/a | second(1): fleet/b",
		},
		{
			name:     "clusterSelector leaves others out",
			clusters: []cluster{{name: "a", version: "1.36.3", labels: mapOf("pick", "yes")}, {name: "b", version: "1.36.3"}},
			fu: upgrade("1.37.2", func(s *fleetv1.FleetUpgradeSpec) {
				s.ClusterSelector = metav1.LabelSelector{MatchLabels: mapOf("pick", "yes")}
			}),
			stages: "(remaining)(1): fleet/a",
		},
		{
			name: "at target skipped, too far behind refused, ahead refused",
			clusters: []cluster{
				{name: "done", version: "v1.37.2"},
				{name: "newer-patch", version: "v1.37.3"},
				{name: "old", version: "v1.35.4"},
				{name: "ahead", version: "v1.38.0"},
				{name: "ok", version: "v1.36.3"},
			},
			fu:       upgrade("v1.37.2"),
			stages:   "(remaining)(1): fleet/ok",
			skipped:  []string{"fleet/done=AlreadyAtTarget", "fleet/newer-patch=AlreadyAtTarget"},
			refused:  []string{"fleet/ahead=AheadOfTarget", "fleet/old=TooFarBehind"},
			messages: []string{"downgrades are not supported", "cluster fleet/old runs 1.35.4: upgrade it to 1.36 first; one minor version at a time"},
		},
		{
			name:     "mid-rollout control plane counts at its lowest version",
			clusters: []cluster{{name: "mixed", version: "v1.37.2", statusVersions: []string{"v1.36.3", "v1.37.2"}}},
			fu:       upgrade("v1.37.2"),
			stages:   "(remaining)(1): fleet/mixed",
		},
		{
			name:     "patch below the target in the same minor is planned",
			clusters: []cluster{{name: "a", version: "v1.37.1"}},
			fu:       upgrade("v1.37.2"),
			stages:   "(remaining)(1): fleet/a",
		},
		{
			name:     "fromVersion refuses clusters on another minor",
			clusters: []cluster{{name: "a", version: "v1.36.1"}, {name: "b", version: "v1.37.1"}},
			fu:       upgrade("v1.37.2", func(s *fleetv1.FleetUpgradeSpec) { s.FromVersion = "v1.36.3" }),
			stages:   "(remaining)(1): fleet/a",
			refused:  []string{"fleet/b=NotFromVersion"},
		},
		{
			name:     "only the management cluster",
			clusters: []cluster{{name: "mgmt", version: "v1.36.3", labels: mgmt}},
			fu:       upgrade("v1.37.2", func(s *fleetv1.FleetUpgradeSpec) { s.MaxParallelClusters = 3 }),
			stages:   "(management)(1): fleet/mgmt",
		},
		{
			name:     "nothing to do",
			clusters: []cluster{{name: "a", version: "v1.37.2"}},
			fu:       upgrade("v1.37.2"),
			stages:   "",
			skipped:  []string{"fleet/a=AlreadyAtTarget"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, kcps := build(tt.clusters...)
			p, err := plan.Compute(plan.Input{Upgrade: tt.fu, Clusters: cs, ControlPlanes: kcps})
			if err != nil {
				t.Fatalf("Compute: %v", err)
			}
			if got := stages(p); got != tt.stages {
				t.Errorf("stages:\n got %s\nwant %s", got, tt.stages)
			}
			if got := decisions(p.Skipped); !reflect.DeepEqual(got, tt.skipped) {
				t.Errorf("skipped: got %v, want %v", got, tt.skipped)
			}
			if got := decisions(p.Refused); !reflect.DeepEqual(got, tt.refused) {
				t.Errorf("refused: got %v, want %v", got, tt.refused)
			}
			for i, m := range tt.messages {
				if i >= len(p.Refused) || !strings.Contains(p.Refused[i].Message, m) {
					t.Errorf("refusal %d: want message containing %q, got %+v", i, m, p.Refused)
				}
			}
			// Deterministic: the same input in reverse order gives the same plan.
			rcs := append([]clusterv1.Cluster(nil), cs...)
			for i, j := 0, len(rcs)-1; i < j; i, j = i+1, j-1 {
				rcs[i], rcs[j] = rcs[j], rcs[i]
			}
			p2, err := plan.Compute(plan.Input{Upgrade: tt.fu, Clusters: rcs, ControlPlanes: kcps})
			if err != nil || !reflect.DeepEqual(p, p2) {
				t.Errorf("plan depends on input order:\n%+v\n%+v (err %v)", p, p2, err)
			}
		})
	}
}

func TestComputePlannedCluster(t *testing.T) {
	cs, kcps := build(cluster{name: "a", version: "1.36.3", labels: map[string]string{plan.ManagementLabel: "true"}})
	p, err := plan.Compute(plan.Input{Upgrade: upgrade("1.37.2"), Clusters: cs, ControlPlanes: kcps})
	if err != nil {
		t.Fatal(err)
	}
	want := []plan.Cluster{{
		Key:          types.NamespacedName{Namespace: "fleet", Name: "a"},
		ControlPlane: types.NamespacedName{Namespace: "fleet", Name: "a-cp"},
		FromVersion:  "v1.36.3",
		ToVersion:    "v1.37.2",
		Management:   true,
	}}
	if got := p.Clusters(); !reflect.DeepEqual(got, want) {
		t.Errorf("Clusters:\n got %+v\nwant %+v", got, want)
	}
	if got := p.StageOf(want[0].Key); got != plan.ManagementStage {
		t.Errorf("StageOf = %q, want %q", got, plan.ManagementStage)
	}
	if p.Target != "v1.37.2" {
		t.Errorf("Target = %q", p.Target)
	}
}

func TestComputeNoControlPlane(t *testing.T) {
	cs, _ := build(cluster{name: "a", version: "1.36.3"}, cluster{name: "b", version: "1.36.3"})
	cs[1].Spec.ControlPlaneRef.Kind = "TalosControlPlane"
	p, err := plan.Compute(plan.Input{Upgrade: upgrade("1.37.2"), Clusters: cs})
	if err != nil {
		t.Fatal(err)
	}
	if got := decisions(p.Refused); !reflect.DeepEqual(got, []string{"fleet/a=NoKubeadmControlPlane", "fleet/b=NoKubeadmControlPlane"}) {
		t.Errorf("refused = %v", got)
	}
}

func TestComputeInvalidSpec(t *testing.T) {
	mgmt := map[string]string{plan.ManagementLabel: "true"}
	bogus := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}
	tests := []struct {
		name     string
		clusters []cluster
		fu       *fleetv1.FleetUpgrade
		// errs are the field errors as "path type".
		errs []string
		says string
	}{
		{"bad target", nil, upgrade("latest"), []string{"spec.targetVersion FieldValueInvalid"},
			`invalid FleetUpgrade spec: spec.targetVersion: parsing version "latest": `},
		{"canary missing", []cluster{{name: "a", version: "1.36.3"}},
			upgrade("1.37.2", func(s *fleetv1.FleetUpgradeSpec) {
				s.CanaryCluster = &fleetv1.ClusterReference{Namespace: "fleet", Name: "nope"}
			}), []string{"spec.canaryCluster FieldValueNotFound"},
			"invalid FleetUpgrade spec: spec.canaryCluster fleet/nope does not exist or does not match clusterSelector"},
		{"canary not selected", []cluster{{name: "a", version: "1.36.3"}},
			upgrade("1.37.2", func(s *fleetv1.FleetUpgradeSpec) {
				s.ClusterSelector = metav1.LabelSelector{MatchLabels: mapOf("x", "y")}
				s.CanaryCluster = &fleetv1.ClusterReference{Namespace: "fleet", Name: "a"}
			}), []string{"spec.canaryCluster FieldValueNotFound"}, "fleet/a does not exist or does not match"},
		{"canary is management", []cluster{{name: "m", version: "1.36.3", labels: mgmt}},
			upgrade("1.37.2", func(s *fleetv1.FleetUpgradeSpec) {
				s.CanaryCluster = &fleetv1.ClusterReference{Namespace: "fleet", Name: "m"}
			}), []string{"spec.canaryCluster FieldValueForbidden"},
			"spec.canaryCluster fleet/m is the management cluster, which is always upgraded last"},
		{"bad wave selector", nil,
			upgrade("1.37.2", func(s *fleetv1.FleetUpgradeSpec) {
				s.Waves = []fleetv1.Wave{{Name: "w", ClusterSelector: bogus}}
			}), []string{"spec.waves[0].clusterSelector FieldValueInvalid"}, `spec.waves[0].clusterSelector: "Bogus" is not a valid`},
		{"every field that is wrong", []cluster{{name: "a", version: "1.36.3"}},
			upgrade("latest", func(s *fleetv1.FleetUpgradeSpec) {
				s.FromVersion = "1.36"
				s.Waves = []fleetv1.Wave{{Name: "w", ClusterSelector: bogus}}
				s.CanaryCluster = &fleetv1.ClusterReference{Namespace: "fleet", Name: "nope"}
			}), []string{
				"spec.targetVersion FieldValueInvalid", "spec.fromVersion FieldValueInvalid",
				"spec.waves[0].clusterSelector FieldValueInvalid", "spec.canaryCluster FieldValueNotFound",
			}, `parsing version "1.36"`},
		{"no canary check without a selector", []cluster{{name: "a", version: "1.36.3"}},
			upgrade("1.37.2", func(s *fleetv1.FleetUpgradeSpec) {
				s.ClusterSelector = bogus
				s.CanaryCluster = &fleetv1.ClusterReference{Namespace: "fleet", Name: "a"}
			}), []string{"spec.clusterSelector FieldValueInvalid"}, "spec.clusterSelector: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, kcps := build(tt.clusters...)
			_, err := plan.Compute(plan.Input{Upgrade: tt.fu, Clusters: cs, ControlPlanes: kcps})
			var invalid *plan.InvalidSpecError
			if !errors.Is(err, plan.ErrInvalidSpec) || !errors.As(err, &invalid) {
				t.Fatalf("err = %v, want an InvalidSpecError", err)
			}
			var got []string
			for _, fe := range invalid.Errs {
				got = append(got, fe.Field+" "+string(fe.Type))
			}
			if !reflect.DeepEqual(got, tt.errs) {
				t.Errorf("field errors = %q, want %q", got, tt.errs)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("err = %v, want it to say %q", err, tt.says)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	// The caller's name for the field replaces the spec's path.
	_, err := plan.Compute(plan.Input{Upgrade: upgrade("1.37.2", func(s *fleetv1.FleetUpgradeSpec) {
		s.CanaryCluster = &fleetv1.ClusterReference{Namespace: "fleet", Name: "nope"}
	})})
	var invalid *plan.InvalidSpecError
	if !errors.As(err, &invalid) || len(invalid.Errs) != 1 {
		t.Fatalf("err = %v, want one field error", err)
	}
	if got, want := plan.Describe("canaryCluster", invalid.Errs[0]), "canaryCluster fleet/nope does not exist or does not match clusterSelector"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

func mapOf(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
