package placementreview

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/validation"
)

// Reviewer answers reviews (scheduler.View implements it). A spec with
// Reserve holds the chosen pool's room for that Placement; the REST
// passes none for a dry run.
type Reviewer interface {
	Review(ctx context.Context, spec *scheduling.PlacementReviewSpec) (scheduling.PlacementReviewStatus, error)
}

// REST serves PlacementReview.
type REST struct {
	reviewer Reviewer
}

var (
	_ rest.Creater              = (*REST)(nil)
	_ rest.Scoper               = (*REST)(nil)
	_ rest.SingularNameProvider = (*REST)(nil)
	_ rest.Storage              = (*REST)(nil)
)

// NewREST returns the PlacementReview storage over reviewer.
func NewREST(reviewer Reviewer) (*REST, error) {
	if reviewer == nil {
		return nil, errors.New("placementreview: nil reviewer")
	}
	return &REST{reviewer: reviewer}, nil
}

// New returns an empty PlacementReview.
func (*REST) New() runtime.Object { return &scheduling.PlacementReview{} }

// Destroy releases nothing.
func (*REST) Destroy() {}

// NamespaceScoped is false.
func (*REST) NamespaceScoped() bool { return false }

// GetSingularName returns "placementreview".
func (*REST) GetSingularName() string { return "placementreview" }

// Create answers the review in its status. A review with spec.reserve
// holds the chosen pool's room for that Placement (Reviewer), unless it is
// a dry run: then it only asks.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	review, ok := obj.(*scheduling.PlacementReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a PlacementReview: %T", obj))
	}
	if errs := validation.ValidatePlacementReview(review); len(errs) > 0 {
		return nil, apierrors.NewInvalid(scheduling.Kind("PlacementReview"), review.Name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	spec := &review.Spec
	if opts != nil && len(opts.DryRun) > 0 && spec.Reserve != nil {
		spec = spec.DeepCopy()
		spec.Reserve = nil
	}
	status, err := r.reviewer.Review(ctx, spec)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	review.Status = status
	return review, nil
}
