package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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

// Versioned is implemented by placement totals (and, as
// fleetstate.Versioned, by fleet sources) that can tell when their answer
// changed: only when Version does. Version only grows; ok is false when
// the implementation cannot tell.
type Versioned interface {
	Version() (v uint64, ok bool)
}

// Notifier is implemented by placement totals (and, as
// fleetstate.Notifier, by fleet sources) that tell when their Version
// moves: Notify calls changed after each change until ctx ends, returns at
// once, and changed must not block.
type Notifier interface {
	Notify(ctx context.Context, changed func())
}

// maxSnapshotAge bounds how long a view keeps the fleet's capacities
// while no version moved: some of a cluster's state depends on the clock
// alone (a workload cluster whose node reads failed counts as unhealthy
// for a grace period after the failure).
const maxSnapshotAge = time.Second

// View is the live scheduling view of the fleet: the fleet's clusters plus
// what the Placements request. It is safe for concurrent use.
//
// When the fleet and the totals are both Versioned, the view computes the
// capacities once per change of either (and at least every
// maxSnapshotAge), so that a review costs the scoring alone, not a pass
// over every cluster's objects and nodes.
type View struct {
	fleet      fleetstate.Source
	placements PlacementTotals
	// reservations, when not nil, hold room for the Placements being
	// written; nil: reviews reserve nothing.
	reservations *Reservations
	strategy     string
	now          func() time.Time

	mu   sync.Mutex
	snap *snapshot
}

// snapshot is the capacities computed at the given versions. Its caps are
// shared by concurrent reviews: read them, never write them.
type snapshot struct {
	fleet, placements uint64
	at                time.Time
	caps              []scheduling.ClusterCapacity
}

// NewView returns a view that scores with strategy (v1alpha1.StrategyBinPack
// or v1alpha1.StrategySpread). With reservations, a review that names the
// Placement it will be recorded as (spec.reserve) holds the chosen pool's
// room there until placements, whose totals must then tell their
// versions (Versioned), count that Placement's change (Reservations.Seen);
// nil reserves nothing.
func NewView(fleet fleetstate.Source, placements PlacementTotals, reservations *Reservations, strategy string) (*View, error) {
	if fleet == nil || placements == nil {
		return nil, errors.New("scheduler: view needs a fleet and placement totals")
	}
	if strategy != v1alpha1.StrategyBinPack && strategy != v1alpha1.StrategySpread {
		return nil, fmt.Errorf("scheduler: unknown strategy %q", strategy)
	}
	if _, ok := placements.(Versioned); reservations != nil && !ok {
		return nil, errors.New("scheduler: reservations need placement totals that tell their version")
	}
	return &View{fleet: fleet, placements: placements, reservations: reservations, strategy: strategy, now: time.Now}, nil
}

var (
	_ Versioned = (*View)(nil)
	_ Notifier  = (*View)(nil)
)

// Version moves whenever the fleet's or the placements' does; ok only when
// both can tell. Capacities changes only when Version does, and with the
// clock for state that depends on it alone (which the fleet tells of as a
// change when it can).
func (v *View) Version() (uint64, bool) {
	fv, fok := version(v.fleet)
	pv, pok := version(v.placements)
	return fv + pv, fok && pok
}

// Notify calls changed after each change of the fleet or the placements
// that tell of theirs (fleetstate.Notifier, Notifier), until ctx ends.
func (v *View) Notify(ctx context.Context, changed func()) {
	if n, ok := v.fleet.(fleetstate.Notifier); ok {
		n.Notify(ctx, changed)
	}
	if n, ok := v.placements.(Notifier); ok {
		n.Notify(ctx, changed)
	}
}

// Capacities returns the ClusterCapacity of every cluster, sorted by name,
// as copies the caller owns.
func (v *View) Capacities(ctx context.Context) ([]scheduling.ClusterCapacity, error) {
	caps, _, err := v.capacities(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]scheduling.ClusterCapacity, len(caps))
	for i := range caps {
		caps[i].DeepCopyInto(&out[i])
	}
	return out, nil
}

// capacities returns the capacities, from the snapshot while it holds,
// and the placements version they count every change up to (0 when the
// totals cannot tell). The result is shared: read it, never write it.
func (v *View) capacities(ctx context.Context) ([]scheduling.ClusterCapacity, uint64, error) {
	// Versions are read before the state: a change that lands while the
	// capacities are computed moves a version past the snapshot's, and the
	// next read computes again.
	fleetVersion, fok := version(v.fleet)
	placementsVersion, pok := version(v.placements)
	if !fok || !pok {
		caps, err := v.compute(ctx)
		return caps, placementsVersion, err
	}
	now := v.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.snap; s != nil && s.fleet == fleetVersion && s.placements == placementsVersion && now.Sub(s.at) < maxSnapshotAge {
		return s.caps, s.placements, nil
	}
	caps, err := v.compute(ctx)
	if err != nil {
		return nil, 0, err
	}
	v.snap = &snapshot{fleet: fleetVersion, placements: placementsVersion, at: now, caps: caps}
	return caps, placementsVersion, nil
}

// version returns x's version when it can tell one.
func version(x any) (uint64, bool) {
	if vs, ok := x.(Versioned); ok {
		return vs.Version()
	}
	return 0, false
}

func (v *View) compute(ctx context.Context) ([]scheduling.ClusterCapacity, error) {
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

// Review answers a PlacementReview, counting the room that reservations
// hold. A review with spec.reserve, when schedulable, then holds the
// chosen pool's room for that Placement (replacing its earlier
// reservation), and one that is not ends it; such reviews are answered
// one at a time.
func (v *View) Review(ctx context.Context, spec *scheduling.PlacementReviewSpec) (scheduling.PlacementReviewStatus, error) {
	caps, pv, err := v.capacities(ctx)
	if err != nil {
		return scheduling.PlacementReviewStatus{}, err
	}
	r := v.reservations
	if r == nil {
		return Review(caps, spec, v.strategy), nil
	}
	now := v.now()
	var key PlacementKey
	if ref := spec.Reserve; ref != nil {
		key = PlacementKey{Namespace: ref.Namespace, Name: ref.Name}
	}
	r.mu.Lock()
	held := r.extra(pv, now, key)
	if spec.Reserve == nil {
		r.mu.Unlock()
		return review(caps, held, spec, v.strategy), nil
	}
	defer r.mu.Unlock()
	st := review(caps, held, spec, v.strategy)
	if st.Schedulable {
		r.reserve(key, PoolKey{Cluster: st.Cluster, Pool: st.Pool}, times(st.Resources, spec.Replicas), pv, now)
	} else {
		r.release(key)
	}
	return st, nil
}
