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

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/internal/upgrade/preflight"
	"bex.co/bex/internal/upgrade/rollout"
	"bex.co/bex/internal/upgrade/verify"
)

// EnvRun names the variable that runs the suite; make test-upgrade sets it.
const EnvRun = "BEX_TEST_UPGRADE"

// The pinned versions.
const (
	v135 = "1.35.4"
	v136 = "1.36.3"
	v137 = "1.37.2"
)

// TestMain sends the in-process bex-apiserver's klog output to a file in
// the system's temporary directory, so that the test log stays readable.
func TestMain(m *testing.M) {
	if os.Getenv(EnvRun) == "1" {
		if f, err := os.CreateTemp("", "bex-upgrade-suite-klog-*.log"); err == nil {
			klog.LogToStderr(false)
			klog.SetOutput(f)
			ctrllog.SetLogger(klog.NewKlogr())
			fmt.Fprintln(os.Stderr, "bex-apiserver logs:", f.Name())
		}
	}
	pgtest.Main(m)
}

// TestMixedVersionSuite runs every scenario on a fresh control plane and
// writes the report, also when a scenario fails.
func TestMixedVersionSuite(t *testing.T) {
	if os.Getenv(EnvRun) != "1" {
		t.Skipf("the mixed-version suite starts dozens of kube-apiservers: run it with make test-upgrade (%s=1)", EnvRun)
	}
	started := time.Now()
	rep := &suiteReport{Skew: map[string][]string{}}
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		rep.GeneratedAt = time.Now()
		rep.DurationSeconds = time.Since(started).Seconds()
		paths, err := rep.write(outDir(t))
		if err != nil {
			t.Errorf("writing the report: %v", err)
			return
		}
		for _, p := range paths {
			fmt.Println("upgrade report:", p)
		}
		t.Logf("the suite took %.0f s\n%s", rep.DurationSeconds, rep.summaryTable())
	})

	served := discoverServed(t, v135, v136, v137)
	for _, p := range [][2]string{{v135, v136}, {v136, v137}} {
		rep.Skew[p[0]+"→"+p[1]] = gvrStrings(served.newIn(p[0], p[1]))
	}
	st, err := store.Open(t.Context(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatalf("opening the store: %v", err)
	}
	t.Cleanup(st.Close)

	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			var h *harness
			t.Cleanup(func() {
				r := &scenarioReport{Name: sc.name, Title: sc.title, From: sc.from, To: sc.to, MVPWired: sc.wired, Outcome: "did not start"}
				if h != nil {
					h.finish()
					r = h.report
					r.Records = h.records()
				}
				r.Passed = !t.Failed()
				mu.Lock()
				rep.Scenarios = append(rep.Scenarios, r)
				mu.Unlock()
			})
			h = newHarness(t, sc, served, st)
			sc.run(t, h)
		})
	}
}

// outDir is the repository's out/ directory.
func outDir(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "out")
		}
	}
	return filepath.Join(dir, "out")
}

func scenarios() []scenario {
	return []scenario{
		{name: "wired", title: "1.36.3 → 1.37.2 with MVP wired: the old apiservers proxy what only the new ones serve.",
			from: v136, to: v137, wired: true, run: runWired},
		{name: "not-wired", title: "1.36.3 → 1.37.2 without MVP (kubeadm's flags): the old apiservers answer 404 for what only the new ones serve; the verifier pauses the rollout after the first machine and the suite aborts it.",
			from: v136, to: v137, wired: false, run: runNotWired},
		{name: "gate-off-1.35", title: "1.35.4 with the UnknownVersionInteroperabilityProxy gate off: preflight refuses the upgrade and says to wire the gate first.",
			from: v135, to: v136, wired: false, run: runGateOff},
		{name: "wire-then-1.36", title: "1.35.4, gate off: a wire rollout turns the gate and the peer flags on (same version, verifier-gated), then 1.35.4 → 1.36.3.",
			from: v135, to: v136, wired: false, run: runWireThenUpgrade},
		{name: "sigkill", title: "1.36.3 → 1.37.2, MVP wired, step 2's old apiserver killed with SIGKILL: the plane removes its identity lease at once, before any verifier round finds it stale.",
			from: v136, to: v137, wired: true, staleLeaseAfter: 15 * time.Second, run: runSIGKILL},
		{name: "sigkill-new", title: "1.36.3 → 1.37.2, MVP wired, the first new apiserver killed with SIGKILL right after it joined: the old ones would proxy into the dead peer (503) while its identity lease stays; the plane removes the lease at once, a replacement joins and the rollout continues.",
			from: v136, to: v137, wired: true, staleLeaseAfter: 15 * time.Second, run: runSIGKILLNew},
	}
}

// checkPreflight runs preflight on the plane as it runs now and records
// the step; it returns the findings.
func (h *harness) checkPreflight(ctx context.Context) []preflight.Finding {
	h.t.Helper()
	fs, err := runPreflight(ctx, h.cp, h.sc.name)
	if err != nil {
		h.t.Fatalf("preflight: %v", err)
	}
	blockers := blockerText(fs)
	h.mu.Lock()
	h.blockers = blockers
	h.mu.Unlock()
	from := "v" + h.cp.APIServers()[len(h.cp.APIServers())-1].Version
	if len(blockers) == 0 {
		h.record(ctx, "preflight", "", from, "v"+h.sc.to, store.StepPassed, "no blockers", nil)
	} else {
		h.record(ctx, "preflight", "", from, "v"+h.sc.to, store.StepFailed, strings.Join(blockers, "; "), nil)
	}
	return fs
}

func hasBlocker(fs []preflight.Finding, reason string) *preflight.Finding {
	for i, f := range fs {
		if f.Severity == preflight.Blocker && f.Reason == reason {
			return &fs[i]
		}
	}
	return nil
}

// upgrade runs the version bump to the scenario's target.
func (h *harness) upgrade(ctx context.Context, onPause func(context.Context, rollout.Step, *pause) error, kill func(rollout.Step) bool) (rollout.Result, error) {
	return h.roll(ctx, "upgrade", rollout.Options{Version: h.sc.to, Kill: kill}, onPause)
}

// complete records a rollout that ended, lets the load run on the final
// plane a little longer, and stops the load.
func (h *harness) complete(ctx context.Context, res rollout.Result, err error) {
	h.t.Helper()
	if err != nil {
		h.setOutcome("aborted after %d steps", len(res.Steps))
		h.runState(ctx, store.UpgradeAborted, err.Error())
		h.finish()
		h.t.Fatalf("rollout: %v", err)
	}
	h.soak(5 * time.Second)
	h.setOutcome("completed in %d steps (%.0f s)", len(res.Steps), res.Finished.Sub(res.Started).Seconds())
	h.runState(ctx, store.UpgradeSucceeded, "every apiserver runs v"+h.sc.to)
	h.finish()
}

// assertClean asserts what a clean upgrade promises: no tenant request
// failed, the rollout never paused, and every gate verdict was green.
func (h *harness) assertClean() {
	h.t.Helper()
	r := h.report
	h.t.Logf("%d tenant requests succeeded only after client-go's own retries (%d retries)", r.Tenant.Retried, r.Tenant.Retries)
	if r.Tenant.Failures > 0 {
		h.t.Errorf("%d of %d tenant requests failed (%v); first: %s", r.Tenant.Failures, r.Tenant.Requests, r.Tenant.FailuresByStatus, strings.Join(r.Tenant.FirstFailures, "\n  "))
	}
	if len(r.Pauses) > 0 {
		h.t.Errorf("the rollout paused: %+v", r.Pauses)
	}
	for _, s := range r.Steps {
		if !s.GateGreen {
			h.t.Errorf("the gate after %s step %d was not green: %s", s.Rollout, s.Index, s.Gate)
		}
	}
}

func runWired(t *testing.T, h *harness) {
	ctx := t.Context()
	if bl := preflight.Blockers(h.checkPreflight(ctx)); len(bl) > 0 {
		t.Fatalf("preflight refuses a wired plane: %v", blockerText(bl))
	}
	h.soak(5 * time.Second)
	res, err := h.upgrade(ctx, abortOnPause, nil)
	h.complete(ctx, res, err)
	h.assertClean()
}

func runNotWired(t *testing.T, h *harness) {
	ctx := t.Context()
	fs := h.checkPreflight(ctx)
	if hasBlocker(fs, preflight.ReasonPeerCAFileMissing) == nil {
		t.Fatalf("preflight did not find --peer-ca-file missing: %v", blockerText(fs))
	}
	h.note("preflight refused (PeerCAFileMissing); the scenario goes on regardless, to show what the verifier catches")
	h.soak(5 * time.Second)
	res, err := h.upgrade(ctx, abortOnPause, nil)
	if err == nil {
		h.finish()
		t.Fatalf("the rollout of an unwired plane completed (%d steps): the verifier never paused it", len(res.Steps))
	}
	h.setOutcome("paused and aborted after %d step(s)", len(res.Steps))
	h.runState(ctx, store.UpgradeAborted, err.Error())
	h.soak(2 * time.Second)
	h.finish()
	r := h.report
	if len(res.Steps) != 1 || len(r.Pauses) != 1 || r.Pauses[0].Step != 1 {
		t.Errorf("steps %d, pauses %+v: want a pause after the first replaced machine", len(res.Steps), r.Pauses)
	}
	// The spurious 404s are the old servers', for what only the new one serves.
	versions := map[string]string{}
	for _, l := range h.lanes {
		versions[l.Name] = l.Version
	}
	n := 0
	for _, rd := range h.rounds {
		for _, p := range rd.Report.Probes {
			if p.Outcome != verify.Spurious404 {
				continue
			}
			n++
			if versions[p.APIServer] != v136 || !slices.Contains(h.skew, p.Resource) {
				t.Errorf("spurious 404 on %s (%s) for %s: want only the %s servers, for %v", p.APIServer, versions[p.APIServer], verify.GVRString(p.Resource), v136, gvrStrings(h.skew))
			}
		}
	}
	if n == 0 {
		t.Error("the verifier saw no spurious 404")
	}
	if sp := r.Spurious404; sp != nil && sp.ToPause != nil {
		t.Logf("first spurious 404 (tenant %s, verifier %s) → pause: %.2f s (bar: 2 s)", secs(sp.FirstByTenant), secs(sp.FirstByVerifier), *sp.ToPause)
	}
}

func runGateOff(t *testing.T, h *harness) {
	ctx := t.Context()
	fs := h.checkPreflight(ctx)
	f := hasBlocker(fs, preflight.ReasonFeatureGateOff)
	if f == nil {
		t.Fatalf("preflight did not refuse a 1.35 plane with the gate off: %v", blockerText(fs))
	}
	for _, want := range []string{"runs 1.35", "UnknownVersionInteroperabilityProxy is alpha and off", "Turn the gate on in a rollout of its own first", "then upgrade"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("the FeatureGateOff finding does not say %q: %s", want, f.Message)
		}
	}
	if !f.FixedByWireMVP || !preflight.OnlyWireMVPBlockers(fs) {
		t.Errorf("the blockers are not all fixed by the wire step: %v", blockerText(fs))
	}
	h.runState(ctx, store.UpgradeFailed, "preflight refused: "+f.Message)
	h.soak(5 * time.Second)
	h.setOutcome("refused by preflight (FeatureGateOff); nothing rolled")
	h.finish()
	for _, s := range h.cp.APIServers() {
		if !s.Running() || s.Version != v135 {
			t.Errorf("%s (%s, running %t) changed though preflight refused", s.Name, s.Version, s.Running())
		}
	}
	if r := h.report; r.Tenant.Failures > 0 {
		t.Errorf("%d tenant requests failed on an untouched plane: %s", r.Tenant.Failures, strings.Join(r.Tenant.FirstFailures, "\n  "))
	}
}

// wireSpec wires MVP on a replacement: --peer-ca-file and the rest, and on
// 1.35 the gate (internal/controlplane adds it with the peer flags).
func wireSpec(s *controlplane.APIServerSpec) { s.NoMVP = false }

func runWireThenUpgrade(t *testing.T, h *harness) {
	ctx := t.Context()
	fs := h.checkPreflight(ctx)
	if hasBlocker(fs, preflight.ReasonFeatureGateOff) == nil || !preflight.OnlyWireMVPBlockers(fs) {
		t.Fatalf("preflight on the unwired 1.35 plane: %v; want FeatureGateOff and only blockers the wire step fixes", blockerText(fs))
	}
	h.soak(5 * time.Second)
	res, err := h.roll(ctx, "wire", rollout.Options{
		Version:  v135,
		Outdated: func(s *controlplane.APIServer) bool { return s.Spec.NoMVP },
		Spec:     wireSpec,
	}, abortOnPause)
	if err != nil {
		h.complete(ctx, res, err)
	}
	fs = h.checkPreflight(ctx)
	if bl := preflight.Blockers(fs); len(bl) > 0 {
		h.finish()
		t.Fatalf("preflight after the wire rollout: %v", blockerText(bl))
	}
	h.note("wire rollout: %d steps in %.0f s; preflight then passed", len(res.Steps), res.Finished.Sub(res.Started).Seconds())
	h.soak(5 * time.Second)
	res, err = h.upgrade(ctx, abortOnPause, nil)
	h.complete(ctx, res, err)
	h.assertClean()
}

func runSIGKILL(t *testing.T, h *harness) {
	ctx := t.Context()
	if bl := preflight.Blockers(h.checkPreflight(ctx)); len(bl) > 0 {
		t.Fatalf("preflight refuses a wired plane: %v", blockerText(bl))
	}
	h.soak(5 * time.Second)
	// Paused on a failure (the dead server's 503s), the suite removes the
	// stale lease (every round does, with RemoveStaleLeases) and goes on
	// once a round is green.
	removeAndContinue := func(ctx context.Context, s rollout.Step, p *pause) error {
		r := h.verifyUntil(ctx, "decide", 2*time.Minute, round.green)
		if !r.green() {
			return fmt.Errorf("still failing after removing stale leases: %s", describe(r))
		}
		p.Decision = "stale lease removed, the verifier passed; continue"
		return nil
	}
	res, err := h.upgrade(ctx, removeAndContinue, func(s rollout.Step) bool { return s.Index == 2 })
	if err != nil {
		h.complete(ctx, res, err)
	}
	killed := res.Steps[1].Old
	final := h.verifyUntil(ctx, "after", 30*time.Second, round.green)
	h.complete(ctx, res, nil)
	if !final.green() {
		t.Errorf("the verifier does not pass after the kill: %s", describe(final))
	}
	k := h.assertLeaseRemovedByPlane(killed)
	t.Logf("SIGKILL of %s at %+.1fs: %d tenant 503s, %d verifier Honest503s; 503s lasted %.1f s after the kill; lease gone at %s",
		killed, k.KilledAt, k.Tenant503, k.Verifier503, k.Window503, secs(k.LeaseGoneAt))
}

// assertLeaseRemovedByPlane asserts that the identity lease of the killed
// server went at once, removed by the plane (KillAPIServer), not by a
// verifier round that found it stale; and that from a second after it
// went until the next server left the load balancer (killReport) no
// tenant request got a 503 and no verifier round found a Honest503. It
// returns the kill's report.
func (h *harness) assertLeaseRemovedByPlane(killed string) *killReport {
	h.t.Helper()
	k := h.report.Kill
	if k == nil || k.Killed != killed || k.LeaseGoneAt == nil {
		h.t.Fatalf("the identity lease of the killed %s was never seen gone: %+v", killed, k)
	}
	if k.LeaseRemovedBy != "plane" {
		h.t.Errorf("the identity lease of %s was removed by the %s at %s, not by the plane when it killed the server", killed, k.LeaseRemovedBy, secs(k.LeaseRemovedAt))
	}
	gone := *k.LeaseGoneAt + 1 // a second for the servers to see the lease go
	var after []string
	for _, r := range h.load.snapshot() {
		if at := h.since(r.At); r.Status == 503 && at > gone && at < k.WindowEnd {
			after = append(after, fmt.Sprintf("%+.1fs %s", at, r.Kind()))
		}
	}
	if len(after) > 0 {
		h.t.Errorf("%d tenant 503s more than a second after the lease of %s went at %s (and before the next server left at %+.1fs): %s",
			len(after), killed, secs(k.LeaseGoneAt), k.WindowEnd, strings.Join(after, "; "))
	}
	if k.RoundsAfter503 > 0 {
		h.t.Errorf("%d of %d verifier rounds started after the lease of %s went found a Honest503", k.RoundsAfter503, k.RoundsAfter, killed)
	}
	return k
}

// runSIGKILLNew kills the first replacement right after it joined: it alone
// serves the 1.37-only resources, so the old servers would keep proxying them
// into a dead peer and answer 503 for as long as its identity lease stays.
// The plane removes the lease at once; the verifier runs on the degraded
// plane for a while to show that the old servers answer 404 for those
// resources (nobody serves them) and nothing else fails, then a replacement
// joins, as a MachineHealthCheck would bring one, and the rollout goes on.
func runSIGKILLNew(t *testing.T, h *harness) {
	ctx := t.Context()
	if bl := preflight.Blockers(h.checkPreflight(ctx)); len(bl) > 0 {
		t.Fatalf("preflight refuses a wired plane: %v", blockerText(bl))
	}
	h.soak(5 * time.Second)
	var killed string
	h.mu.Lock()
	h.beforeGate = func(ctx context.Context, s rollout.Step) {
		if s.Index != 1 || killed != "" {
			return
		}
		// Let the old servers sync with the new peer, so that they route
		// its resources to it, then lose it.
		h.verifyUntil(ctx, "before-kill", 30*time.Second, round.green)
		killed = s.New
		if err := h.killServer(killed); err != nil {
			t.Errorf("killing %s: %v", killed, err)
		}
		h.note("SIGKILL of %s (the only 1.37.2 server) right after it joined", killed)
		// The plane without it, for longer than the verifier's
		// StaleLeaseAfter: its lease must not be left for the verifier.
		h.verifyUntil(ctx, "after-kill", h.sc.staleLeaseAfter+5*time.Second, func(round) bool { return false })
		// A MachineHealthCheck replaces the lost machine: a new server at
		// the target version.
		spec := h.cp.APIServer(killed).Spec
		spec.Name = killed + "-r"
		start := time.Now()
		srv, err := h.cp.StartAPIServer(ctx, spec)
		if err != nil {
			t.Errorf("starting a replacement for %s: %v", killed, err)
			return
		}
		h.mu.Lock()
		h.lanes = append(h.lanes, &lane{Name: spec.Name, Version: spec.Version, Wired: !spec.NoMVP, Start: start, Ready: time.Now(), PeerSyncWait: srv.PeerSyncWait})
		h.mu.Unlock()
		h.note("%s replaces the lost server; it waited %.2f s for its peers before it joined", spec.Name, srv.PeerSyncWait.Seconds())
	}
	h.mu.Unlock()
	continueWhenGreen := func(ctx context.Context, s rollout.Step, p *pause) error {
		r := h.verifyUntil(ctx, "decide", 2*time.Minute, round.green)
		if !r.green() {
			return fmt.Errorf("still failing: %s", describe(r))
		}
		p.Decision = "the verifier passed; continue"
		return nil
	}
	res, err := h.upgrade(ctx, continueWhenGreen, nil)
	if err != nil {
		h.complete(ctx, res, err)
		t.Fatalf("the rollout did not complete after the lost server: %v", err)
	}
	final := h.verifyUntil(ctx, "after", 30*time.Second, round.green)
	h.complete(ctx, res, nil)
	if !final.green() {
		t.Errorf("the verifier does not pass after the kill: %s", describe(final))
	}
	k := h.assertLeaseRemovedByPlane(killed)
	t.Logf("SIGKILL of %s at %+.1fs: %d tenant 503s, %d verifier Honest503s, the last %.1f s after the kill (bar: 5 s); lease gone at %s, removed by the %s",
		killed, k.KilledAt, k.Tenant503, k.Verifier503, k.Window503, secs(k.LeaseGoneAt), k.LeaseRemovedBy)
	if k.RoundsAfter == 0 {
		t.Error("no verifier round ran on the plane without the killed server")
	}
}

// records reads the scenario's run back from the store.
func (h *harness) records() recordsSummary {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := recordsSummary{RunID: h.runID}
	if h.runID == "" {
		return out
	}
	run, err := h.st.GetUpgradeRun(ctx, h.runID)
	if err != nil {
		out.State = "unreadable: " + err.Error()
		return out
	}
	out.State = string(run.State)
	steps, err := h.st.ListUpgradeSteps(ctx, h.runID)
	if err != nil {
		return out
	}
	out.Steps = len(steps)
	for _, s := range steps {
		ps, err := h.st.ListProbes(ctx, s.ID)
		if err == nil {
			out.Probes += len(ps)
		}
	}
	return out
}
