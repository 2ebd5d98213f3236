package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"bex.co/bex/internal/sandbox"
)

// maxBackoff caps the delay before a crashed container starts again;
// backoffReset is how long a container runs before its next crash starts
// the back-off over (the kubelet's figures).
const (
	maxBackoff   = 5 * time.Minute
	backoffReset = 10 * time.Minute
)

// podWorker runs one Pod's container from admission to the Pod's removal.
type podWorker struct {
	a   *Agent
	uid types.UID

	changed  chan struct{} // a newer Pod arrived
	vanished chan struct{} // the Pod is gone
	once     sync.Once
	// stopping is closed when the agent stops: the worker ends and
	// leaves a container that can be adopted running.
	stopping <-chan struct{}
	// kept is the container an earlier agent left for the Pod, to adopt.
	kept *kept

	mu     sync.Mutex
	latest *corev1.Pod
	st     podState
	// container is the Pod's container from its creation to its removal,
	// for the stats summary.
	container *sandbox.Container
	// attach is the run of a container made with stdin in progress, for
	// attach sessions.
	attach *attachPoint

	statusMu sync.Mutex // orders status writes

	refusal *refusal // set when the agent admits no more Pods

	// image is what the container was made from, in use until the
	// container is removed.
	image *image

	// took is when the worker took the Pod: its activeDeadlineSeconds
	// counts from then.
	took time.Time
}

// refusal is why the agent does not run a Pod: the Pod fails with it.
type refusal struct{ reason, message string }

// podState is what the worker knows of its Pod's container, the source of
// the Pod's status.
type podState struct {
	phase                corev1.PodPhase
	reason, message      string
	podIP                string
	startTime            *metav1.Time
	sandboxReady         bool
	waiting              *corev1.ContainerStateWaiting
	running              *corev1.ContainerStateRunning
	terminated, last     *corev1.ContainerStateTerminated
	started, ready       bool
	restarts             int32
	imageID, containerID string
}

func newPodWorker(a *Agent, pod *corev1.Pod) *podWorker {
	return &podWorker{
		a: a, uid: pod.UID, latest: pod, took: time.Now(),
		changed:  make(chan struct{}, 1),
		vanished: make(chan struct{}),
		st: podState{phase: corev1.PodPending,
			waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
	}
}

func (w *podWorker) pod() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.latest = pod
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *podWorker) vanish() { w.once.Do(func() { close(w.vanished) }) }

func (w *podWorker) isVanished() bool {
	select {
	case <-w.vanished:
		return true
	default:
		return false
	}
}

// isStopping reports whether the agent stops.
func (w *podWorker) isStopping() bool {
	select {
	case <-w.stopping:
		return true
	default:
		return false
	}
}

// adoptable reports whether a container of c outlives the agent, for the
// next one to adopt: not one with stdin or a terminal, whose input and
// terminal are the agent's.
func adoptable(c corev1.Container) bool { return !c.Stdin && !c.TTY }

// deleting reports whether the Pod is being deleted, and its grace period.
func (w *podWorker) deleting() (bool, time.Duration) {
	p := w.pod()
	if p.DeletionTimestamp == nil {
		return false, 0
	}
	return true, time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 30)) * time.Second
}

// setState changes the state under the lock.
func (w *podWorker) setState(f func(*podState)) {
	w.mu.Lock()
	f(&w.st)
	w.mu.Unlock()
}

func (w *podWorker) setContainer(c *sandbox.Container) {
	w.mu.Lock()
	w.container = c
	w.mu.Unlock()
}

// wait waits for d, for the Pod's deletion or for its disappearance;
// it reports whether d passed.
func (w *podWorker) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		if del, _ := w.deleting(); del {
			return false
		}
		select {
		case <-t.C:
			return true
		case <-w.vanished:
			return false
		case <-w.stopping:
			return false
		case <-w.changed:
		}
	}
}

// run runs the Pod until it is deleted (then it stops the container and
// removes the Pod) or vanishes (then it stops the container), or until
// the agent stops (then it leaves an adoptable container as it is).
func (w *podWorker) run(ctx context.Context) {
	pod := w.pod()
	log := w.a.opts.Log.WithValues("pod", klog.KObj(pod))
	if err := admit(pod); err != nil && w.refusal == nil {
		w.refusal = &refusal{reason: "Unsupported", message: err.Error()}
	}
	if r := w.refusal; r != nil {
		log.Info("Refusing a pod", "reason", r.reason, "message", r.message)
		w.setState(func(s *podState) {
			s.phase, s.reason, s.message = corev1.PodFailed, r.reason, r.message
			s.waiting = nil
		})
		w.a.recorder.Event(pod, corev1.EventTypeWarning, r.reason, r.message)
		w.pushStatus(ctx)
		if w.kept != nil {
			w.a.dropKept(log, w.kept)
		}
		return
	}
	c := pod.Spec.Containers[0]
	var container *sandbox.Container
	var resumed *sandbox.Process // adopted, running
	var ended *int32             // adopted, ended meanwhile: its exit
	if w.kept != nil {
		container, resumed, ended = w.adopt(ctx, pod, c, w.kept)
		if container != nil {
			w.setContainer(container)
		}
	}
	defer func() {
		if container != nil && w.isStopping() && !w.isVanished() && adoptable(c) {
			// The agent stops: the container, its volumes and its record
			// stay for the next agent.
			return
		}
		w.a.removeKept(pod.UID)
		if container != nil {
			w.setContainer(nil)
			if err := container.Destroy(); err != nil {
				log.Error(err, "Removing a container")
			}
			w.a.images.release(w.image)
		}
		if err := w.a.volumes.remove(string(pod.UID)); err != nil {
			log.Error(err, "Removing the pod's volumes")
		}
		if del, _ := w.deleting(); del && !w.isVanished() {
			w.a.finalDelete(ctx, w.pod())
		}
	}()

	backoff := w.a.opts.RestartBackoff
	for {
		// An adopted process of a Pod deleted meanwhile is stopped with
		// its grace period, as runOnce stops it.
		if del, _ := w.deleting(); (del && resumed == nil) || w.isVanished() {
			return
		}
		if w.pastDeadline() {
			w.failPastDeadline(ctx, pod)
			return
		}
		if container == nil {
			var err error
			container, err = w.prepare(ctx, pod, c)
			if err != nil {
				w.pushStatus(ctx)
				if !w.wait(backoff) {
					return
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			w.setContainer(container)
		}
		started := time.Now()
		var exit int32
		var stopped bool
		if ended != nil {
			exit, ended = *ended, nil
		} else {
			exit, stopped = w.runOnce(ctx, pod, c, container, resumed)
			resumed = nil
		}
		if stopped {
			return
		}
		if w.pastDeadline() {
			w.failPastDeadline(ctx, pod)
			return
		}
		if time.Since(started) > backoffReset {
			backoff = w.a.opts.RestartBackoff
		}
		restart := pod.Spec.RestartPolicy == corev1.RestartPolicyAlways || pod.Spec.RestartPolicy == "" ||
			(pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && exit != 0)
		if !restart {
			w.setState(func(s *podState) {
				s.phase = corev1.PodSucceeded
				if exit != 0 {
					s.phase = corev1.PodFailed
				}
			})
			w.pushStatus(ctx)
			for w.wait(time.Hour) {
			}
			return
		}
		w.setState(func(s *podState) {
			s.waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", backoff, c.Name, pod.Name, pod.Namespace, pod.UID)}
		})
		w.pushStatus(ctx)
		if !w.wait(backoff) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
		w.setState(func(s *podState) { s.restarts++ })
	}
}

// deadline is when the Pod's activeDeadlineSeconds ends, counted from
// when the worker took it; zero without one. It is the latest Pod's: the
// API lets it be set or lowered on a running Pod (to stop it and keep
// it), never raised.
func (w *podWorker) deadline() time.Time {
	s := w.pod().Spec.ActiveDeadlineSeconds
	if s == nil {
		return time.Time{}
	}
	return w.took.Add(time.Duration(*s) * time.Second)
}

// pastDeadline reports whether the Pod's activeDeadlineSeconds has passed.
func (w *podWorker) pastDeadline() bool {
	d := w.deadline()
	return !d.IsZero() && !time.Now().Before(d)
}

// failPastDeadline fails the Pod as the kubelet fails one active longer
// than its activeDeadlineSeconds, and waits for its deletion.
func (w *podWorker) failPastDeadline(ctx context.Context, pod *corev1.Pod) {
	const msg = "Pod was active on the node longer than the specified deadline"
	w.setState(func(s *podState) {
		s.phase, s.reason, s.message = corev1.PodFailed, "DeadlineExceeded", msg
		s.waiting = nil
	})
	w.a.recorder.Event(pod, corev1.EventTypeNormal, "DeadlineExceeded", msg)
	w.pushStatus(ctx)
	for w.wait(time.Hour) {
	}
}

// prepare pulls the image, resolves the environment and creates the
// container; on failure the state says why the container waits.
func (w *podWorker) prepare(ctx context.Context, pod *corev1.Pod, c corev1.Container) (*sandbox.Container, error) {
	waitWith := func(reason string, err error) error {
		w.setState(func(s *podState) { s.waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()} })
		w.a.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "%s: %v", reason, err)
		return err
	}
	secrets, err := w.pullSecrets(ctx, pod)
	if err != nil {
		return nil, waitWith("ErrImagePull", err)
	}
	w.a.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulling", "Pulling image %q", c.Image)
	img, err := w.a.images.get(ctx, tenantOf(pod), c.Image, secrets)
	if err != nil {
		return nil, waitWith("ErrImagePull", fmt.Errorf("pulling image %q: %w", c.Image, err))
	}
	w.a.recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Image %q unpacked (%s)", c.Image, img.config.Digest)
	spec, err := w.containerSpec(ctx, pod, c, img)
	if err != nil {
		w.a.images.release(img)
		return nil, waitWith("CreateContainerConfigError", err)
	}
	container, err := w.a.opts.Sandbox.Create(spec)
	if err != nil {
		w.a.images.release(img)
		return nil, waitWith("CreateContainerError", err)
	}
	w.image = img
	w.setState(func(s *podState) {
		s.podIP, s.sandboxReady = container.Addr().String(), true
		s.imageID = imageID(c.Image, img.config.Digest)
		s.containerID = "runc://" + container.ID()
	})
	return container, nil
}

// runOnce starts the container's process, or goes on with resumed, the
// one an earlier agent started, and waits for it to end; stopped is true
// when the worker stopped it for the Pod's deletion or left it at the
// agent's end. exit is the process's exit code.
func (w *podWorker) runOnce(ctx context.Context, pod *corev1.Pod, c corev1.Container, container *sandbox.Container, resumed *sandbox.Process) (exit int32, stopped bool) {
	var now metav1.Time
	running := func() {
		if resumed != nil {
			// Adopted: its status goes on from the earlier agent's.
			now = w.snapshot().running.StartedAt
			w.pushStatus(ctx)
			return
		}
		now = metav1.Now()
		w.setState(func(s *podState) {
			s.phase = corev1.PodRunning
			if s.startTime == nil {
				s.startTime = &now
			}
			s.waiting, s.running = nil, &corev1.ContainerStateRunning{StartedAt: now}
			if s.terminated != nil {
				s.last, s.terminated = s.terminated, nil
			}
			s.started = c.StartupProbe == nil
			s.ready = s.started && c.ReadinessProbe == nil
		})
		w.a.recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.Name)
		w.pushStatus(ctx)
	}
	var point *attachPoint
	if c.Stdin {
		point = newAttachPoint(c)
		w.setAttach(point)
		defer w.setAttach(nil)
	}
	// What the process's output is copied with, waited for before its
	// end is told to an attach session.
	var outputs sync.WaitGroup
	ended := func(code int32) {
		if point != nil {
			outputs.Wait()
			point.end(code)
		}
	}
	out, err := w.a.logs.open(pod, c.Name, w.snapshot().restarts, resumed != nil)
	if err == nil {
		defer out.Close()
	}
	held := err == nil && point != nil && c.StdinOnce
	if held {
		// The process waits for its one attach, so that none of its
		// output is lost: the container is reported running meanwhile.
		running()
		if !w.holdForAttach(point) {
			ended(137)
			return 137, true
		}
		if sz := point.heldSize(); sz != nil && c.TTY {
			err = container.SetTerminalSize(*sz)
		}
	}
	var cmd *exec.Cmd
	var proc *sandbox.Process
	var stdin io.WriteCloser
	if err == nil && adoptable(c) {
		// A process that outlives the agent; its output is copied from
		// its pipes until it ends, or until the agent stops.
		proc = resumed
		if proc == nil {
			proc, err = container.Start()
		}
		if err == nil {
			defer proc.Close()
			for _, stream := range []struct {
				name string
				from io.Reader
			}{{"stdout", proc.Stdout()}, {"stderr", proc.Stderr()}} {
				to := out.stream(stream.name)
				outputs.Add(1)
				go func() {
					defer outputs.Done()
					_, _ = io.Copy(to, stream.from)
				}()
			}
		}
	} else if err == nil {
		if cmd, err = container.Command(); err == nil {
			if !c.TTY {
				cmd.Stdout, cmd.Stderr = out.stream("stdout"), out.stream("stderr")
				if point != nil {
					cmd.Stdout = io.MultiWriter(cmd.Stdout, point.output(false))
					cmd.Stderr = io.MultiWriter(cmd.Stderr, point.output(true))
					stdin, err = cmd.StdinPipe()
				}
			}
			cmd.WaitDelay = time.Second
			if err == nil {
				err = cmd.Start()
			}
		}
	}
	var console *sandbox.Console
	if err == nil && c.TTY {
		// The terminal's output, both streams, is the log's stdout.
		if console, err = container.Console(); err == nil {
			defer console.Close()
			to := out.stream("stdout")
			if point != nil {
				to = io.MultiWriter(to, point.output(false))
			}
			outputs.Add(1)
			go func() {
				defer outputs.Done()
				_, _ = io.Copy(to, console)
			}()
			if c.Stdin {
				stdin = console
			}
		} else {
			_ = container.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}
	if err != nil {
		ended(128)
		w.setState(func(s *podState) {
			s.running = nil
			s.waiting = &corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: err.Error()}
		})
		w.a.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		w.pushStatus(ctx)
		return 128, !w.wait(w.a.opts.RestartBackoff)
	}
	if point != nil {
		point.start(stdin, console)
	}
	if !held {
		running()
	}

	exited := make(chan error, 1)
	if proc != nil {
		go func() {
			code := exitCode(proc.Wait())
			// All it wrote is in the log before its end is told.
			outputs.Wait()
			if code == 0 {
				exited <- nil
				return
			}
			exited <- procExit(code)
		}()
		w.writeKept(pod, c, container)
	} else {
		go func() { exited <- cmd.Wait() }()
	}
	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	unhealthy := make(chan string, 1)
	// The deadline's timer, set anew when a newer Pod lowers it.
	var deadline <-chan time.Time
	var deadlineAt time.Time
	var deadlineTimer *time.Timer
	setDeadline := func() {
		at := w.deadline()
		if at.Equal(deadlineAt) {
			return
		}
		if deadlineTimer != nil {
			deadlineTimer.Stop()
		}
		deadlineAt, deadline, deadlineTimer = at, nil, nil
		if !at.IsZero() {
			deadlineTimer = time.NewTimer(time.Until(at))
			deadline = deadlineTimer.C
		}
	}
	setDeadline()
	if del, _ := w.deleting(); del {
		// Deleted before an adopted process was seen again.
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	defer func() {
		if deadlineTimer != nil {
			deadlineTimer.Stop()
		}
	}()
	// The readiness and liveness probes, as the kubelet runs them: from
	// the container's start, or once its startup probe passed, and then
	// the readiness probe at once.
	probesFrom := time.Now()
	if resumed != nil {
		probesFrom = now.Time
	}
	probe := func() {
		if c.ReadinessProbe != nil {
			go w.probe(probeCtx, pod, c, c.ReadinessProbe, "Readiness", probesFrom, func(ok bool, _ string) {
				changed := false
				w.setState(func(s *podState) { changed, s.ready = s.ready != ok, ok })
				if changed {
					w.pushStatus(ctx)
					if proc != nil {
						w.writeKept(pod, c, container)
					}
				}
			})
		}
		if c.LivenessProbe != nil {
			go w.probe(probeCtx, pod, c, c.LivenessProbe, "Liveness", probesFrom, func(ok bool, msg string) {
				if !ok {
					select {
					case unhealthy <- msg:
					default:
					}
				}
			})
		}
	}
	failedStart := make(chan string, 1)
	if c.StartupProbe == nil {
		probe()
	} else {
		startupCtx, stopStartup := context.WithCancel(probeCtx)
		go w.probe(startupCtx, pod, c, c.StartupProbe, "Startup", probesFrom, func(ok bool, msg string) {
			if !ok {
				select {
				case failedStart <- msg:
				default:
				}
				return
			}
			stopStartup()
			ready := c.ReadinessProbe == nil
			w.setState(func(s *podState) { s.started, s.ready = true, ready })
			w.pushStatus(ctx)
			probe()
		})
	}

	var waitErr error
	for done := false; !done; {
		select {
		case waitErr = <-exited:
			done = true
		case <-w.vanished:
			waitErr, stopped = w.stop(c, container, exited, 0), true
			done = true
		case <-w.stopping:
			if proc == nil {
				waitErr, stopped = w.stop(c, container, exited, 0), true
				done = true
				break
			}
			// The agent stops: the process runs on, for the next agent
			// to adopt; what it wrote so far is in the log.
			stopProbes()
			proc.Close()
			outputs.Wait()
			return 0, true
		case <-w.changed:
			if del, grace := w.deleting(); del {
				waitErr, stopped = w.stop(c, container, exited, grace), true
				done = true
				break
			}
			setDeadline()
		case <-deadline:
			grace := time.Duration(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
			waitErr = w.stop(c, container, exited, grace)
			done = true
		case msg := <-unhealthy:
			w.a.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Container %s failed liveness probe (%s), will be restarted", c.Name, msg)
			grace := time.Duration(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
			waitErr = w.stop(c, container, exited, grace)
			done = true
		case msg := <-failedStart:
			w.a.recorder.Eventf(pod, corev1.EventTypeNormal, "Killing", "Container %s failed startup probe (%s), will be restarted", c.Name, msg)
			grace := time.Duration(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
			waitErr = w.stop(c, container, exited, grace)
			done = true
		}
	}
	stopProbes()
	exit, reason := exitOf(waitErr)
	if console != nil {
		// What the process wrote last comes before its end.
		copied := make(chan struct{})
		go func() { outputs.Wait(); close(copied) }()
		select {
		case <-copied:
		case <-time.After(time.Second):
			console.Close()
		}
	}
	ended(exit)
	if container.OOMKilled() {
		reason = "OOMKilled"
	}
	finished := metav1.Now()
	w.setState(func(s *podState) {
		s.running, s.started, s.ready = nil, false, false
		s.terminated = &corev1.ContainerStateTerminated{ExitCode: exit, Reason: reason,
			StartedAt: now, FinishedAt: finished, ContainerID: s.containerID}
	})
	if !stopped {
		w.pushStatus(ctx)
	}
	return exit, stopped
}

// holdForAttach holds the run of a stdinOnce container until its first
// attach, at most Options.AttachWait; false when the Pod is deleted or
// vanishes meanwhile.
func (w *podWorker) holdForAttach(p *attachPoint) bool {
	t := time.NewTimer(w.a.opts.AttachWait)
	defer t.Stop()
	for {
		if del, _ := w.deleting(); del {
			return false
		}
		select {
		case <-p.first:
			return true
		case <-t.C:
			return true
		case <-w.vanished:
			return false
		case <-w.stopping:
			return false
		case <-w.changed:
		}
	}
}

// minStopGrace is the least time a container gets between SIGTERM and
// SIGKILL, whatever its preStop sleep left of the grace period: the
// kubelet's minimumGracePeriodInSeconds.
const minStopGrace = 2 * time.Second

// stop stops the container as the kubelet's killContainer does. With a
// grace period, the container first sleeps its preStop sleep, cut short
// when the grace period ends, and keeps running and serving meanwhile;
// then it gets SIGTERM, and SIGKILL once what is left of the grace period
// has passed (the sleep's whole seconds taken off, at least minStopGrace).
// Without one, or once the Pod vanishes, it gets SIGKILL at once. It
// returns the process's exit.
func (w *podWorker) stop(c corev1.Container, container *sandbox.Container, exited <-chan error, grace time.Duration) error {
	if grace > 0 {
		if sleep := preStopSleep(c); sleep > 0 {
			start := time.Now()
			t := time.NewTimer(min(sleep, grace))
			select {
			case err := <-exited:
				t.Stop()
				return err
			case <-w.vanished:
				t.Stop()
				return w.kill(container, exited)
			case <-t.C:
			}
			grace -= time.Since(start).Truncate(time.Second)
		}
		grace = max(grace, minStopGrace)
		container.Signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case err := <-exited:
			return err
		case <-w.vanished:
		case <-t.C:
		}
	}
	return w.kill(container, exited)
}

// kill sends SIGKILL to the container's processes and returns the
// process's exit.
func (w *podWorker) kill(container *sandbox.Container, exited <-chan error) error {
	container.Signal(syscall.SIGKILL)
	select {
	case err := <-exited:
		return err
	case <-time.After(10 * time.Second):
		return errors.New("the container did not stop after SIGKILL")
	}
}

// preStopSleep is the container's preStop sleep (the one preStop hook
// bex-node runs: admit refuses the others), zero without one.
func preStopSleep(c corev1.Container) time.Duration {
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		return time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	}
	return 0
}

// procExit is the end of a sandbox.Process that did not exit 0.
type procExit int32

func (e procExit) Error() string { return fmt.Sprintf("exit status %d", int32(e)) }

// exitOf reads a process's end as the kubelet reports it.
func exitOf(err error) (int32, string) {
	if err == nil {
		return 0, "Completed"
	}
	var es procExit
	if errors.As(err, &es) {
		return int32(es), "Error"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int32(ws.Signal()), "Error"
		}
		return int32(ee.ExitCode()), "Error"
	}
	return 128, "Error"
}

func (w *podWorker) snapshot() podState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// pushStatus writes the Pod's status from the worker's state. It tries
// again on a conflict, and on Forbidden for about ten seconds: the
// apiserver's Node authorizer refuses the node a Pod its graph does not
// have bound to it yet, and its informer may lag the agent's watch, most
// for a Pod refused as soon as it is seen, whose status is written once.
func (w *podWorker) pushStatus(ctx context.Context) {
	w.statusMu.Lock()
	defer w.statusMu.Unlock()
	pods := w.a.opts.Client.CoreV1().Pods(w.pod().Namespace)
	name := w.pod().Name
	backoff := wait.Backoff{Steps: 8, Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second}
	again := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsForbidden(err) }
	err := retry.OnError(backoff, again, func() error {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != w.uid {
			return nil
		}
		w.fillStatus(p)
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		w.a.opts.Log.Error(err, "Writing a pod's status", "pod", klog.KRef(w.pod().Namespace, name))
	}
}

// fillStatus sets p's status from the worker's state.
func (w *podWorker) fillStatus(p *corev1.Pod) {
	st := w.snapshot()
	s := &p.Status
	s.Phase, s.Reason, s.Message = st.phase, st.reason, st.message
	s.HostIP = w.a.opts.Address.String()
	s.HostIPs = []corev1.HostIP{{IP: s.HostIP}}
	if st.podIP != "" {
		s.PodIP = st.podIP
		s.PodIPs = []corev1.PodIP{{IP: st.podIP}}
	}
	if s.StartTime == nil {
		s.StartTime = st.startTime
		if s.StartTime == nil {
			s.StartTime = ptr.To(metav1.Now())
		}
	}
	boolStatus := func(b bool) corev1.ConditionStatus {
		if b {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	ready := st.ready && st.running != nil
	conds := []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: boolStatus(st.sandboxReady)},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: boolStatus(ready)},
		{Type: corev1.PodReady, Status: boolStatus(ready)},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	}
	for _, c := range conds {
		setPodCondition(s, c)
	}
	if len(p.Spec.Containers) == 0 || w.refusal != nil {
		return
	}
	c := p.Spec.Containers[0]
	cs := corev1.ContainerStatus{
		Name: c.Name, Image: c.Image, ImageID: st.imageID, ContainerID: st.containerID,
		Ready: ready, RestartCount: st.restarts, Started: ptr.To(st.running != nil && st.started),
	}
	switch {
	case st.running != nil:
		cs.State.Running = st.running
	case st.waiting != nil:
		cs.State.Waiting = st.waiting
	case st.terminated != nil:
		cs.State.Terminated = st.terminated
	}
	if st.last != nil {
		cs.LastTerminationState.Terminated = st.last
	}
	if st.waiting != nil && st.terminated != nil {
		cs.LastTerminationState.Terminated = st.terminated
	}
	s.ContainerStatuses = []corev1.ContainerStatus{cs}
}

// setPodCondition sets c, keeping the transition time of a condition whose
// status did not change.
func setPodCondition(s *corev1.PodStatus, c corev1.PodCondition) {
	now := metav1.Now()
	for i := range s.Conditions {
		if s.Conditions[i].Type == c.Type {
			if s.Conditions[i].Status == c.Status {
				return
			}
			c.LastTransitionTime = now
			s.Conditions[i] = c
			return
		}
	}
	c.LastTransitionTime = now
	s.Conditions = append(s.Conditions, c)
}

// imageID is the image's reference by digest, as the kubelet reports it.
func imageID(ref, digest string) string {
	repo := ref
	if i := strings.LastIndex(repo, "@"); i >= 0 {
		repo = repo[:i]
	} else if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo + "@" + digest
}

// finalDelete removes a deleted Pod whose container is gone, as the
// kubelet does once it stopped a Pod: with no grace period left, and only
// that Pod (its UID).
func (a *Agent) finalDelete(ctx context.Context, pod *corev1.Pod) {
	err := a.opts.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		a.opts.Log.Error(err, "Removing a stopped pod", "pod", klog.KObj(pod))
	}
}
