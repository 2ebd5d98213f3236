package scheduler

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/internal/fleetstate"
)

// BenchmarkReview100Clusters is the pure scheduling cost of one review over
// 100 clusters with 10,000 placements, without any API machinery.
func BenchmarkReview100Clusters(b *testing.B) {
	var fleet []fleetstate.Cluster
	req := Requested{}
	for i := range 100 {
		name := fmt.Sprintf("c%03d", i)
		fleet = append(fleet, fleetstate.Cluster{Name: name, Region: "eu", Healthy: true, Pools: []fleetstate.Pool{pool("workers", "48", "192Gi", 330)}})
		for range 100 {
			req.Add(&scheduling.PlacementSpec{Cluster: name, Pool: "workers", Replicas: 1,
				Resources: scheduling.Resources{CPU: resource.MustParse("100m"), Memory: resource.MustParse("128Mi")}})
		}
	}
	s := &scheduling.PlacementReviewSpec{Replicas: 2, Constraints: scheduling.PlacementConstraints{Plan: "standard"}}
	b.ResetTimer()
	for b.Loop() {
		st := Review(Capacities(fleet, req), s, v1alpha1.StrategyBinPack)
		if !st.Schedulable {
			b.Fatal(st.Message)
		}
	}
}

// BenchmarkViewReview100Clusters is a review through a View whose fleet
// and placements did not change since the last one: the scoring over the
// snapshot, the cost a review has at a steady state.
func BenchmarkViewReview100Clusters(b *testing.B) {
	fleet := &countingFleet{versioned: true}
	totals := &fixedTotals{req: Requested{}}
	for i := range 100 {
		name := fmt.Sprintf("c%03d", i)
		fleet.clusters = append(fleet.clusters, fleetstate.Cluster{Name: name, Region: "eu", Healthy: true, Pools: []fleetstate.Pool{pool("workers", "48", "192Gi", 330)}})
		for range 100 {
			totals.add(&scheduling.PlacementSpec{Cluster: name, Pool: "workers", Replicas: 1,
				Resources: scheduling.Resources{CPU: resource.MustParse("100m"), Memory: resource.MustParse("128Mi")}})
		}
	}
	v, err := NewView(fleet, totals, nil, v1alpha1.StrategyBinPack)
	if err != nil {
		b.Fatal(err)
	}
	s := &scheduling.PlacementReviewSpec{Replicas: 2, Constraints: scheduling.PlacementConstraints{Plan: "standard"}}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		st, err := v.Review(ctx, s)
		if err != nil || !st.Schedulable {
			b.Fatal(err, st.Message)
		}
	}
}
