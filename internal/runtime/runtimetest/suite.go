package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/runtime"
)

// Env knobs of the test app.
const (
	// EnvVersion is what the app answers on "/".
	EnvVersion = "VERSION"
	// EnvFailHealth set to "1" makes /healthz answer 500.
	EnvFailHealth = "FAIL_HEALTH"
	// EnvCrash set to "1" makes the app exit with status 3 at start.
	EnvCrash = "CRASH"
)

// HealthPath is the test app's health-check path.
const HealthPath = "/healthz"

// BuildTestApp builds the test app, static (it runs in images without a
// libc too), into dir and returns the binary's name ("testapp") relative
// to dir.
func BuildTestApp(t testing.TB, dir string) string {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "testapp"), "bex.co/bex/internal/runtime/runtimetest/testapp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test app: %v\n%s", err, out)
	}
	return "testapp"
}

// WithWorkerCommands returns rel with the test app's worker command
// ("./testapp worker") on each process but web that names none: what a
// driver that runs images (whose own command is the web process) needs.
func WithWorkerCommands(rel runtime.Release) runtime.Release {
	procs := map[string]runtime.Process{}
	for name, p := range rel.Processes {
		if name != runtime.WebProcess && p.Command == "" {
			p.Command = "./testapp worker"
		}
		procs[name] = p
	}
	rel.Processes = procs
	return rel
}

// InDir returns rel running the test app that BuildTestApp built into
// dir: Dir set, "./testapp" on web and "./testapp worker" on the other
// processes that name no command; what a driver that runs directories
// needs.
func InDir(rel runtime.Release, dir string) runtime.Release {
	rel = WithWorkerCommands(rel)
	if web, ok := rel.Processes[runtime.WebProcess]; ok && web.Command == "" {
		web.Command = "./testapp"
		rel.Processes[runtime.WebProcess] = web
	}
	rel.Dir = dir
	return rel
}

// EdgeGet requests path of the app through an edge whose default
// hostnames (under domain) resolve from apps, and returns the body of a
// 200, or an error with the status and body of anything else.
//
// The edge is made for this one request, so its connection to the app is
// closed after it rather than kept idle: a pooled connection of an edge
// dropped at once stays open, and a test asking thousands of times (a
// request after another through a roll) ran out of file descriptors, its
// own and the app's, and met 502s that were its own.
func EdgeGet(apps edge.Apps, domain, tenant, app, path string) (string, error) {
	tr := edge.DefaultTransport()
	tr.DisableKeepAlives = true
	p, err := edge.New(&edge.DefaultHosts{Domain: domain, Apps: apps}, edge.Options{Transport: tr})
	if err != nil {
		return "", err
	}
	return Get(p, edge.Hostname(tenant, app, domain), path)
}

// Get requests path of host from h (an edge), and returns the body of a
// 200, or an error with the status and body of anything else.
func Get(h http.Handler, host, path string) (string, error) {
	req := httptest.NewRequest(http.MethodGet, "http://"+host+path, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return "", fmt.Errorf("%d %s", rec.Code, rec.Body.String())
	}
	return rec.Body.String(), nil
}

// Harness is how RunDriverSuite drives one implementation.
type Harness struct {
	// Complete fills in what the driver needs to run the test app in rel:
	// Image or Dir, and each process's Command ("./testapp" for web,
	// "./testapp worker" for workers).
	Complete func(t *testing.T, rel runtime.Release) runtime.Release
	// Get, when set, requests path from the app's web process through the
	// platform's routing and returns the body; the suite then checks what
	// is served, not only what Status says.
	Get func(t *testing.T, d runtime.Driver, tenant, app, path string) (string, error)
	// Metrics, when set, returns the runtime's metrics of d
	// (bex_runtime_instances, bex_runtime_restarts_total) and the driver
	// label they carry; the Crash case then checks that the restart
	// counter goes up by the restarts Status counts.
	Metrics func(t *testing.T, d runtime.Driver) (c prometheus.Collector, driver string)
	// Logs says the driver captures the app's output for Logs.
	Logs bool
	// Timeout bounds each wait of the suite [60s].
	Timeout time.Duration
	// Terminal says the driver, a runtime.Runner, runs one-off commands on
	// a terminal when asked.
	Terminal bool
	// NoInput says the driver's one-off commands take no input and have
	// no terminal: it refuses a Command with Stdin or Terminal
	// (runtime.ErrNoInput).
	NoInput bool
}

// RunDriverSuite checks what runtime.Driver promises, on drivers made by
// newDriver (one per subtest; the harness cleans them up).
func RunDriverSuite(t *testing.T, newDriver func(t *testing.T) runtime.Driver, h Harness) {
	if h.Timeout == 0 {
		h.Timeout = 60 * time.Second
	}
	s := &suite{h: h, newDriver: newDriver}
	t.Run("UnknownApp", s.unknownApp)
	t.Run("InvalidReleaseRefused", s.invalidRelease)
	t.Run("RolloutFailedReleaseAndRemove", s.rollout)
	t.Run("Workers", s.workers)
	t.Run("Restart", s.restart)
	t.Run("Scale", s.scale)
	t.Run("CrashRestartsInPlace", s.crash)
	t.Run("Run", s.run)
	if h.Logs {
		t.Run("Logs", s.logs)
	}
}

type suite struct {
	h         Harness
	newDriver func(t *testing.T) runtime.Driver
}

// release returns release number of app running the test app at version.
func (s *suite) release(t *testing.T, app string, number int, version string, env map[string]string) runtime.Release {
	e := map[string]string{EnvVersion: version}
	for k, v := range env {
		e[k] = v
	}
	rel := runtime.Release{
		Tenant: "suite", App: app, Number: number, Env: e,
		Processes:   map[string]runtime.Process{runtime.WebProcess: {Replicas: 2}},
		HealthCheck: runtime.HealthCheck{Path: HealthPath, Interval: 200 * time.Millisecond, Timeout: 2 * time.Second},
	}
	return s.h.Complete(t, rel)
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it returns nil or the suite's timeout passes.
func (s *suite) eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(s.h.Timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, s.h.Timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *suite) unknownApp(t *testing.T) {
	d := s.newDriver(t)
	ctx := s.ctx(t)
	if _, err := d.Status(ctx, "suite", "nothing"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Status of an unknown app: got %v, want ErrNotFound", err)
	}
	if err := d.Remove(ctx, "suite", "nothing"); err != nil {
		t.Errorf("Remove of an unknown app: %v", err)
	}
	if s.h.Logs {
		if _, err := d.Logs(ctx, "suite", "nothing", 10, false); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("Logs of an unknown app: got %v, want ErrNotFound", err)
		}
	}
}

func (s *suite) invalidRelease(t *testing.T) {
	d := s.newDriver(t)
	ctx := s.ctx(t)
	bad := map[string]func(*runtime.Release){
		"no processes":      func(r *runtime.Release) { r.Processes = nil },
		"bad app name":      func(r *runtime.Release) { r.App = "Not_A_Label" },
		"release 0":         func(r *runtime.Release) { r.Number = 0 },
		"bad process name":  func(r *runtime.Release) { r.Processes["Web!"] = runtime.Process{Replicas: 1} },
		"negative replicas": func(r *runtime.Release) { r.Processes["web"] = runtime.Process{Command: "x", Replicas: -1} },
		"relative hc path":  func(r *runtime.Release) { r.HealthCheck.Path = "healthz" },
	}
	for name, mutate := range bad {
		rel := s.release(t, "invalid", 1, "v1", nil)
		mutate(&rel)
		if err := d.Deploy(ctx, rel, nil); err == nil {
			t.Errorf("%s: Deploy accepted an invalid release", name)
		}
	}
	if _, err := d.Status(ctx, "suite", "invalid"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Status after refused releases: got %v, want ErrNotFound", err)
	}
}

// waitStatus waits until the app runs release want, ready, with every
// instance of want Running and no instance of another release left.
func (s *suite) waitStatus(t *testing.T, d runtime.Driver, app string, want, instances int) runtime.Status {
	t.Helper()
	var st runtime.Status
	s.eventually(t, fmt.Sprintf("%s runs release %d, ready", app, want), func() error {
		var err error
		st, err = d.Status(context.Background(), "suite", app)
		if err != nil {
			return err
		}
		if st.Release != want || !st.Ready {
			return fmt.Errorf("release %d, ready %v: %s", st.Release, st.Ready, st.Message)
		}
		if instances < 0 {
			return nil
		}
		n := 0
		for _, i := range st.Instances {
			if i.Release != want {
				return fmt.Errorf("instance %s of release %d still listed", i.Name(), i.Release)
			}
			if i.State != runtime.Running {
				return fmt.Errorf("instance %s is %s", i.Name(), i.State)
			}
			n++
		}
		if n != instances {
			return fmt.Errorf("%d instances, want %d", n, instances)
		}
		// bex ps reads the same on every runtime.
		if msg := fmt.Sprintf("release %d: %d of %d instances running", want, n, n); st.Message != msg {
			return fmt.Errorf("message %q, want %q", st.Message, msg)
		}
		return nil
	})
	return st
}

func (s *suite) waitServes(t *testing.T, d runtime.Driver, app, want string) {
	t.Helper()
	if s.h.Get == nil {
		return
	}
	s.eventually(t, fmt.Sprintf("%s serves %q", app, want), func() error {
		body, err := s.h.Get(t, d, "suite", app, "/")
		if err != nil {
			return err
		}
		if strings.TrimSpace(body) != want {
			return fmt.Errorf("body %q", body)
		}
		return nil
	})
}

func (s *suite) rollout(t *testing.T) {
	d := s.newDriver(t)
	ctx := s.ctx(t)
	const app = "rollout"

	if err := d.Deploy(ctx, s.release(t, app, 1, "v1", nil), nil); err != nil {
		t.Fatalf("deploying release 1: %v", err)
	}
	s.waitStatus(t, d, app, 1, 2)
	s.waitServes(t, d, app, "v1")

	if err := d.Deploy(ctx, s.release(t, app, 2, "v2", nil), nil); err != nil {
		t.Fatalf("deploying release 2: %v", err)
	}
	s.waitStatus(t, d, app, 2, 2)
	s.waitServes(t, d, app, "v2")

	var log strings.Builder
	err := d.Deploy(ctx, s.release(t, app, 3, "v3", map[string]string{EnvFailHealth: "1"}), &log)
	if err == nil {
		t.Fatal("release 3 fails its health check, but Deploy succeeded")
	}
	t.Logf("release 3 refused as expected: %v", err)
	if !strings.Contains(err.Error(), "3") {
		t.Errorf("the error does not name the release: %v", err)
	}
	s.waitStatus(t, d, app, 2, 2)
	s.waitServes(t, d, app, "v2")

	if err := d.Remove(ctx, "suite", app); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	s.eventually(t, "removed app is gone", func() error {
		if _, err := d.Status(ctx, "suite", app); !errors.Is(err, runtime.ErrNotFound) {
			return fmt.Errorf("Status: %v", err)
		}
		return nil
	})
	if err := d.Remove(ctx, "suite", app); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

func (s *suite) workers(t *testing.T) {
	d := s.newDriver(t)
	ctx := s.ctx(t)
	const app = "workers"
	rel := s.release(t, app, 1, "v1", nil)
	rel.Processes["worker"] = runtime.Process{Replicas: 1}
	rel = s.h.Complete(t, rel)
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("deploying web and worker: %v", err)
	}
	st := s.waitStatus(t, d, app, 1, 3)
	workers := 0
	for _, i := range st.Instances {
		if i.Process == "worker" {
			workers++
		}
	}
	if workers != 1 {
		t.Errorf("%d worker instances, want 1: %+v", workers, st.Instances)
	}
	s.waitServes(t, d, app, "v1")

	// Release 2 drops the worker.
	if err := d.Deploy(ctx, s.release(t, app, 2, "v2", nil), nil); err != nil {
		t.Fatalf("deploying release 2: %v", err)
	}
	s.waitStatus(t, d, app, 2, 2)
	if err := d.Remove(ctx, "suite", app); err != nil {
		t.Fatalf("Remove: %v", err)
	}
}

func (s *suite) logs(t *testing.T) {
	d := s.newDriver(t)
	ctx := s.ctx(t)
	const app = "logs"
	if err := d.Deploy(ctx, s.release(t, app, 1, "v1", nil), nil); err != nil {
		t.Fatalf("deploying: %v", err)
	}
	s.eventually(t, "the start-up line is in the logs", func() error {
		ch, err := d.Logs(ctx, "suite", app, -1, false)
		if err != nil {
			return err
		}
		var seen []string
		for l := range ch {
			if l.Process == runtime.WebProcess && l.Stream == runtime.Stdout && strings.Contains(l.Text, "listening on port") && strings.Contains(l.Text, "version v1") {
				return nil
			}
			seen = append(seen, l.Stream+": "+l.Text)
		}
		return fmt.Errorf("not among %q", seen)
	})
	ch, err := d.Logs(ctx, "suite", app, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range ch {
		n++
	}
	if n != 1 {
		t.Errorf("tail 1 gave %d lines", n)
	}
	if s.h.Get == nil {
		return
	}
	// What the app prints on stderr is a line of that stream.
	if _, err := s.h.Get(t, d, "suite", app, "/log?stream=stderr&msg=said-on-stderr"); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, "the stderr line in the logs", func() error {
		ch, err := d.Logs(ctx, "suite", app, -1, false)
		if err != nil {
			return err
		}
		var seen []string
		for l := range ch {
			seen = append(seen, l.Stream+": "+l.Text)
		}
		if !slices.Contains(seen, runtime.Stderr+": said-on-stderr") {
			return fmt.Errorf("not among %q", seen)
		}
		return nil
	})
	fctx, cancel := context.WithCancel(ctx)
	follow, err := d.Logs(fctx, "suite", app, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.h.Get(t, d, "suite", app, "/log?msg=followed-line-42"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(s.h.Timeout)
	for found := false; !found; {
		select {
		case l, ok := <-follow:
			if !ok {
				t.Fatal("the follow channel closed early")
			}
			found = l.Text == "followed-line-42"
		case <-timeout:
			t.Fatal("the line written after Logs(follow) never arrived")
		}
	}
	cancel()
	for range follow { // closed once ctx ends
	}
}

// instanceIDs returns the IDs of the app's instances of release by
// process, once it runs them all (instances in all).
func (s *suite) instanceIDs(t *testing.T, d runtime.Driver, app string, release, instances int) map[string][]string {
	t.Helper()
	st := s.waitStatus(t, d, app, release, instances)
	ids := map[string][]string{}
	for _, i := range st.Instances {
		if i.ID == "" {
			t.Fatalf("instance %s has no ID", i.Name())
		}
		ids[i.Process] = append(ids[i.Process], i.ID)
	}
	for _, v := range ids {
		slices.Sort(v)
	}
	return ids
}

// restart: a Deploy of the running release that changes a process's
// Restart replaces that process's instances, and only those; the web
// process keeps serving meanwhile; the same Restart again, or none,
// replaces nothing.
func (s *suite) restart(t *testing.T) {
	d := s.newDriver(t)
	ctx := s.ctx(t)
	const app = "restart"
	rel := s.release(t, app, 1, "v1", nil)
	rel.Processes["worker"] = runtime.Process{Replicas: 1}
	rel = s.h.Complete(t, rel)
	deploy := func(web, worker string) {
		t.Helper()
		r := rel
		r.Processes = maps.Clone(rel.Processes)
		for name, token := range map[string]string{runtime.WebProcess: web, "worker": worker} {
			p := r.Processes[name]
			p.Restart = token
			r.Processes[name] = p
		}
		var log strings.Builder
		if err := d.Deploy(ctx, r, &log); err != nil {
			t.Fatalf("deploying release 1 with restarts web %q, worker %q: %v\n%s", web, worker, err, log.String())
		}
	}
	deploy("", "")
	first := s.instanceIDs(t, d, app, 1, 3)
	s.waitServes(t, d, app, "v1")

	deploy("", "worker-1")
	second := s.instanceIDs(t, d, app, 1, 3)
	if !slices.Equal(second[runtime.WebProcess], first[runtime.WebProcess]) {
		t.Errorf("restarting the worker replaced web instances: %v, then %v", first[runtime.WebProcess], second[runtime.WebProcess])
	}
	if shared := common(first["worker"], second["worker"]); len(shared) > 0 || len(second["worker"]) != 1 {
		t.Errorf("restarting the worker kept instances %v (before %v, after %v)", shared, first["worker"], second["worker"])
	}

	// The web process restarts while requests keep reaching it.
	stop := s.keepAsking(t, d, app, "v1")
	deploy("web-1", "")
	failed := stop()
	third := s.instanceIDs(t, d, app, 1, 3)
	if shared := common(second[runtime.WebProcess], third[runtime.WebProcess]); len(shared) > 0 || len(third[runtime.WebProcess]) != 2 {
		t.Errorf("restarting web kept instances %v (before %v, after %v)", shared, second[runtime.WebProcess], third[runtime.WebProcess])
	}
	if !slices.Equal(third["worker"], second["worker"]) {
		t.Errorf("restarting web replaced the worker: %v, then %v", second["worker"], third["worker"])
	}
	if failed != "" {
		t.Errorf("requests failed while web restarted: %s", failed)
	}
	s.waitServes(t, d, app, "v1")

	// Nothing new asked: nothing replaced.
	deploy("web-1", "worker-1")
	deploy("", "")
	if fourth := s.instanceIDs(t, d, app, 1, 3); !maps.EqualFunc(fourth, third, slices.Equal) {
		t.Errorf("deploying the same restarts again replaced instances: %v, then %v", third, fourth)
	}
	if err := d.Remove(ctx, "suite", app); err != nil {
		t.Fatalf("Remove: %v", err)
	}
}

// scale: a Deploy of the running release with other Replicas adds the
// instances a process lacks and stops those it has too many of, and
// replaces none: the instances before are all still there after a scale
// up, and a scale down keeps some of them and starts none; the web process
// keeps serving throughout.
func (s *suite) scale(t *testing.T) {
	d := s.newDriver(t)
	ctx := s.ctx(t)
	const app = "scale"
	rel := s.release(t, app, 1, "v1", nil)
	rel.Processes["worker"] = runtime.Process{Replicas: 1}
	rel = s.h.Complete(t, rel)
	deploy := func(web, worker int) map[string][]string {
		t.Helper()
		r := rel
		r.Processes = maps.Clone(rel.Processes)
		for name, n := range map[string]int{runtime.WebProcess: web, "worker": worker} {
			p := r.Processes[name]
			p.Replicas = n
			r.Processes[name] = p
		}
		var log strings.Builder
		if err := d.Deploy(ctx, r, &log); err != nil {
			t.Fatalf("deploying release 1 with web=%d worker=%d: %v\n%s", web, worker, err, log.String())
		}
		ids := s.instanceIDs(t, d, app, 1, web+worker)
		if len(ids[runtime.WebProcess]) != web || len(ids["worker"]) != worker {
			t.Fatalf("web=%d worker=%d runs %v", web, worker, ids)
		}
		return ids
	}
	first := deploy(1, 1)
	s.waitServes(t, d, app, "v1")

	stop := s.keepAsking(t, d, app, "v1")
	up := deploy(3, 2)
	for _, p := range []string{runtime.WebProcess, "worker"} {
		if kept := common(first[p], up[p]); len(kept) != len(first[p]) {
			t.Errorf("scaling %s up replaced instances: %v, then %v", p, first[p], up[p])
		}
	}
	down := deploy(1, 0)
	if kept := common(up[runtime.WebProcess], down[runtime.WebProcess]); len(kept) != 1 {
		t.Errorf("scaling web from 3 to 1 kept %v of %v (now %v): it should keep one and start none", kept, up[runtime.WebProcess], down[runtime.WebProcess])
	}
	if failed := stop(); failed != "" {
		t.Errorf("requests failed while web scaled: %s", failed)
	}
	s.waitServes(t, d, app, "v1")
	if again := deploy(1, 0); !maps.EqualFunc(again, down, slices.Equal) {
		t.Errorf("deploying the same counts again replaced instances: %v, then %v", down, again)
	}
	if err := d.Remove(ctx, "suite", app); err != nil {
		t.Fatalf("Remove: %v", err)
	}
}

// crash: an instance that exits on its own is restarted in place: Status
// lists it with the same ID, Restarts counts the crash, and once it runs
// again its Since is no earlier than the crash (the uptime starts again);
// a fresh instance has no restarts and a Since.
func (s *suite) crash(t *testing.T) {
	if s.h.Get == nil {
		t.Skip("the harness can make no instance crash: it has no Get to ask the app for /exit")
	}
	d := s.newDriver(t)
	ctx := s.ctx(t)
	const app = "crash"
	rel := s.release(t, app, 1, "v1", nil)
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Replicas: 1}}
	rel = s.h.Complete(t, rel)
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("deploying: %v", err)
	}
	before := s.waitStatus(t, d, app, 1, 1).Instances[0]
	if before.Restarts != 0 || before.Since.IsZero() || before.ID == "" {
		t.Fatalf("a fresh instance: %+v, want no restarts, a Since and an ID", before)
	}
	// Kubernetes' times have seconds: the crash must come in a later
	// second than the start for the uptime's new start to show.
	s.eventually(t, "the clock is past the second the instance came up in", func() error {
		if now := time.Now().Truncate(time.Second); !now.After(before.Since) {
			return fmt.Errorf("it is %s, the instance came up at %s", now, before.Since)
		}
		return nil
	})
	var metrics prometheus.Collector
	var driver string
	var restartsBefore float64
	if s.h.Metrics != nil {
		metrics, driver = s.h.Metrics(t, d)
		m := ReadMetrics(t, metrics, driver)
		if !m.HasRestarts {
			t.Fatalf("no bex_runtime_restarts_total{driver=%q}", driver)
		}
		restartsBefore = m.Restarts
	}
	crashedAt := time.Now().Truncate(time.Second)
	_, _ = s.h.Get(t, d, "suite", app, "/exit") // the connection drops as it exits
	var after runtime.Instance
	s.eventually(t, "the crashed instance runs again, its restart counted", func() error {
		st, err := d.Status(ctx, "suite", app)
		if err != nil {
			return err
		}
		if len(st.Instances) != 1 {
			return fmt.Errorf("%d instances: %+v", len(st.Instances), st.Instances)
		}
		after = st.Instances[0]
		if after.Restarts < 1 || after.State != runtime.Running {
			return fmt.Errorf("%s is %s with %d restarts", after.Name(), after.State, after.Restarts)
		}
		return nil
	})
	if after.ID != before.ID || after.Release != 1 || after.Name() != before.Name() {
		t.Errorf("after its crash the instance is %+v; want %s of release 1 restarted in place (ID %s)", after, before.Name(), before.ID)
	}
	if after.Since.Before(crashedAt) {
		t.Errorf("the restarted instance is up since %s, before it crashed (%s)", after.Since, crashedAt)
	}
	if metrics != nil {
		// Nothing else of the driver crashes: the counter went up by
		// this instance's restarts, neither fewer nor more.
		if got := ReadMetrics(t, metrics, driver).Restarts - restartsBefore; got != float64(after.Restarts) {
			t.Errorf("bex_runtime_restarts_total{driver=%q} went up by %v; Status counts %d restarts", driver, got, after.Restarts)
		}
	}
	if err := d.Remove(ctx, "suite", app); err != nil {
		t.Fatalf("Remove: %v", err)
	}
}

// keepAsking asks the app for / until the returned stop is called, which
// says how the requests that did not answer want failed ("" when all
// did). Without the harness's Get it asks nothing.
func (s *suite) keepAsking(t *testing.T, d runtime.Driver, app, want string) (stop func() string) {
	if s.h.Get == nil {
		return func() string { return "" }
	}
	done := make(chan struct{})
	report := make(chan string, 1)
	go func() {
		var failures []string
		n := 0
		for {
			select {
			case <-done:
				if len(failures) == 0 {
					report <- ""
				} else {
					report <- fmt.Sprintf("%d served, %d failed: %q", n, len(failures), failures)
				}
				return
			default:
			}
			if body, err := s.h.Get(t, d, "suite", app, "/"); err != nil {
				failures = append(failures, err.Error())
			} else if strings.TrimSpace(body) != want {
				failures = append(failures, "body "+body)
			} else {
				n++
			}
		}
	}()
	return func() string {
		close(done)
		return <-report
	}
}

// common returns the strings both a and b hold.
func common(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
