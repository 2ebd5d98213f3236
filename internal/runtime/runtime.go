package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// ErrNotFound is wrapped by Status and Logs when the driver runs no such
// app: it was never deployed, its only deploy failed, or it was removed.
var ErrNotFound = errors.New("app not running")

// NotDeployedError says that a rollout did not go out and why, in words
// for the app's owner: the release was refused or never became healthy,
// and what ran before keeps running. The release package wraps the
// failures of its rollouts in it, so that the API can show them to the
// tenant instead of hiding them as internal errors.
type NotDeployedError struct{ Err error }

func (e *NotDeployedError) Error() string { return e.Err.Error() }

func (e *NotDeployedError) Unwrap() error { return e.Err }

// WebProcess is the process type that receives the app's HTTP traffic.
const WebProcess = "web"

// Health-check defaults, as the App API documents them.
const (
	DefaultHealthTimeout    = 5 * time.Second
	DefaultHealthInterval   = 10 * time.Second
	DefaultSuccessThreshold = 1
	DefaultFailureThreshold = 3
)

// HealthCheck says when a web instance is healthy. With a Path it is an HTTP
// GET that must answer 2xx or 3xx within Timeout; without one, the instance
// is healthy once its port accepts a TCP connection. Zero fields take the
// defaults above; a zero Port means the instance's PORT.
type HealthCheck struct {
	Path             string
	Port             int
	Timeout          time.Duration
	Interval         time.Duration
	SuccessThreshold int
	FailureThreshold int
}

// WithDefaults returns h with its zero fields set to the defaults.
func (h HealthCheck) WithDefaults() HealthCheck {
	if h.Timeout <= 0 {
		h.Timeout = DefaultHealthTimeout
	}
	if h.Interval <= 0 {
		h.Interval = DefaultHealthInterval
	}
	if h.SuccessThreshold <= 0 {
		h.SuccessThreshold = DefaultSuccessThreshold
	}
	if h.FailureThreshold <= 0 {
		h.FailureThreshold = DefaultFailureThreshold
	}
	return h
}

// String describes the check as users read it: "GET /healthz" or "TCP connect".
func (h HealthCheck) String() string {
	if h.Path == "" {
		return "TCP connect"
	}
	return "GET " + h.Path
}

// Process is one process type of a release. Command runs in a shell
// (/bin/sh -c); Args, when set instead, run as they are, with no shell (an
// image's ENTRYPOINT and CMD, for images that may have no shell at all).
// Both empty means the image's own entrypoint (kube driver only: the
// process driver needs one of them).
//
// Restart asks for a rolling restart of the process's instances: a Deploy
// of the release the driver runs already (same Number, nothing else
// changed) replaces the instances of each process whose Restart is set and
// differs from the one they were started with, with zero downtime as a
// rollout, and leaves the other processes' instances running. Empty asks
// for nothing: the instances keep the Restart they have. A Deploy of
// another release replaces every instance whatever Restart says.
//
// Replicas is how many instances run. A Deploy of the release the driver
// runs already that changes only Replicas (and Restart) scales: a process
// that keeps its Restart keeps its running instances, gets new ones added
// (web ones take traffic once healthy), or has its last ones taken out of
// traffic, drained and stopped; no instance it still wants is replaced.
type Process struct {
	Command  string
	Args     []string
	Replicas int
	Restart  string
}

// Resources is the CPU and memory of one instance, as Kubernetes quantities
// ("500m", "512Mi"); empty means no limit.
type Resources struct {
	CPU, Memory string
}

// Release is everything a driver needs to run one release of an app.
type Release struct {
	Tenant, App string
	// Cluster is the workload cluster the release runs on, as the
	// scheduler placed the app; a driver that routes to one runtime per
	// cluster (placed) needs it, the others ignore it.
	Cluster string
	// Number is the release number, 1 and up.
	Number int
	// Image is the OCI image reference (kube driver).
	Image string
	// Dir is an unpacked image directory (process driver): the image's
	// /app, for images the platform built on its run image. Commands run in
	// it; in a sandbox it is mounted at /app.
	Dir string
	// RootFS, instead of Dir, is the whole unpacked root filesystem of an
	// image that brings its own (a Dockerfile build): the sandbox runs it as
	// the container's root, and WorkDir is the working directory inside it
	// ("/" when empty). Only a sandboxing driver runs such a release.
	RootFS  string
	WorkDir string
	// ImageEnv is the image's own environment as the unpacked Dir sees it
	// (its /app paths mapped to Dir, the platform's binary directory on
	// PATH). A driver that runs Dir starts from it; a driver that runs Image
	// ignores it, since the image's environment applies there by itself,
	// with the image's own paths.
	ImageEnv map[string]string
	// Env is what the platform sets on top of the image: the app's config,
	// secrets resolved. It wins over ImageEnv. The driver sets PORT for web
	// instances and overrides any PORT given here.
	Env map[string]string
	// Processes maps process types ("web", "worker", ...) to what they run.
	Processes map[string]Process
	// HealthCheck applies to web instances; workers have none.
	HealthCheck HealthCheck
	Resources   Resources
}

var (
	dnsLabel    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	processName = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	envName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Validate reports the first thing wrong with r that no driver could run.
func (r Release) Validate() error {
	if !dnsLabel.MatchString(r.Tenant) || len(r.Tenant) > 63 {
		return fmt.Errorf("invalid tenant %q: must be a DNS label", r.Tenant)
	}
	if !dnsLabel.MatchString(r.App) || len(r.App) > 40 {
		return fmt.Errorf("invalid app name %q: must be a DNS label of at most 40 characters", r.App)
	}
	if r.Number < 1 {
		return fmt.Errorf("invalid release number %d: must be 1 or more", r.Number)
	}
	if len(r.Processes) == 0 {
		return errors.New("release has no processes")
	}
	for _, name := range r.ProcessNames() {
		p := r.Processes[name]
		if !processName.MatchString(name) || len(name) > 22 {
			return fmt.Errorf("invalid process name %q: must be a DNS label of at most 22 characters starting with a letter", name)
		}
		if p.Replicas < 0 {
			return fmt.Errorf("process %s: replicas %d is negative", name, p.Replicas)
		}
	}
	for _, env := range []map[string]string{r.ImageEnv, r.Env} {
		for k := range env {
			if !envName.MatchString(k) {
				return fmt.Errorf("invalid environment variable name %q", k)
			}
		}
	}
	if r.HealthCheck.Path != "" && r.HealthCheck.Path[0] != '/' {
		return fmt.Errorf("invalid health check path %q: must start with '/'", r.HealthCheck.Path)
	}
	if r.HealthCheck.Port < 0 || r.HealthCheck.Port > 65535 {
		return fmt.Errorf("invalid health check port %d", r.HealthCheck.Port)
	}
	return nil
}

// ProcessNames returns the release's process types, sorted.
func (r Release) ProcessNames() []string {
	names := make([]string, 0, len(r.Processes))
	for n := range r.Processes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// InstanceState is the state of one instance.
type InstanceState string

// The states an instance goes through.
const (
	// Starting: started, not yet healthy.
	Starting InstanceState = "Starting"
	// Running: healthy (web) or running (worker).
	Running InstanceState = "Running"
	// Unhealthy: was healthy, now fails its health check; gets no traffic.
	Unhealthy InstanceState = "Unhealthy"
	// Crashed: exited on its own; waits for its restart.
	Crashed InstanceState = "Crashed"
	// Stopped: stopped by the driver.
	Stopped InstanceState = "Stopped"
)

// Status is what a driver reports about an app.
type Status struct {
	// Cluster is the workload cluster that serves the app, for a driver
	// that routes to one runtime per cluster (placed); "" for the others.
	Cluster string
	// Release is the release the app runs (or, mid-rollout on kube, rolls
	// out); 0 when none has been rolled out.
	Release int
	// Ready is true when every instance of Release is Running.
	Ready bool
	// Message says in a sentence why the app is not ready, or what runs.
	Message   string
	Instances []Instance
}

// Instance is one running copy of a process.
type Instance struct {
	Process string
	Index   int
	// ID tells this instance from every other the app has had: a new one
	// (a new release, a restart) has a new ID, while a crash and its
	// restart in place keep it. The process driver numbers its instances,
	// the kube driver gives the pod's name.
	ID      string
	Release int
	State   InstanceState
	// Restarts counts the times the instance exited on its own and was
	// started again in place (same ID): the process driver's restarts of
	// a crashed process, the kubelet's restarts of the pod's containers.
	// A new instance starts from 0.
	Restarts int
	// Since is when the instance entered State: for a Running one, when
	// its current process came up (after a restart, the restart), which is
	// its uptime.
	Since time.Time
}

// Name is the instance's name as users read it: "web.0".
func (i Instance) Name() string { return InstanceName(i.Process, i.Index) }

// InstanceName names instance index of process: "web.0".
func InstanceName(process string, index int) string {
	return process + "." + strconv.Itoa(index)
}

// Log streams.
const (
	Stdout = "stdout"
	Stderr = "stderr"
	// System lines come from the platform about the instance: started,
	// crashed, restarting, stopped.
	System = "bex"
)

// LogLine is one line an instance wrote, or that the platform wrote about it.
type LogLine struct {
	Time     time.Time
	Process  string
	Instance int
	Stream   string
	Text     string
}

// ImageRunner is implemented by a driver that may run a release from its
// Image alone: RunsImage reports whether it runs rel so (rel.Cluster set),
// and the caller then need not unpack the image (Dir and RootFS stay
// empty). A driver that does not implement it needs them.
type ImageRunner interface {
	RunsImage(rel Release) bool
}

// Driver runs releases. Methods are safe for concurrent use; calls for the
// same app are serialised (a second Deploy waits for the first).
type Driver interface {
	// Deploy rolls rel out with zero downtime: new instances start with PORT
	// set, get traffic only once healthy, then old instances get SIGTERM
	// (in-flight requests finish; SIGKILL after a grace period). If the new
	// release never becomes healthy within the deadline (ctx, or the
	// driver's own start-up limit) it is stopped and the previous one keeps
	// serving; the error says why (e.g. "web.0 failed its health check GET
	// /healthz: 500 (3 of 3)"). An invalid rel is refused before anything
	// changes. Progress lines go to log.
	Deploy(ctx context.Context, rel Release, log io.Writer) error
	// Remove stops and deletes everything of the app. Removing an app the
	// driver does not run is not an error.
	Remove(ctx context.Context, tenant, app string) error
	// Status reports the app's release and instances, each with its
	// state, since when, and its restarts in place after a crash (what
	// bex ps shows); the error wraps ErrNotFound when the driver runs no
	// such app.
	Status(ctx context.Context, tenant, app string) (Status, error)
	// Logs returns the app's last tail lines and, with follow, keeps
	// sending new ones until ctx ends; the channel is closed then (or after
	// the tail without follow). The error wraps ErrNotFound when the driver
	// runs no such app.
	Logs(ctx context.Context, tenant, app string, tail int, follow bool) (<-chan LogLine, error)
}

// Usage is what one instance uses, as its driver reads it from the
// kernel: for a sandboxed instance its cgroup (cpuacct.usage or cpu.stat,
// memory.usage_in_bytes or memory.current), for a plain process its
// /proc entry, for a Pod its node's stats summary (the kubelet's, from
// the container's cgroup: usageCoreNanoSeconds, workingSetBytes).
type Usage struct {
	Process string
	Index   int
	// ID is the instance's Instance.ID.
	ID string
	// CPUSeconds is the CPU time the instance's current process (its
	// container) used since it started; it starts again from 0 at a
	// restart.
	CPUSeconds float64
	// MemoryBytes is the memory it uses now.
	MemoryBytes int64
}

// UsageReader is implemented by a driver that reads its instances' CPU and
// memory. Usage returns one entry per instance of the app that runs now;
// the error wraps ErrNotFound when the driver runs no such app, and
// ErrUsageNotSupported when the app runs where its usage cannot be read
// (the placed driver's apps on a cluster whose driver reads none). Safe
// for concurrent use.
type UsageReader interface {
	Usage(ctx context.Context, tenant, app string) ([]Usage, error)
}

// AppName names an app: its tenant and its name.
type AppName struct{ Tenant, App string }

// AppReading is what a driver read of one app at once: its Status or
// why it could not be read (StatusErr, as Status returns it), and its
// instances' Usage or why not (UsageErr, as Usage returns it).
type AppReading struct {
	Status    Status
	StatusErr error
	Usage     []Usage
	UsageErr  error
}

// AppsReader is implemented by a driver that reads many apps in a few
// requests, where Status and Usage take requests of each app (the kube
// driver: two lists for the whole cluster, and each node's summary once).
// ReadApps returns a reading for each of apps: what Status and Usage
// would have returned for it. A sampler that reads every app each round
// uses it. Safe for concurrent use.
type AppsReader interface {
	ReadApps(ctx context.Context, apps []AppName) (map[AppName]AppReading, error)
}

// Watcher is implemented by a driver that tells when the state of an
// app's instances changes (one starts, becomes healthy, crashes, is
// stopped, a release takes over), so that its Status need not be polled to
// see it.
type Watcher interface {
	// Watch calls changed with the app's tenant and name after each such
	// change, until ctx is done; it returns at once. changed must return
	// quickly and is called from many goroutines.
	Watch(ctx context.Context, changed func(tenant, app string))
	// Watches reports whether Watch reports the changes of tenant's app
	// now: a driver may run apps whose changes it does not see (the placed
	// driver's apps on a kube cluster).
	Watches(tenant, app string) bool
}

// ErrUsageNotSupported is wrapped by Usage when the driver that runs the
// app cannot read its usage.
var ErrUsageNotSupported = errors.New("this runtime does not read its instances' CPU and memory")

// AppInstance is one instance and the app it is of.
type AppInstance struct {
	App AppName
	Instance
}

// InstancesReader is implemented by a driver that reads every instance it
// runs, of every app, at once (the kube driver: one list of the Pods it
// made, a page at a time), so that a count of them costs the same for one
// app as for 10,000. ReadInstances returns them with their state and
// restarts, as Status reports them. Safe for concurrent use.
type InstancesReader interface {
	ReadInstances(ctx context.Context) ([]AppInstance, error)
}
