package app

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
)

// Placement is the outcome of placing an App.
type Placement struct {
	// Placed is true when the App has a Placement; Cluster and Pool say where.
	Placed        bool
	Cluster, Pool string
	// Message explains the outcome: the score, or why no cluster fits.
	Message string
}

// Placer places Apps on workload clusters. Calls are idempotent: an App
// that has a Placement keeps it.
type Placer interface {
	// Place returns the App's Placement, asking the scheduler (a
	// PlacementReview) and recording its choice (a Placement named like the
	// App, in its namespace) when there is none yet. An unschedulable App
	// is not an error: Placed is false and Message says why.
	Place(ctx context.Context, app *platformv1alpha1.App) (Placement, error)
	// Unplace deletes the App's Placement; a missing one is fine.
	Unplace(ctx context.Context, app *platformv1alpha1.App) error
}

// SchedulerPlacer is the Placer over the scheduling.bex.co API.
type SchedulerPlacer struct {
	Client client.Client
}

var _ Placer = SchedulerPlacer{}

// Place implements Placer.
func (p SchedulerPlacer) Place(ctx context.Context, app *platformv1alpha1.App) (Placement, error) {
	existing := &schedulingv1alpha1.Placement{}
	err := p.Client.Get(ctx, types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, existing)
	if err == nil {
		return Placement{Placed: true, Cluster: existing.Spec.Cluster, Pool: existing.Spec.Pool,
			Message: fmt.Sprintf("placed on %s/%s", existing.Spec.Cluster, existing.Spec.Pool)}, nil
	}
	if !apierrors.IsNotFound(err) {
		return Placement{}, fmt.Errorf("reading placement: %w", err)
	}
	review := &schedulingv1alpha1.PlacementReview{Spec: schedulingv1alpha1.PlacementReviewSpec{
		App:         app.Name,
		Replicas:    webReplicas(app),
		Constraints: schedulingv1alpha1.PlacementConstraints{Plan: string(app.Spec.Plan)},
	}}
	if r := app.Spec.Resources; r != nil {
		if r.CPU != nil {
			review.Spec.Resources.CPU = *r.CPU
		}
		if r.Memory != nil {
			review.Spec.Resources.Memory = *r.Memory
		}
	}
	if err := p.Client.Create(ctx, review); err != nil {
		return Placement{}, fmt.Errorf("asking the scheduler: %w", err)
	}
	st := review.Status
	if !st.Schedulable {
		return Placement{Message: st.Message}, nil
	}
	placement := &schedulingv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name},
		Spec: schedulingv1alpha1.PlacementSpec{
			App: app.Name, Cluster: st.Cluster, Pool: st.Pool, Plan: string(app.Spec.Plan),
			Replicas: review.Spec.Replicas, Resources: st.Resources,
		},
	}
	if err := p.Client.Create(ctx, placement); err != nil && !apierrors.IsAlreadyExists(err) {
		return Placement{}, fmt.Errorf("recording placement: %w", err)
	}
	return Placement{Placed: true, Cluster: st.Cluster, Pool: st.Pool,
		Message: fmt.Sprintf("placed on %s/%s (score %d, %s)", st.Cluster, st.Pool, st.Score, st.Strategy)}, nil
}

// Unplace implements Placer.
func (p SchedulerPlacer) Unplace(ctx context.Context, app *platformv1alpha1.App) error {
	pl := &schedulingv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name}}
	if err := p.Client.Delete(ctx, pl); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting placement: %w", err)
	}
	return nil
}

// webReplicas is how many web instances the App asks for (1 by default).
func webReplicas(app *platformv1alpha1.App) int32 {
	for _, p := range app.Spec.Processes {
		if p.Name == "web" && p.Replicas != nil {
			return *p.Replicas
		}
	}
	return 1
}
