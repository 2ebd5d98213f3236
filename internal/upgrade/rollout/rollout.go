package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"bex.co/bex/internal/controlplane"
)

// MinServers is the least number of running apiservers a rollout starts
// with: KubeadmControlPlane refuses maxSurge 0 below three replicas, since a
// plane of two would run on one server during each step.
const MinServers = 3

// Step is one replacement: an old server out, its replacement in.
type Step struct {
	// Index counts the steps of one Run from 1.
	Index int
	// Total is the number of steps the Run expects: those done plus the
	// servers still outdated when this step began.
	Total int
	// Old is the name of the replaced server, OldVersion its version.
	Old, OldVersion string
	// New is the name of the replacement, NewVersion its version.
	New, NewVersion string
	// Killed reports that the old server was killed with SIGKILL instead of
	// drained and stopped.
	Killed bool
}

// Phase names the moment an Event reports.
type Phase string

// The phases of a rollout, in the order they happen. A step whose old server
// is killed has PhaseKilled instead of PhaseDraining, PhaseDrained and
// PhaseStopped.
const (
	// PhaseStarted: Run found the outdated servers. Step is zero.
	PhaseStarted Phase = "Started"
	// PhaseStepStarted: a step begins; Step names the old server and its
	// replacement.
	PhaseStepStarted Phase = "StepStarted"
	// PhaseDraining: the old server is being taken out of the load balancer
	// and drained.
	PhaseDraining Phase = "Draining"
	// PhaseDrained: the old server is out of the load balancer and its
	// connections drained, or the drain timeout passed.
	PhaseDrained Phase = "Drained"
	// PhaseStopped: the old server's process ended after SIGTERM.
	PhaseStopped Phase = "Stopped"
	// PhaseKilled: the old server was killed with SIGKILL and taken out of
	// the load balancer.
	PhaseKilled Phase = "Killed"
	// PhaseStarting: the replacement is being started.
	PhaseStarting Phase = "Starting"
	// PhaseReady: the replacement's /readyz answers 200 and it is in the
	// load balancer.
	PhaseReady Phase = "Ready"
	// PhaseGateWaiting: the gate was called and has not returned.
	PhaseGateWaiting Phase = "GateWaiting"
	// PhaseGatePassed: the gate returned nil.
	PhaseGatePassed Phase = "GatePassed"
	// PhaseCompleted: no server is outdated any more. Step is the last
	// step, or zero when there was nothing to do.
	PhaseCompleted Phase = "Completed"
	// PhaseFailed: the rollout stopped with Err. Step is the step it
	// stopped in, or zero.
	PhaseFailed Phase = "Failed"
)

// Server is one running apiserver as an Event sees it.
type Server struct {
	Name    string
	Version string
	// InLoadBalancer reports whether the server is in the load balancer's
	// rotation (always false on a plane without one).
	InLoadBalancer bool
}

// Event is one moment of a rollout.
type Event struct {
	Time  time.Time
	Phase Phase
	Step  Step
	// Servers are the running apiservers right after the moment, in the
	// plane's order.
	Servers []Server
	// Err is set on PhaseFailed.
	Err error
}

// Options configures a rollout.
type Options struct {
	// Version is the target version, such as "1.37.2". Required.
	Version string
	// Gate is called after each step, the last one included, once the
	// replacement is ready and in the load balancer, and before the next
	// step begins. It may block to pause the rollout (it should return when
	// ctx ends); an error aborts the rollout. Nil passes every step.
	Gate func(ctx context.Context, s Step) error
	// OnEvent receives each event, in order, on Run's goroutine; the
	// rollout waits for it, so it should return quickly (pausing is the
	// Gate's job). Nil drops events.
	OnEvent func(Event)
	// Kill chooses the steps whose old server is killed with SIGKILL, as a
	// machine lost mid-rollout, instead of drained and stopped. Nil kills
	// none.
	Kill func(Step) bool
	// Spec, when set, edits each replacement's spec after it was copied
	// from the old server's (MVP wiring, feature gates, runtime config and
	// extra arguments) with the new name and version.
	Spec func(*controlplane.APIServerSpec)
	// Outdated, when set, chooses the running servers to replace, instead
	// of "not at Version": for a rollout that changes flags and keeps the
	// version (wiring MVP on 1.35, say, outdated = NoMVP), as KCP rolls a
	// machine whose spec differs from its template. It must turn false for
	// a replacement, which Spec should see to, or the rollout never ends.
	// Servers are still replaced by servers at Version.
	Outdated func(*controlplane.APIServer) bool
}

// Validate reports what is wrong with the options.
func (o Options) Validate() error {
	if strings.TrimPrefix(o.Version, "v") == "" {
		return errors.New("rollout: target version is empty")
	}
	return nil
}

// Result is what a Run did.
type Result struct {
	Started, Finished time.Time
	// Steps are the steps done, gate passed or not.
	Steps []Step
}

// ErrTooFewServers is returned when the plane runs fewer than MinServers
// apiservers.
var ErrTooFewServers = errors.New("rollout: maxSurge 0 needs at least 3 running apiservers")

// Run rolls cp's running apiservers to opts.Version one at a time and returns
// once none is outdated, the gate aborts, a step fails or ctx ends. On error
// the plane is left as it stands; the Result says which steps were done.
func Run(ctx context.Context, cp *controlplane.ControlPlane, opts Options) (Result, error) {
	if cp == nil {
		return Result{}, errors.New("rollout: control plane is nil")
	}
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	r := &runner{cp: cp, opts: opts, target: strings.TrimPrefix(opts.Version, "v")}
	res := Result{Started: time.Now()}
	err := r.run(ctx, &res)
	res.Finished = time.Now()
	return res, err
}

type runner struct {
	cp     *controlplane.ControlPlane
	opts   Options
	target string
}

func (r *runner) run(ctx context.Context, res *Result) error {
	if n := len(r.running()); n < MinServers && len(r.outdated()) > 0 {
		err := fmt.Errorf("%w (running: %d)", ErrTooFewServers, n)
		r.emit(PhaseFailed, Step{}, err)
		return err
	}
	r.emit(PhaseStarted, Step{}, nil)
	var last Step
	for index := 1; ; index++ {
		outdated := r.outdated()
		if len(outdated) == 0 {
			r.emit(PhaseCompleted, last, nil)
			return nil
		}
		if err := ctx.Err(); err != nil {
			return r.fail(last, fmt.Errorf("rollout interrupted before step %d: %w", index, err))
		}
		old := outdated[0]
		step := Step{
			Index:      index,
			Total:      index + len(outdated) - 1,
			Old:        old.Name,
			OldVersion: old.Version,
			New:        replacementName(old.Name, old.Version, r.target, r.taken),
			NewVersion: r.target,
		}
		step.Killed = r.opts.Kill != nil && r.opts.Kill(step)
		if err := r.replace(ctx, old, step); err != nil {
			return r.fail(step, fmt.Errorf("step %d/%d, replacing %s with %s: %w", step.Index, step.Total, step.Old, step.New, err))
		}
		res.Steps = append(res.Steps, step)
		last = step
		if r.opts.Gate != nil {
			r.emit(PhaseGateWaiting, step, nil)
			if err := r.opts.Gate(ctx, step); err != nil {
				return r.fail(step, fmt.Errorf("gate after step %d/%d: %w", step.Index, step.Total, err))
			}
			r.emit(PhaseGatePassed, step, nil)
		}
	}
}

// replace takes old out (drain and stop, or kill) and brings its replacement
// in, in that order: maxSurge 0.
func (r *runner) replace(ctx context.Context, old *controlplane.APIServer, step Step) error {
	r.emit(PhaseStepStarted, step, nil)
	if step.Killed {
		if err := r.cp.KillAPIServer(old.Name); err != nil {
			return fmt.Errorf("killing: %w", err)
		}
		r.emit(PhaseKilled, step, nil)
	} else {
		r.emit(PhaseDraining, step, nil)
		if err := r.cp.DrainAPIServer(ctx, old.Name); err != nil {
			return fmt.Errorf("draining: %w", err)
		}
		r.emit(PhaseDrained, step, nil)
		if err := r.cp.StopAPIServer(old.Name); err != nil {
			return fmt.Errorf("stopping: %w", err)
		}
		r.emit(PhaseStopped, step, nil)
	}
	spec := old.Spec
	spec.Name, spec.Version = step.New, step.NewVersion
	spec.FeatureGates = maps.Clone(spec.FeatureGates)
	spec.ExtraArgs = slices.Clone(spec.ExtraArgs)
	if r.opts.Spec != nil {
		r.opts.Spec(&spec)
	}
	r.emit(PhaseStarting, step, nil)
	if _, err := r.cp.StartAPIServer(ctx, spec); err != nil {
		return fmt.Errorf("starting the replacement: %w", err)
	}
	r.emit(PhaseReady, step, nil)
	return nil
}

func (r *runner) fail(step Step, err error) error {
	r.emit(PhaseFailed, step, err)
	return err
}

// running returns the plane's running apiservers, in the plane's order.
func (r *runner) running() []*controlplane.APIServer {
	var out []*controlplane.APIServer
	for _, s := range r.cp.APIServers() {
		if s.Running() {
			out = append(out, s)
		}
	}
	return out
}

// outdated returns the running apiservers to replace (Options.Outdated, or
// those not at the target version), oldest first, as KCP picks the oldest
// outdated machine.
func (r *runner) outdated() []*controlplane.APIServer {
	outdated := r.opts.Outdated
	if outdated == nil {
		outdated = func(s *controlplane.APIServer) bool { return s.Version != r.target }
	}
	return slices.DeleteFunc(r.running(), func(s *controlplane.APIServer) bool { return !outdated(s) })
}

// taken reports whether a server of that name was ever started on the plane.
func (r *runner) taken(name string) bool { return r.cp.APIServer(name) != nil }

func (r *runner) emit(phase Phase, step Step, err error) {
	if r.opts.OnEvent == nil {
		return
	}
	ev := Event{Time: time.Now(), Phase: phase, Step: step, Err: err}
	var inLB []string
	if lb := r.cp.LoadBalancer(); lb != nil {
		inLB = lb.Backends()
	}
	for _, s := range r.running() {
		ev.Servers = append(ev.Servers, Server{Name: s.Name, Version: s.Version, InLoadBalancer: slices.Contains(inLB, s.Addr())})
	}
	r.opts.OnEvent(ev)
}

// replacementName names the server that replaces old (at oldVersion) at
// version: old's base name (without a version suffix a previous rollout gave
// it) and the version, so "apiserver-1" at 1.36.3 becomes
// "apiserver-1-1.37.2". When that name was ever used (a rollout to the same
// version), a generation counter follows: "apiserver-1-1.37.2-2". A new name
// is a new hostname and so a new apiserver identity, as a new machine.
func replacementName(old, oldVersion, version string, taken func(string) bool) string {
	base := strings.TrimSuffix(old, "-"+oldVersion)
	if i := strings.LastIndex(base, "-"+oldVersion+"-"); i > 0 {
		if _, err := strconv.Atoi(base[i+len(oldVersion)+2:]); err == nil {
			base = base[:i]
		}
	}
	name := base + "-" + version
	for gen := 2; taken(name); gen++ {
		name = base + "-" + version + "-" + strconv.Itoa(gen)
	}
	return name
}
