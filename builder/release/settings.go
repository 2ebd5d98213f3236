package release

import (
	"context"
	"fmt"
	"io"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
)

// Update applies change to the App, read under the app's lock, and makes
// what runs follow at once; no release is recorded:
//
//   - maintenance on (spec.suspended true): the spec is stored first, so
//     that the edge answers its maintenance page, then the current release
//     is handed to the runtime again with no instance of any process (its
//     record, its directory and its logs stay);
//   - maintenance off: the current release runs again with the App's
//     counts, plan and health check, and then the spec is stored;
//   - counts, plan or resources of an app that is not in maintenance: the
//     current release gets them as Scale gives them;
//   - a health check of an app that is not in maintenance: the current
//     release rolls as a new release does, each new web instance taking
//     traffic once it passes the new check, so that the check that
//     watches the instances is the one the App says; instances that do
//     not pass it leave the old ones serving and the spec as it was;
//   - the maintenance page is stored; the edge reads it from the App;
//   - the deploy branch is stored for the next push.
//
// A change of counts, plan or resources is first checked against the
// fleet's room (Options.Fits): a size no cluster can hold is refused.
//
// An app in maintenance only stores new counts and plan: they run when it
// comes out. It returns the current release, 0 when the app has none (then
// only the spec changes). An error of change is returned as it is; counts
// of a process the release does not have wrap store.ErrInvalid; both
// change nothing, and so does a change that does not go out (a
// *runtime.NotDeployedError), except maintenance on, which stays stored:
// the App controller stops the instances then.
func (p *Releaser) Update(ctx context.Context, tenantName, appName string, change func(*platformv1alpha1.App) error) (int, error) {
	unlock, tenant, app, err := p.locked(ctx, tenantName, appName)
	if err != nil {
		return 0, err
	}
	defer unlock()
	want := app.DeepCopy()
	if err := change(want); err != nil {
		return 0, err
	}
	if replicasOf(want, ReleaseProcess) != replicasOf(app, ReleaseProcess) {
		return 0, fmt.Errorf("%w process %s: the release phase runs once per release, before the release takes traffic; it has no instances to scale", store.ErrInvalid, ReleaseProcess)
	}
	save := func() error {
		if err := p.opts.Kube.Patch(ctx, want, client.MergeFrom(app)); err != nil {
			return fmt.Errorf("storing the settings of %s: %w", appName, err)
		}
		return nil
	}
	scale := !reflect.DeepEqual(app.Spec.Processes, want.Spec.Processes) || app.Spec.Plan != want.Spec.Plan ||
		!reflect.DeepEqual(app.Spec.Resources, want.Spec.Resources)
	if scale {
		if err := p.fits(ctx, want); err != nil {
			return 0, err
		}
	}
	if app.Status.CurrentRelease == 0 {
		return 0, save()
	}
	suspend := want.Spec.Suspended && !app.Spec.Suspended
	resume := !want.Spec.Suspended && app.Spec.Suspended
	health := !reflect.DeepEqual(healthCheck(app), healthCheck(want))
	if !suspend && !resume && !scale && !health {
		return int(app.Status.CurrentRelease), save()
	}
	cur, err := p.opts.Store.GetRelease(ctx, tenant.ID, appName, int(app.Status.CurrentRelease))
	if err != nil {
		return 0, fmt.Errorf("release v%d: %w", app.Status.CurrentRelease, err)
	}
	rel, img, err := p.prepare(ctx, want, cur.Number, cur.Image, true)
	if err != nil {
		return 0, &runtime.NotDeployedError{Err: fmt.Errorf("changing v%d failed, what ran keeps running: %w", cur.Number, err)}
	}
	procs, _ := withoutRelease(processes(want, img))
	known, _ := withoutRelease(processes(app, img))
	if err := knownProcesses(known, procs, cur.Number, appName); err != nil {
		return 0, err
	}
	switch {
	case suspend:
		if err := save(); err != nil {
			return 0, err
		}
		// complete takes every instance away from a suspended App.
		if err := p.deploy(ctx, want, rel, procs, cur.Config, io.Discard); err != nil {
			return 0, fmt.Errorf("stopping the instances of %s (maintenance mode is on; the platform stops them): %w", appName, err)
		}
		return cur.Number, nil
	case want.Spec.Suspended:
		// In maintenance: new counts and plan wait for it to end.
		return cur.Number, save()
	}
	if err := p.deploy(ctx, want, rel, procs, cur.Config, io.Discard); err != nil {
		return 0, &runtime.NotDeployedError{Err: fmt.Errorf("running v%d with the new settings failed, what ran keeps running: %w", cur.Number, err)}
	}
	return cur.Number, save()
}

// replicasOf is the count the App's spec sets for process, -1 when it
// sets none.
func replicasOf(app *platformv1alpha1.App, process string) int32 {
	for _, pr := range app.Spec.Processes {
		if pr.Name == process && pr.Replicas != nil {
			return *pr.Replicas
		}
	}
	return -1
}
