package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"

	"bex.co/bex/apiserver/local"
	"bex.co/bex/deploy"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/mvp"
	"bex.co/bex/internal/store"
	"bex.co/bex/internal/upgrade/rollout"
	"bex.co/bex/internal/upgrade/verify"
)

// scenario is one case of the suite.
type scenario struct {
	name, title string
	// from is the version the plane starts at, to the upgrade's target.
	from, to string
	// wired: the plane starts with MVP wired.
	wired bool
	// staleLeaseAfter, when set, makes every verifier round remove the
	// identity leases unrenewed for that long.
	staleLeaseAfter time.Duration
	run             func(t *testing.T, h *harness)
}

// harness is one scenario's fresh plane, the tenant's load, the verifier
// rounds, the rollout's moments and the records, all timed.
type harness struct {
	t      *testing.T
	sc     scenario
	cp     *controlplane.ControlPlane
	st     *store.Store
	served servedSets
	// skew are the resources the tenant lists that only to serves.
	skew   []schema.GroupVersionResource
	vopts  verify.Options
	load   *tenantLoad
	runID  string
	begun  time.Time // the subtest's start
	origin time.Time // the tenant load's start: the timeline's zero

	mu      sync.Mutex
	lanes   []*lane
	steps   []*stepRec
	rounds  []round
	pauses  []pause
	rollout string // the rollout in progress ("wire", "upgrade"), or ""
	step    rollout.Step
	hold    *pause // a failed background round asks the next gate to hold
	inGate  bool
	// beforeGate, when set, runs at the start of each gate, before the
	// verifier (a scenario's fault injection).
	beforeGate func(ctx context.Context, s rollout.Step)
	outcome    string
	notes      []string
	blockers   []string // preflight's, as it last ran
	finished   time.Time
	report     *scenarioReport
	// leaseWatch runs until each killed server's identity lease is seen
	// gone (see watchLease).
	leaseWatch sync.WaitGroup
}

// lane is one apiserver's life, a lane of the timeline.
type lane struct {
	Name, Version string
	Wired         bool
	// Start: the process started; Ready: it joined the load balancer;
	// Leave: it left it (drain or kill); End: its process ended.
	Start, Ready, Leave, End time.Time
	Killed                   bool
	// PeerSyncWait is how long the server, once ready, waited for its
	// peers to list what it serves before it joined the load balancer.
	PeerSyncWait time.Duration
	// LeaseGone is when its identity lease was first seen gone after a
	// kill.
	LeaseGone time.Time
}

// stepRec is one step of a rollout as the suite saw it.
type stepRec struct {
	Rollout        string
	Step           rollout.Step
	Started, Ready time.Time
}

// round is one verifier run.
type round struct {
	Start, Done time.Time
	// Source is "gate" (the rollout's gate after a step), "background"
	// (continuously during steps) or "decide" (while the rollout is
	// paused).
	Source  string
	Rollout string
	Step    int
	Targets []string
	Report  verify.Report
	Err     string
	// Void: a target left or joined the load balancer during the round,
	// so its verdict is not the plane's.
	Void bool
	// Failures are the failed probes of resources the tenant uses.
	Failures []verify.Probe
}

// green reports whether the round is a passing verdict.
func (r round) green() bool { return r.Err == "" && !r.Void && len(r.Failures) == 0 }

// verdict reports whether the round counts: a void or erroring round says
// nothing about the plane.
func (r round) verdict() bool { return r.Err == "" && !r.Void }

// pause is a moment the rollout was held.
type pause struct {
	At time.Time
	// GateAt is when the rollout's gate blocked on it.
	GateAt   time.Time
	Source   string
	Rollout  string
	Step     int
	Reason   string
	Decision string
	// ResumedAt is when the gate returned, zero on an abort.
	ResumedAt time.Time
}

// gracefulShutdownArgs are the apiserver flags the platform's cluster
// template sets so that a rollout can stop a server without failing the
// requests on connections still open to it. The plane's load balancer takes
// the server out and drains it before the rollout stops it, as the
// platform's hand-off does on Hetzner; after SIGTERM the server asks clients
// to retry elsewhere at once (429 with Retry-After, which client-go
// follows). No delay: during one it would still serve, but answer 503 to
// whatever it proxies, its peer-endpoint store being closed already.
func gracefulShutdownArgs() []string {
	return []string{"--shutdown-delay-duration=0s", "--shutdown-send-retry-after=true"}
}

// newHarness starts the scenario's plane: three apiservers at sc.from
// behind the load balancer, the platform CRDs, bex-apiserver registered as
// the scheduler's APIService, the tenant with its RBAC, and the tenant's
// load. It records the scenario's run in st.
func newHarness(t *testing.T, sc scenario, served servedSets, st *store.Store) *harness {
	h := &harness{t: t, sc: sc, st: st, served: served, begun: time.Now()}
	h.skew = served.newIn(sc.from, sc.to)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	var specs []controlplane.APIServerSpec
	for i := 1; i <= 3; i++ {
		specs = append(specs, controlplane.APIServerSpec{Name: fmt.Sprintf("apiserver-%d", i), Version: sc.from, NoMVP: !sc.wired,
			ExtraArgs: gracefulShutdownArgs()})
	}
	h.cp = cptest.StartWith(t, controlplane.Options{LoadBalancer: true, DrainTimeout: 3 * time.Second, APIServers: specs})
	// A failed scenario keeps its servers' logs (the plane's directory goes
	// with it): the evidence of what each apiserver answered and why.
	t.Cleanup(func() {
		if t.Failed() {
			keepLogs(t, filepath.Join(h.cp.DataDir(), "logs"), filepath.Join(outDir(t), "upgrade-logs", sc.name))
		}
	})
	up := time.Now()
	for _, s := range h.cp.APIServers() {
		h.lanes = append(h.lanes, &lane{Name: s.Name, Version: s.Version, Wired: !s.Spec.NoMVP, Start: h.begun, Ready: up, PeerSyncWait: s.PeerSyncWait})
	}
	admin := h.cp.RESTConfig()
	if _, err := kubeapply.InstallCRDs(ctx, admin, deploy.CRDs()); err != nil {
		t.Fatalf("installing the platform CRDs: %v", err)
	}
	srv, err := local.Start(t.Context(), local.Options{ControlPlane: h.cp, Dir: t.TempDir(), Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatalf("starting bex-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if err := grantTenant(ctx, admin, h.skew); err != nil {
		t.Fatal(err)
	}
	if err := waitTenantServed(ctx, h.cp); err != nil {
		t.Fatal(err)
	}
	h.vopts = verify.Options{
		CRDs:              []verify.CRDProbe{verify.AppProbe(), routeProbe()},
		Namespace:         verifyNamespace,
		Aggregated:        []schema.GroupVersionResource{clusterCapacities},
		RemoveStaleLeases: sc.staleLeaseAfter > 0,
		StaleLeaseAfter:   sc.staleLeaseAfter,
	}
	// The plane passes before anything happens to it.
	if r := h.verifyUntil(ctx, "baseline", time.Minute, round.green); !r.green() {
		t.Fatalf("the fresh plane does not pass the verifier: %s", describe(r))
	}

	run, err := st.StartUpgradeRun(ctx, store.NewUpgradeRun{FleetUpgrade: "upgrade-suite/" + sc.name,
		UID: sc.name + "-" + utilrand.String(8), TargetVersion: "v" + sc.to})
	if err != nil {
		t.Fatalf("recording the run: %v", err)
	}
	h.runID = run.ID

	if h.load, err = startTenantLoad(h.cp, h.skew); err != nil {
		t.Fatal(err)
	}
	h.origin = time.Now()
	t.Cleanup(h.finish)
	t.Logf("%s: plane of 3×%s (MVP %s) ready in %.1fs; tenant lists %v", sc.name, sc.from, wiredWord(sc.wired),
		h.origin.Sub(h.begun).Seconds(), gvrStrings(h.skew))
	return h
}

// routeProbe probes the Route CRD as verify.AppProbe probes Apps.
func routeProbe() verify.CRDProbe {
	return verify.CRDProbe{
		Resource:   routesGVR,
		Kind:       "Route",
		Namespaced: true,
		Spec:       map[string]any{"hostname": "verify.acme.example.com", "appRef": map[string]any{"name": "web"}},
	}
}

func wiredWord(b bool) string {
	if b {
		return "wired"
	}
	return "not wired"
}

// soak lets the tenant's load run on the plane as it stands.
func (h *harness) soak(d time.Duration) {
	select {
	case <-time.After(d):
	case <-h.t.Context().Done():
	}
}

// finish stops the tenant's load (once) and builds the scenario's report.
func (h *harness) finish() {
	h.mu.Lock()
	done := !h.finished.IsZero()
	h.mu.Unlock()
	if done || h.load == nil {
		return
	}
	h.load.halt()
	h.leaseWatch.Wait()
	h.mu.Lock()
	h.finished = time.Now()
	h.mu.Unlock()
	h.report = h.buildReport()
}

func (h *harness) note(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, fmt.Sprintf(format, args...))
}

// live returns the apiservers in the load balancer's rotation: running and
// ready, what a tenant can reach.
func (h *harness) live() []*controlplane.APIServer {
	inLB := h.cp.LoadBalancer().Backends()
	var out []*controlplane.APIServer
	for _, s := range h.cp.APIServers() {
		if s.Running() && slices.Contains(inLB, s.Addr()) {
			out = append(out, s)
		}
	}
	return out
}

func names(servers []*controlplane.APIServer) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Name
	}
	return out
}

// tenantUses reports whether the tenant's load requests gvr.
func (h *harness) tenantUses(gvr schema.GroupVersionResource) bool {
	return gvr == appsGVR || gvr == routesGVR || gvr == clusterCapacities || slices.Contains(h.skew, gvr)
}

// verifyRound runs the verifier once against every live apiserver,
// directly, and keeps the round.
func (h *harness) verifyRound(ctx context.Context, source string) round {
	servers := h.live()
	h.mu.Lock()
	r := round{Start: time.Now(), Source: source, Rollout: h.rollout, Step: h.step.Index, Targets: names(servers)}
	h.mu.Unlock()
	var targets []verify.Target
	for _, s := range servers {
		targets = append(targets, verify.Target{Name: s.Name, Config: s.RESTConfig()})
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	rep, err := verify.Run(rctx, targets, h.vopts)
	cancel()
	r.Done, r.Report = time.Now(), rep
	if err != nil {
		r.Err = err.Error()
	}
	r.Void = !slices.Equal(r.Targets, names(h.live()))
	for _, p := range rep.Failures() {
		if h.tenantUses(p.Resource) {
			r.Failures = append(r.Failures, p)
		}
	}
	if ctx.Err() == nil {
		h.mu.Lock()
		h.rounds = append(h.rounds, r)
		h.mu.Unlock()
	}
	return r
}

// verifyUntil runs rounds until done accepts one or timeout passes, and
// returns the last.
func (h *harness) verifyUntil(ctx context.Context, source string, timeout time.Duration, done func(round) bool) round {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		r := h.verifyRound(ctx, source)
		if done(r) || ctx.Err() != nil {
			return r
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// describe renders a round's verdict in one line.
func describe(r round) string {
	switch {
	case r.Err != "":
		return "no verdict: " + r.Err
	case r.Void:
		return "void: the servers changed during the round"
	case len(r.Failures) == 0 && len(r.Report.Findings) == 0:
		return fmt.Sprintf("green: %d probes on %s", len(r.Report.Probes), strings.Join(r.Targets, ", "))
	case len(r.Failures) == 0:
		var fs []string
		for _, f := range r.Report.Findings {
			fs = append(fs, f.Reason)
		}
		return fmt.Sprintf("green on the tenant's resources (%d probes); findings: %s", len(r.Report.Probes), strings.Join(fs, ", "))
	}
	var fs []string
	for i, p := range r.Failures {
		if i == 4 {
			fs = append(fs, fmt.Sprintf("and %d more", len(r.Failures)-4))
			break
		}
		fs = append(fs, fmt.Sprintf("%s %s %s %s (%d)", p.APIServer, p.Outcome, p.Verb, verify.GVRString(p.Resource), p.Status))
	}
	return fmt.Sprintf("failed: %d of %d probes: %s", len(r.Failures), len(r.Report.Probes), strings.Join(fs, "; "))
}

// roll runs one rollout (kind "wire" or "upgrade") with the suite's gate:
// the verifier runs continuously in the background during each step and
// asks the next gate to hold at once when it fails; the gate runs it once
// more on every live apiserver and holds on a failure, and then onPause
// decides: nil continues, an error aborts the rollout.
func (h *harness) roll(ctx context.Context, kind string, opts rollout.Options, onPause func(context.Context, rollout.Step, *pause) error) (rollout.Result, error) {
	h.mu.Lock()
	h.rollout = kind
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.rollout = ""
		h.mu.Unlock()
	}()
	from := h.cp.APIServers()[0].Version
	if kind == "wire" {
		h.record(ctx, "wire-mvp", "", "v"+from, "v"+opts.Version, store.StepPassed, "apiservers rolled with the MVP flags (and on 1.35 the gate)", nil)
	} else {
		h.record(ctx, "bump", "", "v"+from, "v"+opts.Version, store.StepPassed, "version set to v"+opts.Version, nil)
	}
	opts.OnEvent = h.onEvent
	opts.Gate = func(ctx context.Context, s rollout.Step) error { return h.gate(ctx, s, onPause) }

	bg, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { h.watch(bg) })
	res, err := rollout.Run(ctx, h.cp, opts)
	stop()
	wg.Wait()
	return res, err
}

// watch runs the verifier continuously while a step is in progress (not
// while the gate runs it), and asks the next gate to hold when a round
// fails.
func (h *harness) watch(ctx context.Context) {
	for ctx.Err() == nil {
		h.mu.Lock()
		skip := h.inGate || h.step.Index == 0
		h.mu.Unlock()
		if !skip {
			r := h.verifyRound(ctx, "background")
			if r.verdict() && !r.green() {
				h.mu.Lock()
				if h.hold == nil {
					h.hold = &pause{At: r.Done, Source: "background", Rollout: r.Rollout, Step: r.Step, Reason: describe(r)}
				}
				h.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// killServer SIGKILLs a running apiserver outside the rollout (a machine
// lost), and marks its lane as killed.
func (h *harness) killServer(name string) error {
	// The kill is the start of the call: KillAPIServer returns once the
	// server is dead and its identity lease removed.
	now := time.Now()
	if err := h.cp.KillAPIServer(name); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.lanes {
		if l.Name == name {
			l.End, l.Leave, l.Killed = now, now, true
			h.watchLease(l)
		}
	}
	return nil
}

// watchLease polls, through the load balancer, until the identity lease of
// a killed server is gone, and keeps when it saw it gone (at most 50 ms
// late). The plane removes it itself (KillAPIServer); a verifier round
// with RemoveStaleLeases would only once it is StaleLeaseAfter unrenewed.
// h.mu is held.
func (h *harness) watchLease(l *lane) {
	h.leaseWatch.Go(func() {
		cs, err := kubernetes.NewForConfig(h.cp.RESTConfig())
		if err != nil {
			h.t.Errorf("watching the identity lease of %s: %v", l.Name, err)
			return
		}
		sel := mvp.IdentityLeaseSelector + "," + corev1.LabelHostname + "=" + l.Name
		ctx, cancel := context.WithTimeout(h.t.Context(), 2*time.Minute)
		defer cancel()
		for ctx.Err() == nil {
			list, err := cs.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err == nil && len(list.Items) == 0 {
				h.mu.Lock()
				l.LeaseGone = time.Now()
				h.mu.Unlock()
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

// gate is the rollout's gate after step s.
func (h *harness) gate(ctx context.Context, s rollout.Step, onPause func(context.Context, rollout.Step, *pause) error) error {
	h.mu.Lock()
	h.inGate = true
	before := h.beforeGate
	h.mu.Unlock()
	if before != nil {
		before(ctx, s)
	}
	defer func() {
		h.mu.Lock()
		h.inGate, h.hold = false, nil
		h.mu.Unlock()
	}()
	// A round whose servers changed under it (or that got no answer) is
	// run again.
	r := h.verifyUntil(ctx, "gate", 2*time.Minute, round.verdict)
	h.mu.Lock()
	hold := h.hold
	h.mu.Unlock()
	if r.green() && hold == nil {
		h.record(ctx, "verify", s.New, "v"+s.OldVersion, "v"+s.NewVersion, store.StepPassed, describe(r), r.Report.Probes)
		return nil
	}
	p := &pause{At: r.Done, GateAt: r.Done, Source: "gate", Rollout: r.Rollout, Step: s.Index, Reason: describe(r)}
	if hold != nil && hold.At.Before(p.At) {
		p.At, p.Source, p.Reason = hold.At, hold.Source, hold.Reason
	}
	h.mu.Lock()
	h.pauses = append(h.pauses, *p)
	idx := len(h.pauses) - 1
	h.mu.Unlock()
	h.t.Logf("%s: paused after step %d (%s, %+.1fs): %s", h.sc.name, s.Index, p.Source, h.since(p.At), p.Reason)
	h.record(ctx, "verify", s.New, "v"+s.OldVersion, "v"+s.NewVersion, store.StepPaused, describe(r), r.Report.Probes)
	h.runState(ctx, store.UpgradePaused, fmt.Sprintf("paused after machine %s: %s", s.New, p.Reason))

	err := onPause(ctx, s, p)
	h.mu.Lock()
	if err != nil {
		p.Decision = "abort: " + err.Error()
	} else {
		p.ResumedAt = time.Now()
		if p.Decision == "" {
			p.Decision = "continue"
		}
	}
	h.pauses[idx] = *p
	h.mu.Unlock()
	if err != nil {
		h.runState(ctx, store.UpgradeAborted, p.Decision)
		return err
	}
	h.runState(ctx, store.UpgradeRunning, "resumed: "+p.Decision)
	return nil
}

// abortOnPause is the decision of a scenario that does not expect to pause,
// or expects to abort.
func abortOnPause(_ context.Context, s rollout.Step, p *pause) error {
	return fmt.Errorf("the verifier failed after step %d: %s", s.Index, p.Reason)
}

func (h *harness) since(t time.Time) float64 { return t.Sub(h.origin).Seconds() }

// onEvent keeps the rollout's moments: the lanes of the timeline, and a
// machine step in the records for each replacement that joined.
func (h *harness) onEvent(ev rollout.Event) {
	h.mu.Lock()
	joined := h.keepEvent(ev)
	h.mu.Unlock()
	if s := ev.Step; joined {
		h.record(context.Background(), "machine", s.New, "v"+s.OldVersion, "v"+s.NewVersion, store.StepPassed,
			fmt.Sprintf("machine %s joined with v%s, replacing %s", s.New, s.NewVersion, s.Old), nil)
	}
}

// keepEvent updates the lanes with ev and reports whether a replacement
// joined. h.mu is held.
func (h *harness) keepEvent(ev rollout.Event) (joined bool) {
	find := func(name string) *lane {
		for i := len(h.lanes) - 1; i >= 0; i-- {
			if h.lanes[i].Name == name {
				return h.lanes[i]
			}
		}
		return nil
	}
	s := ev.Step
	switch ev.Phase {
	case rollout.PhaseStepStarted:
		h.step = s
		h.steps = append(h.steps, &stepRec{Rollout: h.rollout, Step: s, Started: ev.Time})
	case rollout.PhaseDraining:
		if l := find(s.Old); l != nil {
			l.Leave = ev.Time
		}
	case rollout.PhaseStopped, rollout.PhaseKilled:
		if l := find(s.Old); l != nil {
			l.End, l.Killed = ev.Time, ev.Phase == rollout.PhaseKilled
			if l.Leave.IsZero() {
				l.Leave = ev.Time
			}
			if l.Killed {
				h.watchLease(l)
			}
		}
	case rollout.PhaseStarting:
		h.lanes = append(h.lanes, &lane{Name: s.New, Version: s.NewVersion, Start: ev.Time})
	case rollout.PhaseReady:
		if n := len(h.steps); n > 0 {
			h.steps[n-1].Ready = ev.Time
		}
		if l := find(s.New); l != nil {
			l.Ready = ev.Time
			if srv := h.cp.APIServer(s.New); srv != nil {
				l.Wired = !srv.Spec.NoMVP
				l.PeerSyncWait = srv.PeerSyncWait
			}
		}
		return true
	}
	return false
}

// servedAt reports whether a ready apiserver served gvr itself at t.
func (h *harness) servedAt(gvr schema.GroupVersionResource, t time.Time) bool {
	for _, l := range h.lanes {
		if l.Ready.IsZero() || t.Before(l.Ready) || (!l.End.IsZero() && !t.Before(l.End)) {
			continue
		}
		if _, ok := h.served[l.Version][gvr]; ok {
			return true
		}
	}
	return false
}

// record adds a finished step to the scenario's run, with the verifier's
// probes, as the FleetUpgrade controller does. Probes the records cannot
// hold (Unserved, which the upgrade_probes table does not know) are
// counted in the step's message instead.
func (h *harness) record(ctx context.Context, kind, machine, from, to string, outcome store.UpgradeStepOutcome, msg string, probes []verify.Probe) {
	if h.runID == "" {
		return
	}
	step, err := h.st.StartUpgradeStep(ctx, h.runID, store.NewUpgradeStep{Cluster: "upgrade-suite/" + h.sc.name, Kind: kind, Machine: machine, FromVersion: from, ToVersion: to})
	if err != nil {
		h.t.Errorf("recording a %s step: %v", kind, err)
		return
	}
	var samples []store.ProbeSample
	unserved := 0
	for _, p := range probes {
		if p.Outcome == verify.Unserved {
			unserved++
			continue
		}
		samples = append(samples, store.ProbeSample{APIServer: p.APIServer, Resource: verify.GVRString(p.Resource), Verb: p.Verb,
			Status: p.Status, Outcome: string(p.Outcome), Message: p.Message, At: p.At})
	}
	if unserved > 0 {
		msg += fmt.Sprintf(" (%d Unserved probes not recorded)", unserved)
	}
	if err := h.st.RecordProbes(ctx, step.ID, samples); err != nil {
		h.t.Errorf("recording probes: %v", err)
	}
	if _, err := h.st.FinishUpgradeStep(ctx, step.ID, outcome, msg); err != nil {
		h.t.Errorf("finishing a %s step: %v", kind, err)
	}
}

// runState moves the run to state, unless it has ended already (the gate
// records an abort before the scenario sees the rollout's error).
func (h *harness) runState(ctx context.Context, state store.UpgradeRunState, msg string) {
	if run, err := h.st.GetUpgradeRun(ctx, h.runID); err == nil && run.State.Final() {
		return
	}
	if _, err := h.st.SetUpgradeRunState(ctx, h.runID, state, msg); err != nil {
		h.t.Errorf("recording the run's state %s: %v", state, err)
	}
}

// setOutcome says how the scenario ended, for the report.
func (h *harness) setOutcome(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outcome = fmt.Sprintf(format, args...)
}

// keepLogs copies the log files of dir into dst, replacing what an earlier
// run left there, and prints where they are.
func keepLogs(t *testing.T, dir, dst string) {
	err := os.RemoveAll(dst)
	if err == nil {
		err = os.CopyFS(dst, os.DirFS(dir))
	}
	if err != nil {
		t.Logf("keeping the servers' logs: %v", err)
		return
	}
	fmt.Println("upgrade logs:", dst)
}
