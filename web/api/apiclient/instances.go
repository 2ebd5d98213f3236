package apiclient

import (
	"context"
	"net/http"
	"time"
)

// The states of an instance, as Instance.State says them.
const (
	// InstanceStarting: started, not yet healthy.
	InstanceStarting = "starting"
	// InstanceUp: healthy (web) or running (other processes).
	InstanceUp = "up"
	// InstanceUnhealthy: was up, now fails its health check; it gets no
	// traffic.
	InstanceUnhealthy = "unhealthy"
	// InstanceCrashed: exited on its own; it waits for its restart.
	InstanceCrashed = "crashed"
	// InstanceStopping: stopped by the platform (a new release, a
	// restart, a scale down); on its way out.
	InstanceStopping = "stopping"
)

// The states of a one-off run that runs, as RunningRun.State says them.
const (
	// RunUp: the run's command runs.
	RunUp = "up"
	// RunStopping: a stop was asked of it (StopRun); it ends soon.
	RunStopping = "stopping"
)

// Instances answers GET /api/v1/apps/{app}/instances: what runs of the
// app now, as the runtime that runs it reports it, and its one-off runs
// that run.
type Instances struct {
	App string `json:"app"`
	// Release is the release the runtime runs (mid-rollout on a cluster,
	// the one it rolls out); 0 when nothing runs.
	Release int `json:"release"`
	// Cluster is the workload cluster the app runs on: "local" for the
	// platform's own process runtime, any other name a cluster of the
	// fleet; empty when nothing runs.
	Cluster string `json:"cluster,omitempty"`
	// Ready is true when every instance of Release is up.
	Ready bool `json:"ready"`
	// Message says in a sentence what runs, or why the app is not ready
	// ("release 3: web.0 crashed 5 times; restarting in 32s; last exit:
	// exit status 1").
	Message   string     `json:"message"`
	Instances []Instance `json:"instances"`
	// InstancesError, when set, says why the instances could not be read
	// (the runtime did not answer): Instances is then empty, Release 0
	// and Ready false whatever runs, and Message says so too. Runs come
	// from the store and are there all the same.
	InstancesError string `json:"instancesError,omitempty"`
	// Runs are the app's one-off runs that run now, oldest first; those
	// that ended (or were lost) are in GET .../runs only.
	Runs []RunningRun `json:"runs"`
}

// RunningRun is a one-off run of an app that runs now, as ps shows it
// after the instances (Heroku's "run: one-off processes").
type RunningRun struct {
	// Name is run.<Number>.
	Name   string `json:"name"`
	Number int    `json:"number"`
	// Release is the release it runs in.
	Release int      `json:"release"`
	Command []string `json:"command"`
	// CreatedBy is who started it: an email, or token:<name>.
	CreatedBy string `json:"createdBy"`
	// Detached says it runs in the background, its output going to the
	// app's log; otherwise a client is attached to it (bex run).
	Detached bool `json:"detached"`
	// Terminal says it runs on a terminal.
	Terminal bool `json:"terminal"`
	// State is up, or stopping once a stop was asked of it (the RunUp
	// and RunStopping constants).
	State string `json:"state"`
	// Since is when it started.
	Since time.Time `json:"since"`
	// StopRequestedAt is when a stop was asked of it, StopRequestedBy
	// by whom; absent when none was.
	StopRequestedAt *time.Time `json:"stopRequestedAt,omitempty"`
	StopRequestedBy string     `json:"stopRequestedBy,omitempty"`
}

// Instance is one running copy of a process of an app.
type Instance struct {
	// Name is the process type and the instance's index: web.0.
	Name string `json:"name"`
	// Process is the process type: web, worker.
	Process string `json:"process"`
	// ID tells this instance from every other the app has had: a restart
	// after a crash keeps it, a new release, bex restart or a new instance
	// of a scale has a new one (on a cluster, the pod's name).
	ID      string `json:"id"`
	Release int    `json:"release"`
	// State is starting, up, unhealthy, crashed or stopping (the
	// Instance* constants).
	State string `json:"state"`
	// Restarts counts the times the instance exited on its own and was
	// started again.
	Restarts int `json:"restarts"`
	// Since is when the instance entered State: for an up instance, when
	// it came up (its uptime).
	Since time.Time `json:"since"`
}

// Instances returns what runs of app now.
func (c *Client) Instances(ctx context.Context, app string) (Instances, error) {
	var is Instances
	return is, c.call(ctx, http.MethodGet, "/apps/"+seg(app)+"/instances", nil, nil, &is)
}
