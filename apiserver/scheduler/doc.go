// Package scheduler is the scheduling logic of bex-apiserver, apart from the
// API machinery: it turns a fleet snapshot (internal/fleetstate) and the
// resources the stored Placements request into ClusterCapacity objects, and
// answers a PlacementReview over those objects with filters (health,
// mid-upgrade, cordon, region, plan, pool, free CPU, memory and pods) and a
// score (BinPack or Spread). Reservations, its assume cache, hold the
// chosen pool's room for a review the caller will record as a Placement
// until the placement index tells that Placement changed, so that
// concurrent reviews do not over-commit a pool. Everything is
// deterministic: candidates are sorted by cluster then pool, and ties go
// to the first by name. Every rejection carries a reason and a message
// with the figures.
package scheduler
