// Package validation checks scheduling.bex.co objects on their way into
// bex-apiserver and reports each problem with its field path, so that a bad
// Placement or PlacementReview is refused with a message that names the
// field.
package validation
