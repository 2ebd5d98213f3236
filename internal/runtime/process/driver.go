package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/steptime"
)

var _ runtime.Driver = (*Driver)(nil)

// Options configures a Driver. Zero fields take the defaults in brackets.
type Options struct {
	// LogDir, when set, receives one log file per app: <tenant>/<app>.log,
	// rotated once at 10 MiB.
	LogDir string
	// LogLines is how many lines each app keeps in memory [1000].
	LogLines int
	// StartTimeout is how long a web instance may take to accept
	// connections on its PORT [60s, as Heroku].
	StartTimeout time.Duration
	// DrainDelay is how long old instances keep running after traffic moved
	// away from them, before SIGTERM, so that requests routed just before
	// the switch reach them [1s].
	DrainDelay time.Duration
	// GracePeriod is how long a process has between SIGTERM and SIGKILL [30s].
	GracePeriod time.Duration
	// BackoffMin and BackoffMax bound the delay before a crashed instance
	// restarts; it doubles at each crash and starts again from BackoffMin
	// after a minute of running [1s, 60s].
	BackoffMin, BackoffMax time.Duration
	// PATH is the PATH of the processes, unless the release's env sets one
	// [this process's PATH].
	PATH string
	// FirstPort and LastPort bound the ports given to web instances as PORT
	// [20000-29999]. The range should lie outside the kernel's ephemeral
	// range (net.ipv4.ip_local_port_range), or an outgoing connection may
	// take an instance's port between its choice and the app's bind.
	FirstPort, LastPort int
	// Sandbox, when set, runs every instance in a container of its own
	// (internal/sandbox): the release's files at /app, its own network
	// address, the release's resources as limits. Without it instances
	// are plain processes of this machine's user, which only a
	// single-user machine may accept (bex-embedded --unsafe-no-sandbox).
	Sandbox *sandbox.Manager
	// SandboxPort is the PORT of sandboxed web instances, each on its own
	// address [5000].
	SandboxPort int
}

func (o *Options) complete() {
	if o.LogLines <= 0 {
		o.LogLines = 1000
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.DrainDelay < 0 {
		o.DrainDelay = 0
	} else if o.DrainDelay == 0 {
		o.DrainDelay = time.Second
	}
	if o.GracePeriod <= 0 {
		o.GracePeriod = 30 * time.Second
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = time.Minute
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = o.BackoffMin
	}
	if o.PATH == "" {
		o.PATH = os.Getenv("PATH")
	}
	if o.PATH == "" {
		o.PATH = "/usr/local/bin:/usr/bin:/bin"
	}
	if o.FirstPort <= 0 || o.LastPort <= 0 {
		o.FirstPort, o.LastPort = defaultFirstPort, defaultLastPort
	}
	if o.LastPort < o.FirstPort {
		o.LastPort = o.FirstPort
	}
	if o.SandboxPort <= 0 {
		o.SandboxPort = 5000
	}
}

// Driver runs releases as supervised OS processes. It implements
// runtime.Driver, and Upstreams and Runs for the edge. Close stops
// everything it started.
type Driver struct {
	opts        Options
	probeClient *http.Client
	ports       *ports
	// started numbers the instances the driver starts: their IDs.
	started atomic.Int64
	// restarts counts the restarts of crashed instances
	// (bex_runtime_restarts_total).
	restarts atomic.Int64

	mu     sync.Mutex
	apps   map[appKey]*app
	closed bool
	// runs are the one-off commands running, by app (run.go).
	runs map[appKey]map[*oneOff]bool

	// watchers are the calls of Watch (watch.go).
	watchers runtime.WatchList
}

type appKey struct{ tenant, app string }

// app is everything the driver holds for one app.
type app struct {
	key  appKey
	logs *logBuffer

	// deploy serialises Deploy and Remove of the app.
	deploy sync.Mutex

	mu           sync.Mutex
	current      *release // serving
	pending      *release // being rolled out
	cancelDeploy context.CancelFunc
	removed      bool

	routes atomic.Pointer[[]string]
}

type release struct {
	number    int
	instances []*instance
	// spec is what the release was deployed with, and restarts the
	// Restart each process's instances run for: a Deploy of the same spec
	// keeps the instances of the processes whose Restart it leaves alone.
	spec     runtime.Release
	restarts map[string]string
	// restarting, on a pending release of the number that serves, names
	// the processes being restarted, and scaling those that get more
	// instances.
	restarting, scaling []string
}

// New returns a Driver. A negative DrainDelay means none.
func New(opts Options) *Driver {
	opts.complete()
	return &Driver{
		opts: opts,
		probeClient: &http.Client{
			Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		ports: newPorts(opts.FirstPort, opts.LastPort),
		apps:  map[appKey]*app{},
	}
}

func (d *Driver) lookup(tenant, name string) *app {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.apps[appKey{tenant, name}]
}

// Upstreams returns the addresses ("127.0.0.1:port") of the healthy web
// instances of the app's current release, nil when there are none. The set
// changes atomically: at cut-over it moves from the old release's instances
// to the new one's in one step. The caller must not modify the slice.
func (d *Driver) Upstreams(tenant, name string) []string {
	a := d.lookup(tenant, name)
	if a == nil {
		return nil
	}
	if p := a.routes.Load(); p != nil {
		return *p
	}
	return nil
}

// Runs reports whether the app has a release rolled out (healthy or not).
func (d *Driver) Runs(tenant, name string) bool {
	a := d.lookup(tenant, name)
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.current != nil
}

// updateRoutes recomputes the app's upstreams from its current release.
func (a *app) updateRoutes() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.updateRoutesLocked()
}

func (a *app) updateRoutesLocked() {
	var addrs []string
	if a.current != nil {
		for _, i := range a.current.instances {
			if i.hc != nil && i.isHealthy() {
				addrs = append(addrs, i.addr())
			}
		}
	}
	a.routes.Store(&addrs)
}

// Deploy implements runtime.Driver. Web instances get a free port on
// 127.0.0.1; a release whose instances do not all pass their health check
// within StartTimeout (or before ctx ends) is stopped and the previous one
// keeps serving.
func (d *Driver) Deploy(ctx context.Context, rel runtime.Release, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	if err := d.validate(rel); err != nil {
		return err
	}
	a, err := d.app(rel.Tenant, rel.App)
	if err != nil {
		return err
	}
	a.deploy.Lock()
	defer a.deploy.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	if a.removed {
		a.mu.Unlock()
		return fmt.Errorf("app %s/%s is being removed", rel.Tenant, rel.App)
	}
	a.cancelDeploy = cancel
	cur := a.current
	a.mu.Unlock()

	keep := keptProcesses(cur, rel)
	if len(keep) == len(rel.Processes) && !scales(cur, rel) {
		if !reflect.DeepEqual(cur.spec, rel) {
			a.mu.Lock()
			a.current = merge(cur, &release{number: rel.Number}, keep, rel)
			a.mu.Unlock()
			d.changed(a.key)
		}
		fmt.Fprintf(log, "Release %d runs already, as it is: nothing to restart\n", rel.Number)
		return nil
	}
	stopStart := steptime.Start(ctx, "start")
	fresh, err := d.startRelease(a, rel, cur, keep, log)
	stopStart()
	if err != nil {
		return err
	}
	next := merge(cur, fresh, keep, rel)
	a.mu.Lock()
	a.pending = fresh
	a.mu.Unlock()

	stopHealth := steptime.Start(ctx, "health check")
	failed, err := waitHealthy(ctx, fresh, log)
	stopHealth()
	if err != nil {
		fmt.Fprintf(log, "Release %d failed: %v\n", rel.Number, err)
		if lines := failed.lastOutput(); len(lines) > 0 {
			fmt.Fprintf(log, "Last output of %s:\n", failed.name())
			for _, l := range lines {
				fmt.Fprintf(log, "  %s\n", l)
			}
		}
		a.mu.Lock()
		a.pending = nil
		a.mu.Unlock()
		stopAll(fresh.instances)
		if a.current != nil {
			fmt.Fprintf(log, "Release %d keeps serving\n", a.current.number)
		}
		return fmt.Errorf("release %d not deployed: %w", rel.Number, err)
	}

	stopSwitch := steptime.Start(ctx, "switch")
	a.mu.Lock()
	a.current, a.pending = next, nil
	a.updateRoutesLocked()
	a.mu.Unlock()
	d.changed(a.key)
	stopSwitch()
	switch {
	case len(keep) == 0:
		fmt.Fprintf(log, "Traffic switched to release %d\n", rel.Number)
	case len(fresh.instances) > 0:
		fmt.Fprintf(log, "Traffic switched to the new instances of release %d\n", rel.Number)
	}
	if old := replaced(cur, keep, rel); len(old) > 0 {
		defer steptime.Start(ctx, "drain")()
		if d.opts.DrainDelay > 0 {
			t := time.NewTimer(d.opts.DrainDelay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if len(keep) > 0 {
			fmt.Fprintf(log, "Stopping %s\n", instanceNames(old))
		} else {
			fmt.Fprintf(log, "Stopping release %d\n", cur.number)
		}
		stopAll(old)
	}
	fmt.Fprintf(log, "Release %d is live\n", rel.Number)
	return nil
}

// keptProcesses returns the processes of rel whose running instances a
// Deploy of rel keeps: none unless cur runs the same release as rel, with
// nothing changed but the processes' Restart and Replicas, then those whose
// Restart rel leaves empty or as it is. A kept process whose Replicas
// changed is scaled: instances are added to those it has, or the last ones
// stopped.
func keptProcesses(cur *release, rel runtime.Release) map[string]bool {
	keep := map[string]bool{}
	if cur == nil || cur.number != rel.Number || !reflect.DeepEqual(unscaled(cur.spec), unscaled(rel)) {
		return keep
	}
	for name, p := range rel.Processes {
		if p.Restart == "" || p.Restart == cur.restarts[name] {
			keep[name] = true
		}
	}
	return keep
}

// unscaled returns rel with no process's Restart or Replicas set: what a
// restart or a scale leaves as it is.
func unscaled(rel runtime.Release) runtime.Release {
	procs := make(map[string]runtime.Process, len(rel.Processes))
	for name, p := range rel.Processes {
		p.Restart, p.Replicas = "", 0
		procs[name] = p
	}
	rel.Processes = procs
	return rel
}

// scales reports whether a Deploy of rel changes how many instances of a
// process cur runs.
func scales(cur *release, rel runtime.Release) bool {
	for name, p := range rel.Processes {
		if len(cur.of(name)) != p.Replicas {
			return true
		}
	}
	return false
}

// of returns r's instances of process, by index.
func (r *release) of(process string) []*instance {
	var out []*instance
	for _, i := range r.instances {
		if i.process == process {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].index < out[b].index })
	return out
}

// merge returns the release that serves once fresh is healthy, process by
// process: the kept processes' instances of cur that rel still wants (the
// first Replicas) and those fresh added, the other processes' of fresh.
func merge(cur, fresh *release, keep map[string]bool, rel runtime.Release) *release {
	next := &release{number: rel.Number, spec: rel, restarts: map[string]string{}}
	for _, name := range rel.ProcessNames() {
		next.restarts[name] = rel.Processes[name].Restart
		if keep[name] {
			next.restarts[name] = cur.restarts[name]
			kept := cur.of(name)
			next.instances = append(next.instances, kept[:min(len(kept), rel.Processes[name].Replicas)]...)
		}
		next.instances = append(next.instances, fresh.of(name)...)
	}
	return next
}

// replaced returns the instances of cur that a Deploy of rel keeping keep
// stops: all those of the processes it does not keep, and those past the
// Replicas rel wants of the others.
func replaced(cur *release, keep map[string]bool, rel runtime.Release) []*instance {
	if cur == nil {
		return nil
	}
	var out []*instance
	for _, i := range cur.instances {
		if !keep[i.process] || i.index >= rel.Processes[i.process].Replicas {
			out = append(out, i)
		}
	}
	return out
}

// instanceNames lists the instances' names: "web.1, web.2".
func instanceNames(instances []*instance) string {
	names := make([]string, 0, len(instances))
	for _, i := range instances {
		names = append(names, i.name())
	}
	return strings.Join(names, ", ")
}

func (d *Driver) validate(rel runtime.Release) error {
	if err := rel.Validate(); err != nil {
		return err
	}
	dir := rel.Dir
	if rel.RootFS != "" {
		if d.opts.Sandbox == nil {
			return errors.New("a Dockerfile image needs the sandbox: it brings its own root filesystem, which runs only in a container; start the platform without --unsafe-no-sandbox")
		}
		dir = rel.RootFS
	}
	if dir == "" {
		return errors.New("release has no directory to run in")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("release directory %s is not a directory", dir)
	}
	for _, name := range rel.ProcessNames() {
		p := rel.Processes[name]
		if p.Replicas > 0 && strings.TrimSpace(p.Command) == "" && len(p.Args) == 0 {
			return fmt.Errorf("process %s has no command", name)
		}
		if len(p.Args) > 0 && d.opts.Sandbox == nil {
			return fmt.Errorf("process %s runs the image's own command, which runs only in a sandbox", name)
		}
	}
	if _, err := limitsOf(rel.Resources); err != nil {
		return err
	}
	return nil
}

// app returns the app's record, creating it.
func (d *Driver) app(tenant, name string) (*app, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("process driver is closed")
	}
	k := appKey{tenant, name}
	a := d.apps[k]
	if a == nil {
		path := ""
		if d.opts.LogDir != "" {
			path = filepath.Join(d.opts.LogDir, tenant, name+".log")
		}
		a = &app{key: k, logs: newLogBuffer(d.opts.LogLines, path)}
		d.apps[k] = a
	}
	return a, nil
}

// startRelease starts every instance of rel but those cur runs of the
// processes in keep: of those, only the ones past what cur runs (a scale
// up).
func (d *Driver) startRelease(a *app, rel runtime.Release, cur *release, keep map[string]bool, log io.Writer) (*release, error) {
	r := &release{number: rel.Number}
	hc := rel.HealthCheck.WithDefaults()
	for _, name := range rel.ProcessNames() {
		p := rel.Processes[name]
		first := 0
		switch {
		case keep[name]:
			first = len(cur.of(name))
			if first < p.Replicas {
				r.scaling = append(r.scaling, name)
			}
		case len(keep) > 0:
			r.restarting = append(r.restarting, name)
		}
		for idx := first; idx < p.Replicas; idx++ {
			i := &instance{
				d: d, a: a, process: name, index: idx, release: rel.Number, id: strconv.FormatInt(d.started.Add(1), 10),
				command: p.Command, args: p.Args, dir: rel.Dir, rel: &rel,
				host:  "127.0.0.1",
				state: runtime.Starting, since: time.Now(),
				first: make(chan error, 1), stop: make(chan struct{}), done: make(chan struct{}),
			}
			env := d.baseEnv(rel)
			if name == runtime.WebProcess {
				hc := hc
				i.hc = &hc
				if d.opts.Sandbox != nil {
					i.port = d.opts.SandboxPort
				} else {
					port, err := d.ports.take()
					if err != nil {
						stopAll(r.instances)
						return nil, fmt.Errorf("finding a port for %s: %w", i.name(), err)
					}
					i.port, i.heldPort = port, true
				}
				env["PORT"] = strconv.Itoa(i.port)
			}
			for k, v := range env {
				i.env = append(i.env, k+"="+v)
			}
			sort.Strings(i.env)
			r.instances = append(r.instances, i)
			if i.port != 0 && d.opts.Sandbox != nil {
				fmt.Fprintf(log, "Starting %s of release %d in a sandbox\n", i.name(), rel.Number)
			} else if i.port != 0 {
				fmt.Fprintf(log, "Starting %s of release %d on port %d\n", i.name(), rel.Number, i.port)
			} else {
				fmt.Fprintf(log, "Starting %s of release %d\n", i.name(), rel.Number)
			}
			go i.run()
		}
	}
	return r, nil
}

// baseEnv is an instance's environment before PORT: the image's, then the
// release's own on top. In a sandbox the release's directory is /app and
// the image's paths say so; on the host they are the directory's own.
func (d *Driver) baseEnv(rel runtime.Release) map[string]string {
	env := map[string]string{"PATH": d.opts.PATH, "HOME": rel.Dir}
	switch {
	case d.opts.Sandbox != nil && rel.RootFS != "":
		env = map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/"}
	case d.opts.Sandbox != nil:
		env = map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": sandbox.AppDir}
	}
	for k, v := range rel.ImageEnv {
		if d.opts.Sandbox != nil && rel.RootFS == "" {
			v = sandbox.AppPaths(v, rel.Dir)
		}
		env[k] = v
	}
	for k, v := range rel.Env {
		env[k] = v
	}
	delete(env, "PORT")
	return env
}

// waitHealthy waits for every instance's first outcome; on a failure it
// returns the instance that failed.
func waitHealthy(ctx context.Context, r *release, log io.Writer) (*instance, error) {
	for _, i := range r.instances {
		select {
		case err := <-i.first:
			if err != nil {
				return i, err
			}
			if i.hc != nil {
				fmt.Fprintf(log, "%s passed its health check (%s)\n", i.name(), i.hc)
			}
		case <-ctx.Done():
			return i, fmt.Errorf("%s not healthy before the deadline (%s): %w", i.name(), i.snapshot().State, context.Cause(ctx))
		}
	}
	return nil, nil
}

// stopAll stops instances in parallel and waits until they are gone.
func stopAll(instances []*instance) {
	for _, i := range instances {
		i.requestStop()
	}
	for _, i := range instances {
		<-i.done
	}
}

// Remove implements runtime.Driver: it ends the app's one-off runs,
// cancels a running Deploy, stops every instance (SIGTERM, SIGKILL after
// GracePeriod) and deletes the app's logs.
func (d *Driver) Remove(ctx context.Context, tenant, name string) error {
	d.endRuns(&appKey{tenant, name}, errAppRemoved)
	a := d.lookup(tenant, name)
	if a == nil {
		return nil
	}
	d.stopApp(a, true)
	return nil
}

// stopApp cancels the app's Deploy, stops its instances and closes its
// logs (deleting the file when remove is set).
func (d *Driver) stopApp(a *app, remove bool) {
	a.mu.Lock()
	a.removed = true
	if a.cancelDeploy != nil {
		a.cancelDeploy()
	}
	a.mu.Unlock()
	a.deploy.Lock()
	defer a.deploy.Unlock()
	a.mu.Lock()
	cur := a.current
	a.current = nil
	a.updateRoutesLocked()
	a.mu.Unlock()
	if cur != nil {
		stopAll(cur.instances)
	}
	d.changed(a.key)
	a.logs.close(remove)
	if remove {
		d.mu.Lock()
		if d.apps[a.key] == a {
			delete(d.apps, a.key)
		}
		d.mu.Unlock()
	}
}

// Close ends every run and stops every app; the driver refuses new deploys
// and runs afterwards. Log files are kept.
func (d *Driver) Close() error {
	d.mu.Lock()
	d.closed = true
	apps := make([]*app, 0, len(d.apps))
	for _, a := range d.apps {
		apps = append(apps, a)
	}
	d.mu.Unlock()
	d.endRuns(nil, errDriverClosed)
	var wg sync.WaitGroup
	for _, a := range apps {
		wg.Go(func() { d.stopApp(a, false) })
	}
	wg.Wait()
	return nil
}

// Status implements runtime.Driver. An instance that crash-loops (crashed
// twice or more in a row, none of its processes running a minute since)
// makes the app not ready even while it runs between two crashes, and the
// message says so: "release 3: web.0 crashed 5 times; restarting in 32s;
// last exit: exit status 1".
func (d *Driver) Status(ctx context.Context, tenant, name string) (runtime.Status, error) {
	a := d.lookup(tenant, name)
	if a == nil {
		return runtime.Status{}, fmt.Errorf("%s/%s: %w", tenant, name, runtime.ErrNotFound)
	}
	a.mu.Lock()
	cur, pending := a.current, a.pending
	a.mu.Unlock()
	if cur == nil && pending == nil {
		return runtime.Status{}, fmt.Errorf("%s/%s: %w", tenant, name, runtime.ErrNotFound)
	}
	var st runtime.Status
	for _, r := range []*release{cur, pending} {
		if r != nil {
			for _, i := range r.instances {
				st.Instances = append(st.Instances, i.snapshot())
			}
		}
	}
	if cur == nil {
		st.Message = fmt.Sprintf("release %d is starting", pending.number)
		return st, nil
	}
	st.Release = cur.number
	var notReady []string
	running := 0
	now := time.Now()
	for _, i := range cur.instances {
		snap := i.snapshot()
		if why, looping := i.crashLoop(now); looping {
			notReady = append(notReady, why)
		} else if snap.State == runtime.Running {
			running++
		} else {
			notReady = append(notReady, fmt.Sprintf("%s is %s", snap.Name(), strings.ToLower(string(snap.State))))
		}
	}
	st.Ready = len(notReady) == 0
	switch {
	case st.Ready:
		st.Message = fmt.Sprintf("release %d: %d of %d instances running", cur.number, running, len(cur.instances))
	default:
		st.Message = fmt.Sprintf("release %d: %s", cur.number, strings.Join(notReady, "; "))
	}
	switch {
	case pending != nil && len(pending.restarting)+len(pending.scaling) > 0:
		if len(pending.restarting) > 0 {
			st.Message += fmt.Sprintf("; restarting %s", strings.Join(pending.restarting, ", "))
		}
		if len(pending.scaling) > 0 {
			st.Message += fmt.Sprintf("; scaling %s up", strings.Join(pending.scaling, ", "))
		}
	case pending != nil:
		st.Message += fmt.Sprintf("; release %d is starting", pending.number)
	}
	return st, nil
}

// Logs implements runtime.Driver. Lines come from the in-memory buffer of
// LogLines lines; a follower that falls more than 1024 lines behind loses
// lines rather than slowing the app down. A negative tail means all.
func (d *Driver) Logs(ctx context.Context, tenant, name string, tail int, follow bool) (<-chan runtime.LogLine, error) {
	a := d.lookup(tenant, name)
	if a == nil {
		return nil, fmt.Errorf("%s/%s: %w", tenant, name, runtime.ErrNotFound)
	}
	lines, sub := a.logs.tail(tail, follow)
	return a.logs.stream(ctx, lines, sub), nil
}

// PIDs returns the process ids of the app's running instances (current and
// pending releases), for tests and diagnostics.
func (d *Driver) PIDs(tenant, name string) []int {
	a := d.lookup(tenant, name)
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var pids []int
	for _, r := range []*release{a.current, a.pending} {
		if r == nil {
			continue
		}
		for _, i := range r.instances {
			if p := i.PID(); p != 0 {
				pids = append(pids, p)
			}
		}
	}
	return pids
}
