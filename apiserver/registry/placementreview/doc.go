// Package placementreview is the create-only REST storage of
// PlacementReview: a create runs admission and validation, asks the
// scheduler, and returns the review with its status. Nothing is stored,
// like a SubjectAccessReview.
package placementreview
