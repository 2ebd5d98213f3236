package app

import (
	"context"
	"testing"
	"time"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// watchAll is a Releases whose runtime watches every app; noWatch one
// whose runtime watches none. Neither is called but for that.
type (
	watchAll struct{ Releases }
	noWatch  struct{ Releases }
)

func (watchAll) WatchHealth(context.Context, func(tenant, app string)) {}
func (watchAll) WatchesHealth(string, string) bool                     { return true }

// TestRequeueAfter: when an App is looked at again with nothing to bring
// it back.
func TestRequeueAfter(t *testing.T) {
	released := func(suspended bool) *platformv1alpha1.App {
		a := &platformv1alpha1.App{}
		a.Status.CurrentRelease = 3
		a.Spec.Suspended = suspended
		return a
	}
	placed := func(static bool) Placement { return Placement{Placed: true, Cluster: "c", Static: static} }
	serving := func(a *platformv1alpha1.App, pl *Placement) *scope {
		s := &scope{app: a, runtimeObserved: true, runtimeReady: true}
		if pl != nil {
			s.placementObserved, s.placement = true, *pl
		}
		return s
	}
	polled := &Reconciler{Releases: noWatch{}}
	watching := &Reconciler{Releases: watchAll{}}
	watchingPlaced := &Reconciler{Releases: watchAll{}, Placer: SchedulerPlacer{}}
	static, capi, nowhere := placed(true), placed(false), Placement{}
	failing := serving(released(false), nil)
	failing.runtimeReady = false
	for _, tc := range []struct {
		name     string
		r        *Reconciler
		s        *scope
		min, max time.Duration
	}{
		{"no release, no placer", watching, serving(&platformv1alpha1.App{}, nil), 0, 0},
		{"a runtime that does not watch", polled, serving(released(false), nil), ResyncPeriod, ResyncPeriod},
		{"watched and serving", watching, serving(released(false), nil), watchedResync, watchedResync * 6 / 5},
		{"watched, in maintenance", watching, serving(released(true), nil), watchedResync, watchedResync * 6 / 5},
		{"watched but failing", watching, failing, ResyncPeriod, ResyncPeriod},
		{"watched, on a static cluster", watchingPlaced, serving(released(false), &static), watchedResync, watchedResync * 6 / 5},
		{"watched, on a Cluster API cluster", watchingPlaced, serving(released(false), &capi), placementResync, placementResync},
		{"placed nowhere", watchingPlaced, serving(released(false), &nowhere), ResyncPeriod, ResyncPeriod},
		{"no release, placed nowhere", watchingPlaced, serving(&platformv1alpha1.App{}, &nowhere), placementResync, placementResync},
	} {
		if got := tc.r.requeueAfter(tc.s); got < tc.min || got > tc.max {
			t.Errorf("%s: requeue after %s, want %s to %s", tc.name, got, tc.min, tc.max)
		}
	}
}
