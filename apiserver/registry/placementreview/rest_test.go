package placementreview

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/apis/scheduling"
)

// recordingReviewer keeps the spec of the last review.
type recordingReviewer struct {
	last *scheduling.PlacementReviewSpec
}

func (r *recordingReviewer) Review(_ context.Context, spec *scheduling.PlacementReviewSpec) (scheduling.PlacementReviewStatus, error) {
	r.last = spec.DeepCopy()
	return scheduling.PlacementReviewStatus{Schedulable: true}, nil
}

// TestDryRunReservesNothing: a review that names its Placement reserves
// (the reviewer is given spec.reserve), unless it is a dry run.
func TestDryRunReservesNothing(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        *metav1.CreateOptions
		wantReserve bool
	}{
		{name: "create", opts: &metav1.CreateOptions{}, wantReserve: true},
		{name: "dry run", opts: &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := &recordingReviewer{}
			r, err := NewREST(rev)
			if err != nil {
				t.Fatal(err)
			}
			review := &scheduling.PlacementReview{Spec: scheduling.PlacementReviewSpec{
				Replicas:  1,
				Resources: scheduling.Resources{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
				Reserve:   &scheduling.PlacementRef{Namespace: "tenant-a", Name: "shop"},
			}}
			if _, err := r.Create(context.Background(), review, nil, tc.opts); err != nil {
				t.Fatal(err)
			}
			if got := rev.last.Reserve != nil; got != tc.wantReserve {
				t.Errorf("reviewer given a reservation: %v, want %v", got, tc.wantReserve)
			}
		})
	}
}
