package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"bex.co/bex/internal/lines"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/sandbox"
)

// startupProbeInterval is how often a starting instance is checked until it
// first answers; after that, the health check's own Interval applies.
const startupProbeInterval = 200 * time.Millisecond

// startupProbeFast is how often a starting instance is checked during its
// first startupFastFor: most apps listen within it, and every gap between
// two probes is time a push waits for nothing (100 ms on average at
// startupProbeInterval). A probe of a port nothing listens on yet is a
// refused connection on loopback or the sandbox's bridge: cheap.
const (
	startupProbeFast = 20 * time.Millisecond
	startupFastFor   = 2 * time.Second
)

// stableAfter is how long a process must run before its restart backoff
// starts again from the minimum and its crashes are forgotten.
const stableAfter = time.Minute

// crashLoopAfter is how many crashes in a row, none after a stable run,
// make an instance crash-looping: not ready even while it runs between
// two crashes.
const crashLoopAfter = 2

// instance supervises one copy of a process: it starts it, restarts it when
// it exits on its own, checks its health, and stops it on request.
type instance struct {
	d       *Driver
	a       *app
	process string
	index   int
	// id is the instance's runtime.Instance.ID.
	id      string
	release int
	command string
	args    []string // the image's own command, sandbox only
	dir     string
	rel     *runtime.Release
	env     []string
	port    int                  // 0 for workers
	hc      *runtime.HealthCheck // nil for workers
	// heldPort says port was taken from the driver's range (host
	// processes share this machine's addresses).
	heldPort bool
	// host is the address the instance listens on: 127.0.0.1 on the host,
	// its container's address in a sandbox.
	host      string
	container *sandbox.Container

	mu       sync.Mutex
	state    runtime.InstanceState
	since    time.Time
	restarts int
	healthy  bool
	pid      int
	// started is when the current process started; crashes counts its
	// crashes in a row since the last stable run, lastExit says how the
	// last one ended and restartAt when the next start is due.
	started   time.Time
	crashes   int
	lastExit  string
	restartAt time.Time
	// recent are the last lines the process wrote, for the deploy log of
	// a release that does not start.
	recent []string

	// first receives the outcome of the first start: nil once healthy
	// (running, for a worker), or why it never got there.
	first     chan error
	firstOnce sync.Once

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func (i *instance) name() string { return runtime.InstanceName(i.process, i.index) }

func (i *instance) addr() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return net.JoinHostPort(i.host, strconv.Itoa(i.port))
}

func (i *instance) report(err error) {
	i.firstOnce.Do(func() { i.first <- err })
}

func (i *instance) system(format string, args ...any) {
	i.a.logs.add(runtime.LogLine{Time: time.Now(), Process: i.process, Instance: i.index, Stream: runtime.System, Text: fmt.Sprintf(format, args...)})
}

// changed tells the driver's watchers that the instance changed state.
func (i *instance) changed() { i.d.changed(i.a.key) }

func (i *instance) setState(s runtime.InstanceState) {
	i.mu.Lock()
	changed := i.state != s
	if changed {
		i.state, i.since = s, time.Now()
	}
	i.mu.Unlock()
	if changed {
		i.changed()
	}
}

func (i *instance) setHealthy(h bool) {
	i.mu.Lock()
	changed := i.healthy != h
	stateChanged := h && i.state != runtime.Running
	i.healthy = h
	if h {
		i.state, i.since = runtime.Running, time.Now()
	}
	i.mu.Unlock()
	if changed {
		i.a.updateRoutes()
	}
	if changed || stateChanged {
		i.changed()
	}
}

func (i *instance) isHealthy() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.healthy
}

func (i *instance) snapshot() runtime.Instance {
	i.mu.Lock()
	defer i.mu.Unlock()
	return runtime.Instance{Process: i.process, Index: i.index, ID: i.id, Release: i.release, State: i.state, Restarts: i.restarts, Since: i.since}
}

// crashLoop says, when the instance is crash-looping, what its status
// shows: "web.0 crashed 5 times; restarting in 32s; last exit: exit
// status 1". It is crash-looping from its crashLoopAfter-th crash in a
// row until a process of it has run stableAfter; a single crash shows only
// while the instance waits for its restart.
func (i *instance) crashLoop(now time.Time) (string, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	stable := i.state == runtime.Running && now.Sub(i.started) >= stableAfter
	if i.crashes == 0 || stable || (i.crashes < crashLoopAfter && i.state != runtime.Crashed) {
		return "", false
	}
	times := "times"
	if i.crashes == 1 {
		times = "time"
	}
	next := "restarted " + roundDuration(now.Sub(i.started)) + " ago"
	if i.state == runtime.Crashed {
		next = "restarting in " + roundDuration(i.restartAt.Sub(now))
	}
	return fmt.Sprintf("%s crashed %d %s; %s; last exit: %s", i.name(), i.crashes, times, next, i.lastExit), true
}

// roundDuration rounds d for a status line: to the second from a second
// up, to the millisecond below.
func roundDuration(d time.Duration) string {
	d = max(d, 0)
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// PID returns the process id of the instance's current process, 0 when none runs.
func (i *instance) PID() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.pid
}

// requestStop asks the supervisor to stop the instance; wait on i.done.
func (i *instance) requestStop() { i.stopOnce.Do(func() { close(i.stop) }) }

func (i *instance) stopping() bool {
	select {
	case <-i.stop:
		return true
	default:
		return false
	}
}

// run is the supervisor loop.
func (i *instance) run() {
	defer close(i.done)
	if i.heldPort {
		defer i.d.ports.give(i.port)
	}
	if i.d.opts.Sandbox != nil {
		c, err := i.createContainer()
		if err != nil {
			i.report(fmt.Errorf("%s could not start: %w", i.name(), err))
			i.system("Could not start: %v", err)
			i.mu.Lock()
			i.state, i.since = runtime.Crashed, time.Now()
			i.mu.Unlock()
			i.changed()
			<-i.stop
			i.setState(runtime.Stopped)
			return
		}
		defer func() {
			if err := c.Destroy(); err != nil {
				i.system("Could not remove its container: %v", err)
			}
		}()
	}
	backoff := i.d.opts.BackoffMin
	for {
		started := time.Now()
		exited, err := i.start()
		if err != nil {
			i.report(fmt.Errorf("%s could not start: %w", i.name(), err))
			i.system("Could not start: %v", err)
		} else {
			crashed, why := i.supervise(exited)
			if !crashed {
				return
			}
			if time.Since(started) >= stableAfter {
				backoff = i.d.opts.BackoffMin
				i.mu.Lock()
				i.crashes = 0
				i.mu.Unlock()
			}
			i.report(fmt.Errorf("%s exited during start-up: %s", i.name(), why))
			i.system("Process exited: %s; restarting in %s", why, backoff)
			i.mu.Lock()
			i.crashes++
			i.lastExit = why
			i.mu.Unlock()
		}
		i.mu.Lock()
		i.state, i.since, i.pid, i.healthy = runtime.Crashed, time.Now(), 0, false
		i.restarts++
		i.d.restarts.Add(1)
		i.restartAt = time.Now().Add(backoff)
		i.mu.Unlock()
		i.a.updateRoutes()
		i.changed()
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-i.stop:
			t.Stop()
			i.setState(runtime.Stopped)
			return
		}
		backoff = min(2*backoff, i.d.opts.BackoffMax)
	}
}

// createContainer prepares the instance's container: its network, its
// /app and its limits. Its address is the instance's from then on.
func (i *instance) createContainer() (*sandbox.Container, error) {
	limits, err := limitsOf(i.rel.Resources)
	if err != nil {
		return nil, err
	}
	args := i.args
	if len(args) == 0 {
		// The command runs as a child of a shell that waits for it, so
		// that it is not the container's PID 1: a PID 1 without a
		// handler ignores SIGTERM, a child does not.
		args = []string{"/bin/sh", "-c", `/bin/sh -c "$1" & wait $!`, "sh", i.command}
	}
	spec := sandbox.Spec{
		Tenant:   i.rel.Tenant,
		Hostname: i.process + "-" + strconv.Itoa(i.index),
		Args:     args,
		Env:      i.env,
		Limits:   limits,
	}
	if i.rel.RootFS != "" {
		spec.RootFS, spec.WorkDir = i.rel.RootFS, i.rel.WorkDir
	} else {
		spec.AppDir = i.dir
	}
	c, err := i.d.opts.Sandbox.Create(spec)
	if err != nil {
		return nil, err
	}
	i.mu.Lock()
	i.container, i.host = c, c.Addr().String()
	i.mu.Unlock()
	return c, nil
}

// start starts the process; exited receives its exit once its output is drained.
func (i *instance) start() (<-chan error, error) {
	if i.stopping() {
		return nil, errors.New("stopped")
	}
	var cmd *exec.Cmd
	if i.container != nil {
		var err error
		if cmd, err = i.container.Command(); err != nil {
			return nil, err
		}
	} else {
		cmd = exec.Command("/bin/sh", "-c", i.command)
		cmd.Dir = i.dir
		cmd.Env = i.env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	stdout := &lines.Writer{Emit: i.emitter(runtime.Stdout)}
	stderr := &lines.Writer{Emit: i.emitter(runtime.Stderr)}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A child that keeps the pipes open must not hold up Wait.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	i.mu.Lock()
	i.pid, i.started = cmd.Process.Pid, time.Now()
	if i.hc != nil {
		i.state, i.since = runtime.Starting, time.Now()
	} else {
		i.state, i.since = runtime.Running, time.Now()
	}
	i.mu.Unlock()
	i.changed()
	if i.container != nil {
		i.system("Started container %s at %s: %s", i.container.ID(), i.host, i.commandLine())
	} else {
		i.system("Started process %d: %s", cmd.Process.Pid, i.command)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		stdout.Flush()
		stderr.Flush()
		exited <- err
	}()
	return exited, nil
}

// recentLines is how many of its last output lines an instance keeps.
const recentLines = 10

func (i *instance) emitter(stream string) func([]byte, bool) {
	return func(line []byte, _ bool) {
		text := string(line)
		i.a.logs.add(runtime.LogLine{Time: time.Now(), Process: i.process, Instance: i.index, Stream: stream, Text: text})
		i.mu.Lock()
		if i.recent = append(i.recent, text); len(i.recent) > recentLines {
			i.recent = i.recent[len(i.recent)-recentLines:]
		}
		i.mu.Unlock()
	}
}

// lastOutput returns the last lines the process wrote.
func (i *instance) lastOutput() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.recent)
}

// supervise waits until the process exits or the instance is stopped. It
// reports crashed=false when the instance was stopped.
func (i *instance) supervise(exited <-chan error) (crashed bool, why string) {
	pid := i.PID()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if i.hc != nil {
		go i.checkHealth(ctx)
	} else {
		i.report(nil)
	}
	select {
	case err := <-exited:
		cancel()
		// Leave nothing of the group behind.
		killGroup(pid, groupKillWait)
		if i.stopping() {
			i.finishStop()
			return false, ""
		}
		why := exitReason(err)
		if i.container != nil && i.container.OOMKilled() {
			why = fmt.Sprintf("killed for going past its memory limit (%d MiB)", i.container.MemoryLimit()>>20)
		}
		return true, why
	case <-i.stop:
		cancel()
		i.setHealthy(false)
		i.setState(runtime.Stopped)
		i.system("Stopping process %d (SIGTERM)", pid)
		i.signal(pid, syscall.SIGTERM)
		t := time.NewTimer(i.d.opts.GracePeriod)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
			i.system("Process %d still running after %s: SIGKILL", pid, i.d.opts.GracePeriod)
			i.signal(pid, syscall.SIGKILL)
			<-exited
		}
		killGroup(pid, groupKillWait)
		i.finishStop()
		return false, ""
	}
}

// signal sends sig to every process of the instance: its container's, or
// its process group on the host.
func (i *instance) signal(pid int, sig syscall.Signal) {
	if i.container != nil {
		if err := i.container.Signal(sig); err == nil {
			return
		}
	}
	_ = syscall.Kill(-pid, sig)
}

// commandLine is what the instance runs, as the log shows it.
func (i *instance) commandLine() string {
	if len(i.args) > 0 {
		return strings.Join(i.args, " ")
	}
	return i.command
}

func (i *instance) finishStop() {
	i.mu.Lock()
	i.state, i.since, i.pid, i.healthy = runtime.Stopped, time.Now(), 0, false
	i.mu.Unlock()
	i.a.updateRoutes()
	i.changed()
	i.report(fmt.Errorf("%s was stopped", i.name()))
	i.system("Stopped")
}

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// checkHealth probes the instance until ctx ends, moving it between
// Starting, Running and Unhealthy and reporting its first outcome.
func (i *instance) checkHealth(ctx context.Context) {
	hc := *i.hc
	port := i.port
	if hc.Port != 0 {
		port = hc.Port
	}
	begin := time.Now()
	deadline := begin.Add(i.d.opts.StartTimeout)
	var ok, fails int
	everHealthy, timedOut := false, false
	interval := min(startupProbeInterval, hc.Interval)
	for {
		connected, result := i.probe(ctx, hc, port)
		if ctx.Err() != nil {
			return
		}
		healthy := connected && result == ""
		switch {
		case healthy:
			fails = 0
			ok++
			if ok >= hc.SuccessThreshold && !i.isHealthy() {
				if !everHealthy {
					i.system("Healthy: %s", hc)
				} else {
					i.system("Healthy again: %s", hc)
				}
				everHealthy = true
				interval = hc.Interval
				i.setHealthy(true)
				i.report(nil)
			}
		case !connected && !everHealthy && time.Now().Before(deadline):
			// Still starting: not listening yet does not count.
			ok = 0
		case !connected && !everHealthy && !timedOut:
			// Past the start-up deadline without ever listening: say so once,
			// then keep checking at the normal pace.
			why := fmt.Sprintf("%s did not accept connections on port %d within %s", i.name(), port, i.d.opts.StartTimeout)
			i.system("Unhealthy: %s", why)
			i.setState(runtime.Unhealthy)
			i.report(errors.New(why))
			timedOut = true
			interval = hc.Interval
		default:
			ok = 0
			fails++
			interval = hc.Interval
			if fails >= hc.FailureThreshold {
				why := fmt.Sprintf("%s failed its health check %s: %s (%d of %d)", i.name(), hc, result, fails, hc.FailureThreshold)
				if everHealthy && i.isHealthy() {
					i.system("Unhealthy: %s", why)
					i.setHealthy(false)
					i.setState(runtime.Unhealthy)
				}
				if !everHealthy && fails == hc.FailureThreshold {
					i.system("Unhealthy: %s", why)
					i.setState(runtime.Unhealthy)
					i.report(errors.New(why))
				}
			}
		}
		wait := interval
		if !everHealthy && !timedOut && fails == 0 && time.Since(begin) < startupFastFor {
			wait = min(startupProbeFast, interval)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// probe runs one check. connected says whether the port accepted the
// connection; result is empty when the check passed, otherwise why not.
func (i *instance) probe(ctx context.Context, hc runtime.HealthCheck, port int) (connected bool, result string) {
	ctx, cancel := context.WithTimeout(ctx, hc.Timeout)
	defer cancel()
	i.mu.Lock()
	addr := net.JoinHostPort(i.host, strconv.Itoa(port))
	i.mu.Unlock()
	if hc.Path == "" {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, "connection refused"
		}
		c.Close()
		return true, ""
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+hc.Path, nil)
	if err != nil {
		return true, err.Error()
	}
	req.Header.Set("User-Agent", "bex-health-check")
	resp, err := i.d.probeClient.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return false, "connection refused"
		}
		if ctx.Err() != nil {
			return true, fmt.Sprintf("no answer within %s", hc.Timeout)
		}
		return true, err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return true, strconv.Itoa(resp.StatusCode)
	}
	return true, ""
}
