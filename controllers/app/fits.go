package app

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
)

// Fitter tells, before an App's size changes, whether the fleet has room
// for it. The Releaser asks it on a scale or a change of plan, so that a
// size no cluster can hold is refused instead of deployed where it does
// not fit.
type Fitter interface {
	// Fits returns "" when the fleet has room for the App at the size its
	// spec asks: its Placement does not grow, its cluster's pool holds the
	// larger size, or the scheduler finds a cluster that would (the App
	// controller moves the App there). Otherwise it says why no cluster
	// can hold the App. It changes nothing; an error is the scheduler's
	// or the API's, not a verdict.
	Fits(ctx context.Context, app *platformv1alpha1.App) (string, error)
}

var _ Fitter = SchedulerPlacer{}

// Fits implements Fitter.
func (p SchedulerPlacer) Fits(ctx context.Context, app *platformv1alpha1.App) (string, error) {
	want := wantedSize(app)
	existing := &schedulingv1alpha1.Placement{}
	err := p.Client.Get(ctx, types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, existing)
	switch {
	case apierrors.IsNotFound(err):
		// Not placed yet: the scheduler says whether any cluster would.
	case err != nil:
		return "", fmt.Errorf("reading placement: %w", err)
	default:
		if !grows(sizeOf(&existing.Spec), want) {
			return "", nil
		}
		cc := &schedulingv1alpha1.ClusterCapacity{}
		if err := p.Client.Get(ctx, types.NamespacedName{Name: existing.Spec.Cluster}, cc); apierrors.IsNotFound(err) {
			cc = nil
		} else if err != nil {
			return "", fmt.Errorf("reading the capacity of cluster %s: %w", existing.Spec.Cluster, err)
		}
		if reason, _ := leaveReason(cc, &existing.Spec, want, time.Now()); reason == "" {
			return "", nil
		}
	}
	review, err := p.review(ctx, app, want, false)
	if err != nil {
		return "", err
	}
	if review.Status.Schedulable {
		return "", nil
	}
	return fmt.Sprintf("no cluster of the fleet can hold %s at %s: %s", app.Name, want, review.Status.Message), nil
}

// grows reports whether want asks for more instances, CPU or memory in
// all than has.
func grows(has, want size) bool {
	total := func(s size) (int64, int64) {
		return int64(s.Replicas) * s.Resources.CPU.MilliValue(), int64(s.Replicas) * s.Resources.Memory.Value()
	}
	hc, hm := total(has)
	wc, wm := total(want)
	return want.Replicas > has.Replicas || wc > hc || wm > hm
}
