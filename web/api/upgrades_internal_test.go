package api

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/internal/upgrade/plan"
)

// TestInvalidPlan: the planner's field errors are answered on the request's
// field of the first, every one in the message on the request's names.
func TestInvalidPlan(t *testing.T) {
	mgmt := clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "mgmt", Labels: map[string]string{plan.ManagementLabel: "true"}}}
	for _, tc := range []struct {
		name       string
		spec       fleetv1.FleetUpgradeSpec
		field, say string
	}{
		{"two fields", fleetv1.FleetUpgradeSpec{TargetVersion: "latest", CanaryCluster: &fleetv1.ClusterReference{Namespace: "fleet", Name: "nope"}},
			"targetVersion", `targetVersion: parsing version "latest": ` +
				`could not parse "latest" as version; canaryCluster fleet/nope does not exist or does not match clusterSelector`},
		{"a wave's selector", fleetv1.FleetUpgradeSpec{TargetVersion: "v1.37.2", Waves: []fleetv1.Wave{{Name: "eu"}, {Name: "us",
			ClusterSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}}}},
			"waves[1].clusterSelector", `waves[1].clusterSelector: "Bogus" is not a valid label selector operator`},
		{"the management cluster as canary", fleetv1.FleetUpgradeSpec{TargetVersion: "v1.37.2", CanaryCluster: &fleetv1.ClusterReference{Namespace: "fleet", Name: "mgmt"}},
			"canaryCluster", "canaryCluster fleet/mgmt is the management cluster, which is always upgraded last"},
	} {
		_, err := plan.Compute(plan.Input{Upgrade: &fleetv1.FleetUpgrade{Spec: tc.spec}, Clusters: []clusterv1.Cluster{mgmt}})
		var invalidSpec *plan.InvalidSpecError
		if !errors.As(err, &invalidSpec) {
			t.Fatalf("%s: Compute = %v, want an InvalidSpecError", tc.name, err)
		}
		var he *httpError
		if !errors.As(invalidPlan(invalidSpec.Errs), &he) || he.status != 422 || he.field != tc.field || he.message != tc.say {
			t.Errorf("%s: %+v, want 422 on %q saying %q", tc.name, he, tc.field, tc.say)
		}
	}
}

// TestInvalidUpgrade: the apiserver's causes are answered on the request's
// field of the first it has, without the path its schema errors repeat
// and with the spec's field names in CEL messages written as the request's.
func TestInvalidUpgrade(t *testing.T) {
	gk := fleetv1.GroupVersion.WithKind("FleetUpgrade").GroupKind()
	for _, tc := range []struct {
		name       string
		errs       field.ErrorList
		field, say string
	}{
		{"schema and CEL", field.ErrorList{
			field.Invalid(field.NewPath("metadata", "x"), "y", "not the request's"),
			field.Invalid(field.NewPath("spec.waves[0].name"), "EU_1", "spec.waves[0].name in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"),
			field.Invalid(field.NewPath("spec", "targetVersion"), "v1.37.2", "must be exactly one minor version above spec.fromVersion"),
		}, "waves[0].name", `the cluster refused the fleet upgrade: metadata.x: "y": not the request's; ` +
			`waves[0].name: "EU_1": should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'; ` +
			`targetVersion: "v1.37.2": must be exactly one minor version above fromVersion`},
		{"no request field", field.ErrorList{field.Required(field.NewPath("spec"), "")},
			"targetVersion", "the cluster refused the fleet upgrade: spec: Required value"},
	} {
		var he *httpError
		if !errors.As(invalidUpgrade(apierrors.NewInvalid(gk, "x", tc.errs)), &he) || he.status != 422 || he.field != tc.field || he.message != tc.say {
			t.Errorf("%s: %+v, want 422 on %q saying %q", tc.name, he, tc.field, tc.say)
		}
	}
}
