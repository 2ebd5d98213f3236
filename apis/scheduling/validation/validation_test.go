package validation

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/apis/scheduling"
)

func TestValidatePlacementUpdateMove(t *testing.T) {
	old := &scheduling.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "shop", ResourceVersion: "1"},
		Spec:       scheduling.PlacementSpec{App: "shop", Cluster: "alpha", Pool: "workers", Replicas: 1},
	}
	for _, tc := range []struct {
		name   string
		change func(*scheduling.PlacementSpec)
		// wantErr names the fields refused; "" means valid.
		wantErr string
	}{
		{name: "a move with its record", change: func(s *scheduling.PlacementSpec) {
			s.MovedFrom = &scheduling.PlacementMove{Cluster: s.Cluster, Pool: s.Pool, Reason: "Cordoned", Message: "alpha is cordoned"}
			s.Cluster, s.Pool, s.Replicas = "beta", "big", 3
		}},
		{name: "a move without a record", change: func(s *scheduling.PlacementSpec) { s.Cluster = "beta" }},
		{name: "a record without its reason or pool", change: func(s *scheduling.PlacementSpec) {
			s.MovedFrom = &scheduling.PlacementMove{Cluster: "Alpha"}
			s.Cluster = "beta"
		}, wantErr: "spec.movedFrom.cluster spec.movedFrom.pool spec.movedFrom.reason"},
		{name: "another app", change: func(s *scheduling.PlacementSpec) { s.App = "other" }, wantErr: "spec.app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := old.DeepCopy()
			tc.change(&p.Spec)
			errs := ValidatePlacementUpdate(p, old)
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
			}
			if got := strings.Join(fields, " "); got != tc.wantErr {
				t.Fatalf("refused fields %q, want %q (%v)", got, tc.wantErr, errs)
			}
		})
	}
}

func TestValidatePlacementReviewReserve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reserve *scheduling.PlacementRef
		// wantErr names the fields refused; "" means valid.
		wantErr string
	}{
		{name: "none"},
		{name: "a Placement", reserve: &scheduling.PlacementRef{Namespace: "tenant-a", Name: "shop"}},
		{name: "no namespace", reserve: &scheduling.PlacementRef{Name: "shop"}, wantErr: "spec.reserve.namespace"},
		{name: "bad names", reserve: &scheduling.PlacementRef{Namespace: "Tenant", Name: "Shop"}, wantErr: "spec.reserve.namespace spec.reserve.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &scheduling.PlacementReview{Spec: scheduling.PlacementReviewSpec{
				Replicas: 1, Constraints: scheduling.PlacementConstraints{Plan: "starter"}, Reserve: tc.reserve,
			}}
			var fields []string
			for _, e := range ValidatePlacementReview(r) {
				fields = append(fields, e.Field)
			}
			if got := strings.Join(fields, " "); got != tc.wantErr {
				t.Fatalf("refused fields %q, want %q", got, tc.wantErr)
			}
		})
	}
}
