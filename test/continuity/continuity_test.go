package continuity_test

import (
	"context"
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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/embedded"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/upgrade/rollout"
	"bex.co/bex/internal/upgrade/verify"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

const (
	fromVersion = "1.36.3"
	toVersion   = "1.37.2"
	// warmUp and coolDown are how long the tenant works before the rollout
	// starts and after it ended.
	warmUp, coolDown = 20 * time.Second, 20 * time.Second
	// gateTimeout is how long the gate lets the verifier fail before it
	// stops the rollout for good.
	gateTimeout = 45 * time.Second
)

type scenario struct {
	name  string
	noMVP bool
}

// TestContinuity runs each scenario on its own platform and writes the
// report of all of them.
func TestContinuity(t *testing.T) {
	if os.Getenv("BEX_TEST_CONTINUITY") == "" {
		t.Skip("make test-continuity runs the continuity suite (BEX_TEST_CONTINUITY=1)")
	}
	bin := platformtest.BuildBinaries(t, "bex")
	var reports []*scenarioReport
	defer func() { writeReports(t, reports) }()
	for _, sc := range []scenario{{name: "wired"}, {name: "not-wired", noMVP: true}} {
		t.Run(sc.name, func(t *testing.T) {
			r := runScenario(t, bin, sc)
			reports = append(reports, r)
			r.check(t)
		})
	}
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
			u.record("push", start, false, "error", lastLines(out, 6))
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

// startPlatform runs the embedded platform in this process on three
// apiservers at fromVersion behind a load balancer.
func startPlatform(t *testing.T, sc scenario) (*controlplane.ControlPlane, map[string]string) {
	t.Helper()
	o := embedded.NewOptions()
	o.StateDir = t.TempDir()
	o.KubeVersion = fromVersion
	o.DatabaseURL = pgtest.NewDatabase(t)
	o.APIServers = 3
	o.NoMVP = sc.noMVP
	cps := make(chan *controlplane.ControlPlane, 1)
	o.ControlPlaneStarted = func(cp *controlplane.ControlPlane) { cps <- cp }
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
			t.Logf("platform log (last lines):\n%s", lastLines(string(data), 60))
		}
	})
	var cp *controlplane.ControlPlane
	select {
	case cp = <-cps:
	case err := <-done:
		t.Fatalf("the platform stopped before its control plane served: %v", err)
	case <-time.After(5 * time.Minute):
		t.Fatal("no control plane within 5 minutes")
	}
	envPath := filepath.Join(o.StateDir, "env")
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if data, err := os.ReadFile(envPath); err == nil {
			return cp, platformtest.ParseEnv(string(data))
		}
		select {
		case err := <-done:
			t.Fatalf("the platform stopped before it was ready: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the platform was not ready within 5 minutes")
		}
	}
}

// verifier probes every running apiserver directly.
type verifier struct {
	cp   *controlplane.ControlPlane
	opts verify.Options
}

func (v verifier) run(ctx context.Context) (verify.Report, error) {
	var targets []verify.Target
	for _, s := range v.cp.APIServers() {
		if s.Running() {
			targets = append(targets, verify.Target{Name: s.Name, Config: s.RESTConfig()})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return verify.Run(ctx, targets, v.opts)
}

func runScenario(t *testing.T, bin string, sc scenario) *scenarioReport {
	started := time.Now()
	cp, env := startPlatform(t, sc)
	ctx := t.Context()
	api, err := apiclient.New(env["BEX_API"], env["BEX_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	app, err := api.CreateApp(ctx, apiclient.CreateAppRequest{Name: "site"})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := url.Parse(app.GitRemote)
	if err != nil {
		t.Fatal(err)
	}
	remote.User = url.UserPassword("bex", env["BEX_TOKEN"])
	u := &tenant{t: t, env: env, bin: bin, api: api, apps: platformtest.AppClient(t, env), home: t.TempDir(),
		host: "site-dev." + strings.Split(env["BEX_DOMAIN"], ":")[0], remote: remote.String()}
	u.phase.Store(before)
	repo := t.TempDir()
	platformtest.Git(t, repo, "init", "-q", "-b", "main")

	kube := platformtest.Client(t, env["BEX_KUBECONFIG"])
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bex-verify"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	v := verifier{cp: cp, opts: verify.Options{
		CRDs: []verify.CRDProbe{verify.AppProbe()}, Namespace: "bex-verify",
		Aggregated:        []schema.GroupVersionResource{{Group: "scheduling.bex.co", Version: "v1alpha1", Resource: "clustercapacities"}},
		RemoveStaleLeases: true,
	}}
	rep := &scenarioReport{Name: sc.name, From: fromVersion, To: toVersion, MVPWired: !sc.noMVP}

	loadCtx, stopLoad := context.WithCancel(ctx)
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
	rep.RolloutStart = time.Now()
	var events []rollout.Event
	res, rerr := rollout.Run(ctx, cp, rollout.Options{
		Version: toVersion,
		OnEvent: func(e rollout.Event) { events = append(events, e) },
		Gate: func(ctx context.Context, s rollout.Step) error {
			gs := gateReport{Step: s.Index, Old: s.Old, New: s.New, Started: time.Now()}
			defer func() { rep.Gates = append(rep.Gates, gs) }()
			for {
				r, err := v.run(ctx)
				verdict := verdictOf(r, err)
				gs.Rounds = append(gs.Rounds, verdict)
				if err == nil && r.Passed() {
					gs.Passed, gs.Seconds = true, time.Since(gs.Started).Seconds()
					return nil
				}
				if time.Since(gs.Started) > gateTimeout {
					gs.Seconds = time.Since(gs.Started).Seconds()
					return fmt.Errorf("the verifier has not passed for %s: %s", gateTimeout, verdict)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(2 * time.Second):
				}
			}
		},
	})
	rep.RolloutEnd = time.Now()
	rep.StepsDone = len(res.Steps)
	if rerr != nil {
		rep.Rollout = "stopped: " + rerr.Error()
	} else {
		rep.Rollout = "completed"
	}
	u.phase.Store(after)
	time.Sleep(coolDown)
	stopLoad()
	wg.Wait()

	// What the platform did with the pushes.
	releases, err := api.ListReleases(context.Background(), "site")
	if err != nil {
		t.Fatalf("listing releases: %v", err)
	}
	for _, r := range releases {
		if r.Build != 0 {
			rep.ReleasesFromPushes++
		}
	}
	builds, err := api.ListBuilds(context.Background(), "site")
	if err != nil {
		t.Fatalf("listing builds: %v", err)
	}
	for _, b := range builds {
		if b.Status == "running" {
			rep.BuildsStuck = append(rep.BuildsStuck, b.Number)
		}
	}
	rep.LeaderTerms, rep.LeaderOverlaps = ld.report()
	rep.fill(u, events, time.Since(started))
	return rep
}

func verdictOf(r verify.Report, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if r.Passed() {
		return fmt.Sprintf("passed (%d probes)", len(r.Probes))
	}
	var parts []string
	for _, p := range r.Failures() {
		parts = append(parts, fmt.Sprintf("%s %s on %s", p.Outcome, verify.GVRString(p.Resource), p.APIServer))
	}
	for _, f := range r.Findings {
		parts = append(parts, f.Reason+": "+f.Message)
	}
	return "failed: " + strings.Join(parts[:min(len(parts), 6)], "; ")
}
