package continuity_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	embedded "bex.co/bex/cmd/bex-embedded/app"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

const (
	fromVersion = "1.36.3"
	toVersion   = "1.37.2"
	// warmUp and coolDown are how long the tenant works before the rollout
	// starts and after it ended.
	warmUp, coolDown = 20 * time.Second, 20 * time.Second
	// heldFor is how long the FleetUpgrade may stay paused by a failed
	// verification before the suite aborts it: more than two of the
	// controller's 30-second retries.
	heldFor = 75 * time.Second
	// managementCluster is the cluster that takes the platform's plane
	// over (bex-embedded's --managed-control-plane).
	managementCluster = "management"
)

// scenario is a management-plane scenario. There is one, "wired": the
// plane as make run makes it, MVP wired. An unwired plane is refused by
// preflight before any of its machines goes (the FleetUpgrade
// controller's TestWiringThenManagementClusterLast), so tenants would see
// nothing move.
type scenario struct {
	name string
}

// TestContinuity runs each scenario on its own platform and writes the
// report of all of them.
func TestContinuity(t *testing.T) {
	if os.Getenv("BEX_TEST_CONTINUITY") == "" {
		t.Skip("make test-continuity runs the continuity suite (BEX_TEST_CONTINUITY=1)")
	}
	bin := platformtest.BuildBinaries(t, "bex")
	var reports []*scenarioReport
	var workload *workloadReport
	defer func() { writeReports(t, reports, workload) }()
	for _, sc := range []scenario{{name: "wired"}} {
		t.Run(sc.name, func(t *testing.T) {
			r := runScenario(t, bin, sc)
			reports = append(reports, r)
			r.check(t)
		})
	}
	// A tenant's app on a workload cluster of the local fleet, whose
	// control plane the real KubeadmControlPlane rolls.
	t.Run("workload-cluster", func(t *testing.T) {
		workload = runWorkloadScenario(t, platformtest.BuildBinaries(t, "bex-embedded", "bex-node"))
		workload.check(t)
	})
}

// phase is when a sample was taken.
type phase string

const (
	before phase = "before"
	during phase = "during"
	after  phase = "after"
)

// sample is one tenant action.
type sample struct {
	At      time.Time     `json:"at"`
	Phase   phase         `json:"phase"`
	Kind    string        `json:"kind"` // push, serve, api GET /apps, cli apps list, ...
	OK      bool          `json:"ok"`
	Status  string        `json:"status"`
	Latency time.Duration `json:"latency"`
	Detail  string        `json:"detail,omitempty"`
}

// tenant is the load: pushes, API and dashboard reads, CLI calls.
type tenant struct {
	t      *testing.T
	env    map[string]string
	bin    string
	api    *apiclient.Client
	apps   *http.Client
	host   string
	remote string
	home   string

	phase atomic.Value // phase

	mu      sync.Mutex
	samples []sample
	pushes  int // succeeded
}

func (u *tenant) record(kind string, start time.Time, ok bool, status, detail string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.samples = append(u.samples, sample{At: start, Phase: u.phase.Load().(phase), Kind: kind, OK: ok, Status: status,
		Latency: time.Since(start), Detail: detail})
}

// statusOf names an API call's outcome: "200" (ok), the error answer's
// status, or "error" (no answer).
func statusOf(err error) (bool, string, string) {
	var ae *apiclient.Error
	switch {
	case err == nil:
		return true, "ok", ""
	case errors.As(err, &ae):
		return false, strconv.Itoa(ae.Status), ae.Message
	default:
		return false, "error", err.Error()
	}
}

// pushLoop pushes a new version every few seconds and checks that each
// release serves what was pushed.
func (u *tenant) pushLoop(ctx context.Context, repo string) {
	for i := 1; ctx.Err() == nil; i++ {
		start := time.Now()
		body := fmt.Sprintf("site v%d", i)
		platformtest.WriteNodeApp(u.t, repo, body, "")
		platformtest.Git(u.t, repo, "add", "-A")
		platformtest.Git(u.t, repo, "commit", "-q", "-m", body)
		out, err := platformtest.GitErr(repo, "push", u.remote, "main")
		if err != nil {
			u.record("push", start, false, "error", lastLines(out, 16))
		} else {
			u.record("push", start, true, "ok", "")
			u.mu.Lock()
			u.pushes++
			u.mu.Unlock()
			// A push the load's end interrupts is still checked to the end.
			served := time.Now()
			ok := false
			for time.Since(served) < time.Minute {
				if code, got, err := platformtest.GetApp(context.WithoutCancel(ctx), u.apps, u.host); err == nil && code == 200 && got == body {
					ok = true
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			status := "ok"
			if !ok {
				status = "not served"
			}
			u.record("serve", served, ok, status, body)
		}
		if wait := 3*time.Second - time.Since(start); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

// apiLoop reads through the API and the dashboard, as a tenant's browser
// and scripts do.
func (u *tenant) apiLoop(ctx context.Context) {
	calls := []struct {
		kind string
		do   func(context.Context) error
	}{
		{"api GET /apps", func(ctx context.Context) error { _, err := u.api.ListApps(ctx); return err }},
		{"api GET /apps/site", func(ctx context.Context) error { _, err := u.api.GetApp(ctx, "site"); return err }},
		{"api GET /apps/site/releases", func(ctx context.Context) error { _, err := u.api.ListReleases(ctx, "site"); return err }},
		{"api GET /apps/site/builds", func(ctx context.Context) error { _, err := u.api.ListBuilds(ctx, "site"); return err }},
		{"api GET /apps/site/routes", func(ctx context.Context) error { _, err := u.api.ListRoutes(ctx, "site"); return err }},
		{"dashboard GET /signin", func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.env["BEX_DASHBOARD"]+"signin", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return &apiclient.Error{Status: resp.StatusCode}
			}
			return nil
		}},
	}
	for i := 0; ctx.Err() == nil; i++ {
		c := calls[i%len(calls)]
		start := time.Now()
		err := c.do(context.WithoutCancel(ctx))
		ok, status, detail := statusOf(err)
		u.record(c.kind, start, ok, status, detail)
		select {
		case <-ctx.Done():
		case <-time.After(150 * time.Millisecond):
		}
	}
}

// cliLoop runs the bex CLI: apps list, releases, env set.
func (u *tenant) cliLoop(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		args := [][]string{{"apps", "list"}, {"releases", "site"}, {"env", "set", "site", "ROUND=" + strconv.Itoa(i)}}[i%3]
		start := time.Now()
		cmd := exec.Command(filepath.Join(u.bin, "bex"), args...)
		cmd.Env = append(os.Environ(), "BEX_API="+u.env["BEX_API"], "BEX_TOKEN="+u.env["BEX_TOKEN"], "HOME="+u.home, "XDG_CONFIG_HOME="+u.home)
		out, err := cmd.CombinedOutput()
		status := "ok"
		if err != nil {
			status = "exit " + strings.TrimPrefix(err.Error(), "exit status ")
		}
		u.record("cli "+strings.Join(args[:min(len(args), 2)], " "), start, err == nil, status, lastLines(string(out), 3))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// platform is a scenario's embedded platform: its control plane, the
// local fleet's Host whose machines serve it, and its environment.
type platform struct {
	cp   *controlplane.ControlPlane
	host *localfleet.Host
	env  map[string]string
}

// firstAPIServer is the plane's own kube-apiserver, which serves it until
// the machines of the cluster managementCluster take it over.
const firstAPIServer = "kube-apiserver-1"

// startPlatform runs the embedded platform in this process as make run
// does (--managed-control-plane): its control plane starts on one
// kube-apiserver at fromVersion behind a load balancer, and three machines
// of the local fleet, made by the real KubeadmControlPlane, take it over.
// It returns once they have.
func startPlatform(t *testing.T, sc scenario) platform {
	t.Helper()
	o := embedded.NewOptions()
	o.StateDir = t.TempDir()
	o.KubeVersion = fromVersion
	o.DatabaseURL = pgtest.NewDatabase(t)
	o.ManagedPlane = true
	cps := make(chan *controlplane.ControlPlane, 1)
	o.ControlPlaneStarted = func(cp *controlplane.ControlPlane) { cps <- cp }
	hosts := make(chan *localfleet.Host, 1)
	o.LocalFleetStarted = func(h *localfleet.Host) { hosts <- h }
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "platform.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx, logFile) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Error("the platform did not stop within 2 minutes")
		}
		logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("platform log (last lines):\n%s", lastLines(string(data), 80))
		}
	})
	var p platform
	select {
	case p.cp = <-cps:
	case err := <-done:
		t.Fatalf("the platform stopped before its control plane served: %v", err)
	case <-time.After(5 * time.Minute):
		t.Fatal("no control plane within 5 minutes")
	}
	select {
	case p.host = <-hosts:
	case err := <-done:
		t.Fatalf("the platform stopped before its local fleet started: %v", err)
	case <-time.After(5 * time.Minute):
		t.Fatal("no local fleet within 5 minutes")
	}
	envPath := filepath.Join(o.StateDir, "env")
	began := time.Now()
	for p.env == nil {
		if data, err := os.ReadFile(envPath); err == nil {
			p.env = platformtest.ParseEnv(string(data))
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the platform stopped before it was ready: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Since(began) > 5*time.Minute {
			t.Fatal("the platform was not ready within 5 minutes")
		}
	}
	// The takeover: the machines serve the plane (they are the load
	// balancer's backends) and its first kube-apiserver stopped.
	ready := time.Now()
	for {
		first := p.cp.APIServer(firstAPIServer)
		if first != nil && !first.Running() && len(p.cp.LoadBalancer().Backends()) == 3 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the platform stopped before Cluster API took its plane over: %v", err)
		case <-time.After(time.Second):
		}
		if time.Since(ready) > 8*time.Minute {
			t.Fatalf("Cluster API did not take the plane over within 8 minutes (%d backends in its load balancer)", len(p.cp.LoadBalancer().Backends()))
		}
	}
	t.Logf("Cluster API took the plane over %s after the platform was ready", time.Since(ready).Round(time.Second))
	return p
}

func runScenario(t *testing.T, bin string, sc scenario) *scenarioReport {
	started := time.Now()
	p := startPlatform(t, sc)
	env := p.env
	ctx := t.Context()
	api, remote := createSite(t, env)
	u := &tenant{t: t, env: env, bin: bin, api: api, apps: platformtest.AppClient(t, env), home: t.TempDir(),
		host: "site-dev." + strings.Split(env["BEX_DOMAIN"], ":")[0], remote: remote}
	u.phase.Store(before)
	repo := t.TempDir()
	platformtest.Git(t, repo, "init", "-q", "-b", "main")

	kube := platformtest.Client(t, env["BEX_KUBECONFIG"])
	rep := &scenarioReport{Name: sc.name, From: fromVersion, To: toVersion}
	// The plane's machines: which KubeadmControlPlane marked, when the gate
	// released each, when each apiserver joined and left the load balancer.
	mw := localinfratest.WatchMachines(kube, apiclient.LocalClusterNamespace, managementCluster,
		localinfratest.WatchOptions{Interval: 250 * time.Millisecond, ControlPlane: true, Hook: fleetupgrade.GateHook, Host: p.host})
	defer mw.Close()

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	// Two candidates elect a leader through the load balancer the whole
	// time, as two controller-manager replicas do.
	cfg, err := clientcmd.BuildConfigFromFlags("", env["BEX_KUBECONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	ld := &leaders{}
	if err := ld.run(loadCtx, cfg, 2); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { u.pushLoop(loadCtx, repo) })
	wg.Go(func() { u.apiLoop(loadCtx) })
	wg.Go(func() { u.cliLoop(loadCtx) })

	time.Sleep(warmUp)
	u.phase.Store(during)
	op, err := apiclient.New(env["BEX_API"], env["BEX_OPERATOR_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	rep.MVPWired = mvpWired(t, op, apiclient.LocalClusterNamespace+"/"+managementCluster)
	rep.Plan = planStages(t, op, "v"+toVersion)
	const upgrade = "management-to-1-37"
	rep.RolloutStart = time.Now()
	// As the operator would: bex upgrade start management-to-1-37 --to
	// v1.37.2.
	if _, err := op.CreateUpgrade(ctx, apiclient.CreateUpgradeRequest{Name: upgrade, TargetVersion: "v" + toVersion}); err != nil {
		t.Fatalf("starting the FleetUpgrade: %v", err)
	}
	handedOver := ""
	var up apiclient.Upgrade
	var pausedAt time.Time
	for deadline := time.Now().Add(10 * time.Minute); ; {
		up, err = op.GetUpgrade(ctx, upgrade, true)
		if err != nil {
			t.Fatalf("reading the FleetUpgrade: %v", err)
		}
		var lv *apiclient.UpgradeVerification
		if len(up.Clusters) > 0 {
			lv = up.Clusters[0].LastVerification
		}
		if replacedSoFar(mw) >= 1 && handedOver == "" {
			// A controller manager replica goes away mid-rollout.
			handedOver = ld.handOver()
		}
		if up.Phase == "Succeeded" {
			rep.Rollout = "completed"
			break
		}
		if up.Phase == "Failed" || up.Phase == "Aborted" {
			rep.Rollout = up.Phase + ": " + conditionMessage(up)
			break
		}
		if up.Phase == "Paused" && lv != nil && !lv.Passed {
			if pausedAt.IsZero() {
				pausedAt = time.Now()
			}
			// A plane whose verifier stays red is held, then aborted.
			if time.Since(pausedAt) > heldFor {
				rep.Rollout = "paused by the verifier: " + lv.Message
				if _, err := op.AbortUpgrade(ctx, upgrade); err != nil {
					t.Errorf("aborting: %v", err)
				}
				break
			}
		} else {
			pausedAt = time.Time{}
		}
		if time.Now().After(deadline) {
			rep.Rollout = fmt.Sprintf("timed out in phase %s: %s", up.Phase, conditionMessage(up))
			break
		}
		time.Sleep(time.Second)
	}
	rep.RolloutEnd = time.Now()
	rep.LeaderHandedOverBy = handedOver
	rep.Gates = gatesOf(up)
	rep.Verified = verifiedOf(up)
	u.phase.Store(after)
	time.Sleep(coolDown)
	stopLoad()
	wg.Wait()
	mw.Close()

	// What the platform did with the pushes.
	var releases []apiclient.Release
	err = getAll(env, "/apps/site/releases", &releases)
	if err != nil {
		t.Fatalf("listing releases: %v", err)
	}
	// A push releases its own build; a config release (the CLI loop's
	// env set) or a rollback runs an earlier release's build again, so
	// the builds released are counted, not the releases.
	released := map[int]bool{}
	for _, r := range releases {
		if r.Build != 0 {
			released[r.Build] = true
		}
	}
	rep.ReleasesFromPushes = len(released)
	var builds []apiclient.Build
	err = getAll(env, "/apps/site/builds", &builds)
	if err != nil {
		t.Fatalf("listing builds: %v", err)
	}
	for _, b := range builds {
		if b.Status == "running" {
			rep.BuildsStuck = append(rep.BuildsStuck, b.Number)
		}
	}
	rep.LeaderTerms, rep.LeaderOverlaps = ld.report()
	rep.StepsDone = replacedSoFar(mw)
	rep.fill(u, machinesSeen(mw), time.Since(started))
	return rep
}

// replacedSoFar counts the machines made during the watch whose apiserver
// joined the load balancer: the replacements KubeadmControlPlane made.
func replacedSoFar(w *localinfratest.MachineWatch) int {
	n := 0
	for _, ml := range w.Snapshot() {
		if !ml.Existing && !ml.JoinedLB.IsZero() {
			n++
		}
	}
	return n
}

// planStages plans an upgrade of the fleet to version through the API, as
// bex upgrade plan does, and returns the plan's stages in order.
func planStages(t *testing.T, op *apiclient.Client, version string) []string {
	t.Helper()
	planned, err := op.PlanUpgrade(t.Context(), apiclient.UpgradePlanRequest{TargetVersion: version})
	if err != nil {
		t.Fatalf("planning: %v", err)
	}
	var stages []string
	for _, st := range planned.Stages {
		stages = append(stages, st.Name)
	}
	return stages
}

// createSite creates the dev tenant's app site through the API and
// returns the tenant's client and the app's git remote with the tenant's
// token in it.
func createSite(t *testing.T, env map[string]string) (*apiclient.Client, string) {
	t.Helper()
	api, err := apiclient.New(env["BEX_API"], env["BEX_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	app, err := api.CreateApp(t.Context(), apiclient.CreateAppRequest{Name: "site"})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := url.Parse(app.GitRemote)
	if err != nil {
		t.Fatal(err)
	}
	remote.User = url.UserPassword("bex", env["BEX_TOKEN"])
	return api, remote.String()
}

// gatesOf turns the controller's machine steps and its recorded verifier
// rounds into the report's gates.
func gatesOf(up apiclient.Upgrade) []gateReport {
	var rounds []string
	if up.Run != nil {
		for _, st := range up.Run.Steps {
			if st.Kind == "verify" {
				rounds = append(rounds, st.Outcome+": "+st.Message)
			}
		}
	}
	var gates []gateReport
	for _, cs := range up.Clusters {
		for i, st := range cs.Steps {
			g := gateReport{Step: i + 1, New: st.Machine, Passed: st.Verdict == "Passed"}
			if st.StartedAt != nil {
				g.Started = *st.StartedAt
				if st.FinishedAt != nil {
					g.Seconds = st.FinishedAt.Sub(*st.StartedAt).Seconds()
				}
			}
			if i == len(cs.Steps)-1 {
				g.Rounds = rounds
			}
			gates = append(gates, g)
		}
	}
	return gates
}

// verifiedOf returns the run's passed verifier rounds with their probes
// per apiserver.
func verifiedOf(up apiclient.Upgrade) []verifiedRound {
	var out []verifiedRound
	if up.Run == nil {
		return nil
	}
	for _, st := range up.Run.Steps {
		if st.Kind != "verify" || st.Outcome != "passed" {
			continue
		}
		v := verifiedRound{Machine: st.Machine, ByAPIServer: map[string]int{}}
		for server, byOutcome := range st.ProbesByAPIServer {
			for _, n := range byOutcome {
				v.ByAPIServer[server] += n
			}
		}
		out = append(out, v)
	}
	return out
}

func conditionMessage(up apiclient.Upgrade) string {
	for _, c := range up.Conditions {
		if c.Type == "Ready" {
			return c.Message
		}
	}
	return ""
}

// getAll reads a list of the tenant's through the API, up to the API's
// largest page (the client's calls take the default of 50).
func getAll(env map[string]string, path string, out any) error {
	req, err := http.NewRequest(http.MethodGet, env["BEX_API"]+"/api/v1"+path+"?limit=1000", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+env["BEX_TOKEN"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// mvpWired is what the operator's API (bex fleet list) says of the
// cluster's Mixed Version Proxy before the rollout: its
// KubeadmControlPlane's apiserver flags, as the preflight reads them.
func mvpWired(t *testing.T, op *apiclient.Client, cluster string) bool {
	t.Helper()
	cls, err := op.ListFleet(t.Context())
	if err != nil {
		t.Fatalf("listing the fleet: %v", err)
	}
	for _, c := range cls {
		if c.Name == cluster {
			return c.MVP.Wired
		}
	}
	t.Fatalf("the fleet's list has no cluster %s", cluster)
	return false
}
