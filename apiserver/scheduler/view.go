package scheduler

import (
	"context"
	"errors"
	"fmt"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/internal/fleetstate"
)

// PlacementTotals reports what the stored Placements request.
//
// Requested returns a fresh map the caller owns, or an error while the
// totals are not known yet (before the first full read of the storage). It
// is safe for concurrent use.
type PlacementTotals interface {
	Requested() (Requested, error)
}

// View is the live scheduling view of the fleet: the fleet's clusters plus
// what the Placements request. It is safe for concurrent use.
type View struct {
	fleet      fleetstate.Source
	placements PlacementTotals
	strategy   string
}

// NewView returns a view that scores with strategy (v1alpha1.StrategyBinPack
// or v1alpha1.StrategySpread).
func NewView(fleet fleetstate.Source, placements PlacementTotals, strategy string) (*View, error) {
	if fleet == nil || placements == nil {
		return nil, errors.New("scheduler: view needs a fleet and placement totals")
	}
	if strategy != v1alpha1.StrategyBinPack && strategy != v1alpha1.StrategySpread {
		return nil, fmt.Errorf("scheduler: unknown strategy %q", strategy)
	}
	return &View{fleet: fleet, placements: placements, strategy: strategy}, nil
}

// Capacities returns the ClusterCapacity of every cluster, sorted by name.
func (v *View) Capacities(ctx context.Context) ([]scheduling.ClusterCapacity, error) {
	clusters, err := v.fleet.Clusters(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the fleet: %w", err)
	}
	req, err := v.placements.Requested()
	if err != nil {
		return nil, fmt.Errorf("reading placements: %w", err)
	}
	return Capacities(clusters, req), nil
}

// Review answers a PlacementReview.
func (v *View) Review(ctx context.Context, spec *scheduling.PlacementReviewSpec) (scheduling.PlacementReviewStatus, error) {
	caps, err := v.Capacities(ctx)
	if err != nil {
		return scheduling.PlacementReviewStatus{}, err
	}
	return Review(caps, spec, v.strategy), nil
}
