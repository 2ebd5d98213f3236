package app

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// setConditions computes every condition of the App from the scope.
func setConditions(s *scope) {
	setBuiltCondition(s)
	setReleasedCondition(s)
	setPlacedCondition(s)
	setReadyCondition(s)
}

func setPlacedCondition(s *scope) {
	switch {
	case !s.placementObserved:
		meta.RemoveStatusCondition(&s.app.Status.Conditions, platformv1alpha1.AppPlacedCondition)
	case s.placement.Placed:
		setCondition(s, platformv1alpha1.AppPlacedCondition, metav1.ConditionTrue, platformv1alpha1.AppScheduledReason, s.placement.Message)
	default:
		setCondition(s, platformv1alpha1.AppPlacedCondition, metav1.ConditionFalse, platformv1alpha1.AppUnschedulableReason,
			"No workload cluster can take the app: "+s.placement.Message)
	}
}

func setCondition(s *scope, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.app.Status.Conditions, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: s.app.Generation,
	})
}

// keepsServing says what serves while a newer build or release failed.
func keepsServing(s *scope) string {
	if s.app.Status.CurrentRelease == 0 {
		return "nothing was released yet"
	}
	return "v" + strconv.FormatInt(s.app.Status.CurrentRelease, 10) + " keeps serving"
}

func setBuiltCondition(s *scope) {
	if lb := s.lastBuild; lb.Failed && !lb.Rollout {
		setCondition(s, platformv1alpha1.AppBuiltCondition, metav1.ConditionFalse, platformv1alpha1.AppBuildFailedReason,
			fmt.Sprintf("Build %d failed (%s): %s. Fix it and push again; `bex builds log %s` shows its output.", lb.Number, keepsServing(s), lb.Message, s.app.Name))
		return
	}
	if s.app.Status.CurrentRelease == 0 {
		setCondition(s, platformv1alpha1.AppBuiltCondition, metav1.ConditionFalse, platformv1alpha1.AppAwaitingPushReason,
			"Nothing has been pushed yet: git push to the app's repository to build it.")
		return
	}
	setCondition(s, platformv1alpha1.AppBuiltCondition, metav1.ConditionTrue, platformv1alpha1.AppBuildSucceededReason, "")
}

func setReleasedCondition(s *scope) {
	if lb := s.lastBuild; lb.Failed && lb.Rollout {
		setCondition(s, platformv1alpha1.AppReleasedCondition, metav1.ConditionFalse, platformv1alpha1.AppRolloutFailedReason,
			fmt.Sprintf("The release of build %d never became healthy and got no traffic (%s): %s", lb.Number, keepsServing(s), lb.Message))
		return
	}
	if s.app.Status.CurrentRelease == 0 {
		setCondition(s, platformv1alpha1.AppReleasedCondition, metav1.ConditionFalse, platformv1alpha1.AppAwaitingPushReason,
			"No release yet: the first successful build creates release 1.")
		return
	}
	setCondition(s, platformv1alpha1.AppReleasedCondition, metav1.ConditionTrue, platformv1alpha1.AppRolledOutReason, "")
}

func setReadyCondition(s *scope) {
	switch {
	case s.app.Spec.Suspended:
		setCondition(s, platformv1alpha1.AppReadyCondition, metav1.ConditionFalse, platformv1alpha1.AppSuspendedReason,
			"The app is in maintenance mode (spec.suspended): no instance runs and the edge answers 503 with a maintenance page; "+
				"`bex apps set "+s.app.Name+" --maintenance off` runs the current release again.")
	case len(s.missingSecrets) > 0:
		setCondition(s, platformv1alpha1.AppReadyCondition, metav1.ConditionFalse, platformv1alpha1.AppInvalidSpecReason,
			strings.Join(s.missingSecrets, "; ")+": create the Secret or fix the reference.")
	case s.app.Status.CurrentRelease == 0:
		setCondition(s, platformv1alpha1.AppReadyCondition, metav1.ConditionFalse, platformv1alpha1.AppAwaitingPushReason,
			"Nothing runs yet: git push to the app's repository.")
	case s.runtimeObserved && s.runtimeReady:
		setCondition(s, platformv1alpha1.AppReadyCondition, metav1.ConditionTrue, platformv1alpha1.AppHealthyReason, s.runtimeMessage)
	case s.runtimeMessage != "":
		setCondition(s, platformv1alpha1.AppReadyCondition, metav1.ConditionFalse, platformv1alpha1.AppUnhealthyReason, s.runtimeMessage)
	default:
		setCondition(s, platformv1alpha1.AppReadyCondition, metav1.ConditionUnknown, platformv1alpha1.AppRollingOutReason,
			"Waiting for the runtime to report the release's health.")
	}
}
