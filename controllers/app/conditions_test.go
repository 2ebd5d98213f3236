package app

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

func TestSetConditions(t *testing.T) {
	for _, tc := range []struct {
		name           string
		suspended      bool
		release        int64
		missing        []string
		observed       bool
		healthy        bool
		runtimeMsg     string
		lastBuild      LastBuild
		readyStatus    metav1.ConditionStatus
		readyReason    string
		builtStatus    metav1.ConditionStatus
		releasedReason string
	}{
		{name: "new app", readyStatus: metav1.ConditionFalse, readyReason: platformv1alpha1.AppAwaitingPushReason,
			builtStatus: metav1.ConditionFalse, releasedReason: platformv1alpha1.AppAwaitingPushReason},
		{name: "suspended wins", suspended: true, missing: []string{"x"}, readyStatus: metav1.ConditionFalse, readyReason: platformv1alpha1.AppSuspendedReason,
			builtStatus: metav1.ConditionFalse, releasedReason: platformv1alpha1.AppAwaitingPushReason},
		{name: "missing secret", release: 2, missing: []string{"spec.env[0].secretKeyRef: Secret \"db\" not found"},
			readyStatus: metav1.ConditionFalse, readyReason: platformv1alpha1.AppInvalidSpecReason,
			builtStatus: metav1.ConditionTrue, releasedReason: platformv1alpha1.AppRolledOutReason},
		{name: "runtime healthy", release: 1, observed: true, healthy: true, readyStatus: metav1.ConditionTrue, readyReason: platformv1alpha1.AppHealthyReason,
			builtStatus: metav1.ConditionTrue, releasedReason: platformv1alpha1.AppRolledOutReason},
		{name: "runtime unhealthy", release: 1, observed: true, runtimeMsg: "web.0 failed its health check", readyStatus: metav1.ConditionFalse,
			readyReason: platformv1alpha1.AppUnhealthyReason, builtStatus: metav1.ConditionTrue, releasedReason: platformv1alpha1.AppRolledOutReason},
		{name: "release not running", release: 4, runtimeMsg: "release v4 is not running: unpacking failed", readyStatus: metav1.ConditionFalse,
			readyReason: platformv1alpha1.AppUnhealthyReason, builtStatus: metav1.ConditionTrue, releasedReason: platformv1alpha1.AppRolledOutReason},
		{name: "failed build, previous release serves", release: 2, observed: true, healthy: true,
			lastBuild:   LastBuild{Number: 3, Failed: true, Message: "go build: undefined: x"},
			readyStatus: metav1.ConditionTrue, readyReason: platformv1alpha1.AppHealthyReason,
			builtStatus: metav1.ConditionFalse, releasedReason: platformv1alpha1.AppRolledOutReason},
		{name: "failed rollout, previous release serves", release: 2, observed: true, healthy: true,
			lastBuild:   LastBuild{Number: 3, Failed: true, Rollout: true, Message: "web.0 failed its health check"},
			readyStatus: metav1.ConditionTrue, readyReason: platformv1alpha1.AppHealthyReason,
			builtStatus: metav1.ConditionTrue, releasedReason: platformv1alpha1.AppRolloutFailedReason},
		{name: "a later good build clears the failure", release: 3, observed: true, healthy: true, lastBuild: LastBuild{Number: 4},
			readyStatus: metav1.ConditionTrue, readyReason: platformv1alpha1.AppHealthyReason,
			builtStatus: metav1.ConditionTrue, releasedReason: platformv1alpha1.AppRolledOutReason},
		{name: "released, health unknown", release: 1, readyStatus: metav1.ConditionUnknown, readyReason: platformv1alpha1.AppRollingOutReason,
			builtStatus: metav1.ConditionTrue, releasedReason: platformv1alpha1.AppRolledOutReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			app.Spec.Suspended = tc.suspended
			app.Status.CurrentRelease = tc.release
			s := &scope{app: app, missingSecrets: tc.missing, runtimeObserved: tc.observed, runtimeReady: tc.healthy, runtimeMessage: tc.runtimeMsg, lastBuild: tc.lastBuild}
			setConditions(s)
			ready := meta.FindStatusCondition(app.Status.Conditions, platformv1alpha1.AppReadyCondition)
			if ready == nil || ready.Status != tc.readyStatus || ready.Reason != tc.readyReason {
				t.Fatalf("Ready = %+v, want %s/%s", ready, tc.readyStatus, tc.readyReason)
			}
			if ready.ObservedGeneration != 3 {
				t.Fatalf("Ready.observedGeneration = %d, want 3", ready.ObservedGeneration)
			}
			if built := meta.FindStatusCondition(app.Status.Conditions, platformv1alpha1.AppBuiltCondition); built.Status != tc.builtStatus {
				t.Fatalf("Built = %+v, want %s", built, tc.builtStatus)
			}
			if rel := meta.FindStatusCondition(app.Status.Conditions, platformv1alpha1.AppReleasedCondition); rel.Reason != tc.releasedReason {
				t.Fatalf("Released = %+v, want reason %s", rel, tc.releasedReason)
			}
		})
	}
}

func TestSetPlacedCondition(t *testing.T) {
	for _, tc := range []struct {
		name     string
		observed bool
		pl       Placement
		want     *metav1.Condition
	}{
		{name: "no placer", want: nil},
		{name: "placed", observed: true, pl: Placement{Placed: true, Cluster: "local", Pool: "default", Message: "placed on local/default"},
			want: &metav1.Condition{Status: metav1.ConditionTrue, Reason: platformv1alpha1.AppScheduledReason, Message: "placed on local/default"}},
		{name: "unschedulable", observed: true, pl: Placement{Message: "local: cpu: needs 64, 4 free"},
			want: &metav1.Condition{Status: metav1.ConditionFalse, Reason: platformv1alpha1.AppUnschedulableReason, Message: "No workload cluster can take the app: local: cpu: needs 64, 4 free"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := &platformv1alpha1.App{}
			s := &scope{app: app, placementObserved: tc.observed, placement: tc.pl}
			setPlacedCondition(s)
			got := meta.FindStatusCondition(app.Status.Conditions, platformv1alpha1.AppPlacedCondition)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("Placed = %+v, want none", got)
				}
				return
			}
			if got == nil || got.Status != tc.want.Status || got.Reason != tc.want.Reason || got.Message != tc.want.Message {
				t.Fatalf("Placed = %+v, want %+v", got, tc.want)
			}
		})
	}
}
