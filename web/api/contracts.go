package api

import (
	"context"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/runtime"

	"bex.co/bex/web/api/apiclient"
)

// Releaser rolls apps back, releases their config and restarts them; the
// runtime side of the platform implements it. Its methods are safe for
// concurrent use, stop when ctx ends, and serialise with every other
// change to the same app (a push's deploy, another rollback). A rollout
// that does not go out leaves what serves as it was and returns a
// *runtime.NotDeployedError that says why, in words for the tenant.
//
// Rollback records a new release of the tenant's app that runs what
// release number to ran (store.CreateRollbackRelease does the recording),
// starts rolling it out, and returns the new release's number. actor is who
// asked, for the release's created_by. The API has checked that the app
// exists and that release to exists and is not the current one. Rollback
// may return before the rollout completes; the App's status tells how it
// goes. It is safe for concurrent use and stops when ctx ends.
//
// ReleaseConfig records a new release of the app's current image with the
// App's environment as it is now (spec.env, after the API's change),
// described description — names of variables, never values — and created
// by actor, rolls it out and makes it current. It returns 0 and changes
// nothing when the app has no release yet.
//
// Restart replaces the running instances of the app's current release, of
// process or of every process that runs instances when it is "", with new
// ones, as a rollout does (with zero downtime for a web process with a
// health check); it records no release. It returns the release and the
// processes it restarted. A process the release does not have or runs no
// instance of is an error wrapping store.ErrInvalid that changes nothing.
//
// Scale sets how many instances of each process of counts the App runs,
// and its plan when plan is not empty, and applies them to the current
// release without recording one: instances added or stopped, none of
// those it keeps replaced. It returns the release (0 when the app has
// none: then only the App's spec changes) and the count of each of its
// processes. A process the release does not have is an error wrapping
// store.ErrInvalid; that and a scale that does not go out change nothing,
// the App's spec included.
//
// Update applies change to the App (read under the app's lock) and makes
// what runs follow at once, without recording a release: instance counts
// and the plan go to the current release as Scale applies them,
// spec.suspended true stops every instance (the release and its record
// stay), false runs the current release again, a new health check rolls
// the current release's instances; the deploy branch waits for the next
// push. It returns the current release (0 when the app has none:
// then only the App's spec changes). An error of change is returned as it
// is, and a process the release does not have is an error wrapping
// store.ErrInvalid: both change nothing. So does a change that does not
// go out, except maintenance on, which is stored first so that the edge
// answers the maintenance page while the instances stop.
//
// Run runs cmd in a fresh instance of the app's current release, as
// runtime.Runner.Run does: cmd.Attach is called once the instance is
// ready (on a workload cluster, before its Pod is made), and an error
// before it (or Attach's own) means nothing ran. An app without a release
// is an error wrapping store.ErrConflict; a runtime that runs no one-off
// commands one wrapping runtime.ErrRunNotSupported; input or a terminal
// for a runtime that takes neither one wrapping runtime.ErrNoInput.
type Releaser interface {
	Rollback(ctx context.Context, tenant, app string, to int, actor string) (newRelease int, err error)
	ReleaseConfig(ctx context.Context, tenant, app, description, actor string) (newRelease int, err error)
	Restart(ctx context.Context, tenant, app, process string) (release int, processes []string, err error)
	Scale(ctx context.Context, tenant, app string, counts map[string]int, plan string) (release int, processes map[string]int, err error)
	Update(ctx context.Context, tenant, app string, change func(*platformv1alpha1.App) error) (release int, err error)
	Run(ctx context.Context, tenant, app string, cmd runtime.Command) (runtime.Exit, error)
}

// LogLine is one line an app's process printed.
type LogLine = apiclient.LogLine

// LogSource reads the output of a tenant's running app; the runtime
// implements it.
//
// Logs sends the last tail lines of the app's processes (tail 0 means
// none) in time order on the returned channel; with follow it then sends
// new lines as they are printed until ctx ends, without it it closes the
// channel after the tail. The source closes the channel when it is done or
// ctx ends, and never blocks forever on a reader that is gone (ctx ends
// when the HTTP client goes away). An app that exists but has never run
// has no lines: the channel is closed (or, with follow, stays open) and
// the error is nil. It is safe for concurrent use.
type LogSource interface {
	Logs(ctx context.Context, tenant, app string, tail int, follow bool) (<-chan LogLine, error)
}

// InstanceSource reads what runs of a tenant's app; the runtime implements
// it (RuntimeInstances).
//
// Instances returns the app's instances as the runtime reports them now,
// by process, release and index, with the release it runs, the cluster it
// runs on and whether it is ready. An app the runtime does not run (no
// release yet, or removed) has no instances, Release 0 and a nil error;
// another error means the runtime could not be read. It is safe for
// concurrent use and stops when ctx ends.
type InstanceSource interface {
	Instances(ctx context.Context, tenant, app string) (apiclient.Instances, error)
}
