package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// listInstances answers what runs of the caller's app, as the runtime
// reports it, and the app's one-off runs that run, as the store records
// them. A runtime that does not answer leaves the instances out, not the
// runs: the answer is still a 200, with InstancesError saying why.
func (s *Server) listInstances(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	p := principalOf(c)
	runs, err := s.store.RunningRunsOf(c.Request().Context(), p.tenant.ID, app.Name)
	if err != nil {
		return err
	}
	v, err := s.instances.Instances(c.Request().Context(), p.tenant.Name, app.Name)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		s.log.Error(err, "Reading instances failed", "tenant", app.Namespace, "app", app.Name)
		why := fmt.Sprintf("the runtime that runs app %q does not answer now: try again in a moment", app.Name)
		v = apiclient.Instances{Message: "the instances could not be read: " + why, InstancesError: why}
	}
	v.App = app.Name
	if v.Instances == nil {
		v.Instances = []apiclient.Instance{}
	}
	v.Runs = make([]apiclient.RunningRun, 0, len(runs))
	for _, r := range runs {
		v.Runs = append(v.Runs, runningRunView(r))
	}
	if len(v.Instances) == 0 && v.Message == "" {
		v.Message = fmt.Sprintf("no instance of %s runs", app.Name)
		if app.Status.CurrentRelease == 0 {
			v.Message = fmt.Sprintf("%s has no release yet: push to its git remote", app.Name)
		}
	}
	return c.JSON(http.StatusOK, v)
}

// runningRunView is ps's view of a run that runs.
func runningRunView(r store.Run) apiclient.RunningRun {
	v := apiclient.RunningRun{
		Name: fmt.Sprintf("run.%d", r.Number), Number: r.Number, Release: r.Release, Command: r.Command, CreatedBy: r.CreatedBy,
		Detached: r.Detached, Terminal: r.Terminal, State: apiclient.RunUp, Since: r.StartedAt.UTC(),
	}
	if r.StopRequestedAt != nil {
		at := r.StopRequestedAt.UTC()
		v.State, v.StopRequestedAt, v.StopRequestedBy = apiclient.RunStopping, &at, r.StopRequestedBy
	}
	return v
}

// RuntimeInstances serves the API's instances from a runtime driver.
type RuntimeInstances struct{ Driver runtime.Driver }

var _ InstanceSource = RuntimeInstances{}

// instanceStates are the API's words for the runtime's states.
var instanceStates = map[runtime.InstanceState]string{
	runtime.Starting:  apiclient.InstanceStarting,
	runtime.Running:   apiclient.InstanceUp,
	runtime.Unhealthy: apiclient.InstanceUnhealthy,
	runtime.Crashed:   apiclient.InstanceCrashed,
	runtime.Stopped:   apiclient.InstanceStopping,
}

// Instances implements InstanceSource with the driver's Status: an app the
// driver does not run has no instances.
func (r RuntimeInstances) Instances(ctx context.Context, tenant, app string) (apiclient.Instances, error) {
	st, err := r.Driver.Status(ctx, tenant, app)
	if errors.Is(err, runtime.ErrNotFound) {
		return apiclient.Instances{App: app, Instances: []apiclient.Instance{}}, nil
	}
	if err != nil {
		return apiclient.Instances{}, fmt.Errorf("reading the runtime status of %s/%s: %w", tenant, app, err)
	}
	v := apiclient.Instances{App: app, Release: st.Release, Cluster: st.Cluster, Ready: st.Ready, Message: st.Message,
		Instances: make([]apiclient.Instance, 0, len(st.Instances))}
	insts := slices.Clone(st.Instances)
	slices.SortFunc(insts, func(a, b runtime.Instance) int {
		return cmp.Or(cmp.Compare(a.Process, b.Process), cmp.Compare(a.Release, b.Release), cmp.Compare(a.Index, b.Index), cmp.Compare(a.ID, b.ID))
	})
	for _, i := range insts {
		state, ok := instanceStates[i.State]
		if !ok {
			state = string(i.State)
		}
		v.Instances = append(v.Instances, apiclient.Instance{
			Name: i.Name(), Process: i.Process, ID: i.ID, Release: i.Release,
			State: state, Restarts: i.Restarts, Since: i.Since.UTC(),
		})
	}
	return v, nil
}
