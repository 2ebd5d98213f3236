package platformtest

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// HasCondition is a check for Eventually's conditions: nil when conds hold
// a condition of type typ with status and reason (each "" for any), else an
// error that says what conds hold of typ instead.
func HasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(conds, typ)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition", typ)
	case (status == "" || c.Status == status) && (reason == "" || c.Reason == reason):
		return nil
	}
	return fmt.Errorf("%s is %s (%s): %s", typ, c.Status, c.Reason, c.Message)
}

// PlaceApp writes the status the App controller writes when it placed the
// App tenant/app on cluster, or (placed false) found no cluster for it:
// status.cluster and the Placed condition, True or False with message.
func PlaceApp(ctx context.Context, c client.Client, tenant, app, cluster string, placed bool, message string) error {
	obj := &platformv1alpha1.App{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: app}, obj); err != nil {
		return fmt.Errorf("reading app %s/%s: %w", tenant, app, err)
	}
	cond := metav1.Condition{Type: platformv1alpha1.AppPlacedCondition, Status: metav1.ConditionTrue, Reason: platformv1alpha1.AppScheduledReason, Message: message}
	if !placed {
		cond.Status, cond.Reason = metav1.ConditionFalse, platformv1alpha1.AppUnschedulableReason
	}
	meta.SetStatusCondition(&obj.Status.Conditions, cond)
	obj.Status.Cluster = cluster
	if err := c.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("writing the placement of app %s/%s: %w", tenant, app, err)
	}
	return nil
}
