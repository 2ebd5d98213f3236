// Package placement is the REST storage of Placements: the generic registry
// over etcd (under bex-apiserver's own prefix), with a strategy that
// validates with field paths, a table for kubectl, and an Index that keeps
// the sum of what the Placements request per cluster and pool for the
// scheduler, and tells its reservations of each Placement's change.
package placement
