package process_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/procstat"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/process"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/internal/sandbox"
	"bex.co/bex/internal/sandbox/sandboxtest"
	"bex.co/bex/test/platformtest"
)

const (
	tenant = "acme"
	domain = "bex.test"
)

// appDir holds the test app, built once for the package.
var appDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bex-process-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	appDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var buildOnce sync.Once

func testAppDir(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() { runtimetest.BuildTestApp(t, appDir) })
	if _, err := os.Stat(filepath.Join(appDir, "testapp")); err != nil {
		t.Fatalf("test app missing: %v", err)
	}
	return appDir
}

func newDriver(t *testing.T, opts process.Options) *process.Driver {
	t.Helper()
	if opts.BackoffMin == 0 {
		opts.BackoffMin, opts.BackoffMax = 50*time.Millisecond, 200*time.Millisecond
	}
	if opts.DrainDelay == 0 {
		opts.DrainDelay = 100 * time.Millisecond
	}
	if opts.GracePeriod == 0 {
		opts.GracePeriod = 5 * time.Second
	}
	if opts.LogDir == "" {
		opts.LogDir = t.TempDir()
	}
	d := process.New(opts)
	t.Cleanup(func() { d.Close() })
	return d
}

func complete(t *testing.T, rel runtime.Release) runtime.Release {
	return runtimetest.InDir(rel, testAppDir(t))
}

// get fetches path of the app through the edge p.
func get(p http.Handler, app, path string) (string, error) {
	return runtimetest.Get(p, edge.Hostname(tenant, app, domain), path)
}

func newEdge(t *testing.T, d *process.Driver) *edge.Proxy {
	t.Helper()
	p, err := edge.New(&edge.DefaultHosts{Domain: domain, Apps: d}, edge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDriverSuite(t *testing.T) {
	runDriverSuite(t, false, func(t *testing.T) runtime.Driver { return newDriver(t, process.Options{}) })
}

// TestDriverSuiteInSandbox runs the suite with every instance in a runc
// container: what the driver promises holds there too, and one-off
// commands get a terminal when asked.
func TestDriverSuiteInSandbox(t *testing.T) {
	sandboxtest.Require(t)
	runDriverSuite(t, true, func(t *testing.T) runtime.Driver {
		return newDriver(t, process.Options{Sandbox: sandboxtest.New(t, sandbox.Options{StateDir: t.TempDir()})})
	})
}

func runDriverSuite(t *testing.T, terminal bool, newDriver func(t *testing.T) runtime.Driver) {
	runtimetest.RunDriverSuite(t, newDriver, runtimetest.Harness{
		Complete: complete,
		Get: func(t *testing.T, d runtime.Driver, tenant, app, path string) (string, error) {
			return runtimetest.EdgeGet(d.(*process.Driver), domain, tenant, app, path)
		},
		Metrics: func(t *testing.T, d runtime.Driver) (prometheus.Collector, string) {
			return d.(*process.Driver).Collector(), process.DriverLabel
		},
		Logs:     true,
		Terminal: terminal,
	})
}

func webRelease(t *testing.T, app string, number, replicas int, version string, env map[string]string) runtime.Release {
	e := map[string]string{runtimetest.EnvVersion: version}
	for k, v := range env {
		e[k] = v
	}
	return complete(t, runtime.Release{
		Tenant: tenant, App: app, Number: number, Env: e,
		Processes:   map[string]runtime.Process{runtime.WebProcess: {Replicas: replicas}},
		HealthCheck: runtime.HealthCheck{Path: runtimetest.HealthPath, Interval: 100 * time.Millisecond, Timeout: 2 * time.Second},
	})
}

// hammer sends GETs through the edge from a few clients until stop is
// closed (or, should the test never close it, two minutes have passed),
// and records the answers. It is not bounded by a number of requests: the
// test's last steps need answers as much as its first.
type hammer struct {
	mu       sync.Mutex
	bodies   []string
	failures []string
	done     chan struct{}
}

func startHammer(t *testing.T, url, host string, stop <-chan struct{}) *hammer {
	h := &hammer{done: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Host = host
				resp, err := client.Do(req)
				if err != nil {
					h.record("", err.Error())
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil:
					h.record("", err.Error())
				case resp.StatusCode != http.StatusOK:
					h.record("", fmt.Sprintf("%d %s", resp.StatusCode, body))
				default:
					h.record(strings.TrimSpace(string(body)), "")
				}
			}
		})
	}
	go func() { wg.Wait(); close(h.done) }()
	return h
}

func (h *hammer) record(body, failure string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if failure != "" {
		h.failures = append(h.failures, failure)
		return
	}
	h.bodies = append(h.bodies, body)
}

func (h *hammer) count(body string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, b := range h.bodies {
		if b == body {
			n++
		}
	}
	return n
}

func TestCutoverUnderLoad(t *testing.T) {
	// No drain delay: the old instances get SIGTERM the moment the table
	// switches, so the edge's retry is what keeps requests from failing.
	d := newDriver(t, process.Options{DrainDelay: -1})
	srv := httptest.NewServer(newEdge(t, d))
	t.Cleanup(srv.Close)
	host := edge.Hostname(tenant, "hammered", domain)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if err := d.Deploy(ctx, webRelease(t, "hammered", 1, 2, "v1", nil), nil); err != nil {
		t.Fatalf("deploying v1: %v", err)
	}
	stop := make(chan struct{})
	h := startHammer(t, srv.URL+"/", host, stop)
	platformtest.Eventually(t, 20*time.Second, "v1 answers through the edge", func(context.Context) error {
		if h.count("v1") == 0 {
			return errors.New("no v1 answer yet")
		}
		return nil
	})

	var log strings.Builder
	if err := d.Deploy(ctx, webRelease(t, "hammered", 2, 2, "v2", nil), &log); err != nil {
		t.Fatalf("deploying v2: %v\n%s", err, log.String())
	}
	t.Logf("deploy log of v2:\n%s", log.String())
	v2Before := h.count("v2")
	platformtest.Eventually(t, 20*time.Second, "v2 answers after the cut-over", func(context.Context) error {
		if h.count("v2") <= v2Before {
			return errors.New("no v2 answer after Deploy returned")
		}
		return nil
	})
	if d.Runs(tenant, "hammered") {
		for _, u := range d.Upstreams(tenant, "hammered") {
			if !strings.HasPrefix(u, "127.0.0.1:") {
				t.Errorf("upstream %q is not on 127.0.0.1", u)
			}
		}
	}

	// v3 fails its health check: Deploy says why, v2 keeps serving.
	log.Reset()
	err := d.Deploy(ctx, webRelease(t, "hammered", 3, 2, "v3", map[string]string{runtimetest.EnvFailHealth: "1"}), &log)
	if err == nil {
		t.Fatal("v3 fails its health check but Deploy succeeded")
	}
	if want := regexp.MustCompile(`web\.[01] failed its health check GET /healthz: 500 \(3 of 3\)`); !want.MatchString(err.Error()) {
		t.Errorf("Deploy error %q does not say why (want %s)", err, want)
	}
	v2After := h.count("v2")
	platformtest.Eventually(t, 20*time.Second, "v2 still answers after v3 failed", func(context.Context) error {
		if h.count("v2") <= v2After {
			return errors.New("no v2 answer")
		}
		return nil
	})
	close(stop)
	<-h.done

	h.mu.Lock()
	defer h.mu.Unlock()
	t.Logf("%d requests: v1 %d, v2 %d", len(h.bodies)+len(h.failures), countIn(h.bodies, "v1"), countIn(h.bodies, "v2"))
	if len(h.failures) > 0 {
		t.Errorf("%d requests failed during the cut-overs; first: %s", len(h.failures), h.failures[0])
	}
	if n := countIn(h.bodies, "v3"); n > 0 {
		t.Errorf("the failing v3 got %d requests", n)
	}
	// Requests run concurrently, so a handful of v1 answers may be recorded
	// after the first v2 one; but the last answer is v2.
	if last := h.bodies[len(h.bodies)-1]; last != "v2" {
		t.Errorf("last answer %q, want v2", last)
	}
}

func countIn(bodies []string, s string) int {
	n := 0
	for _, b := range bodies {
		if b == s {
			n++
		}
	}
	return n
}

func TestCrashedInstanceRestartsWithBackoff(t *testing.T) {
	d := newDriver(t, process.Options{BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rel := webRelease(t, "crashy", 1, 1, "v1", nil)
	rel.Processes["worker"] = runtime.Process{Command: runtimetest.EnvCrash + "=1 ./testapp worker", Replicas: 1}
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("deploying: %v", err)
	}
	platformtest.Eventually(t, 30*time.Second, "the crashing worker restarted 5 times", func(context.Context) error {
		st, err := d.Status(ctx, tenant, "crashy")
		if err != nil {
			return err
		}
		for _, i := range st.Instances {
			if i.Process == "worker" && i.Restarts >= 5 {
				if st.Ready {
					return errors.New("Status is ready while the worker crashes")
				}
				return nil
			}
		}
		return fmt.Errorf("%+v", st.Instances)
	})
	// The backoff doubles from 50ms and stays at 200ms.
	ch, err := d.Logs(ctx, tenant, "crashy", -1, false)
	if err != nil {
		t.Fatal(err)
	}
	var delays []string
	crashLines := 0
	re := regexp.MustCompile(`restarting in (\S+)$`)
	for l := range ch {
		if l.Process != "worker" {
			continue
		}
		if m := re.FindStringSubmatch(l.Text); m != nil && l.Stream == runtime.System {
			delays = append(delays, m[1])
		}
		if l.Stream == runtime.Stderr && strings.Contains(l.Text, "crashing on purpose") {
			crashLines++
		}
	}
	want := []string{"50ms", "100ms", "200ms", "200ms", "200ms"}
	if len(delays) < len(want) || strings.Join(delays[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("restart delays %v, want them to start %v", delays, want)
	}
	if crashLines < 5 {
		t.Errorf("%d crash lines captured from stderr, want at least 5", crashLines)
	}

	// A web instance that exits is restarted and serves again.
	p := newEdge(t, d)
	if _, err := get(p, "crashy", "/exit"); err == nil {
		t.Log("the /exit request got an answer") // it may, or the connection drops
	}
	platformtest.Eventually(t, 30*time.Second, "web.0 restarted and serves", func(context.Context) error {
		st, err := d.Status(ctx, tenant, "crashy")
		if err != nil {
			return err
		}
		for _, i := range st.Instances {
			if i.Process == runtime.WebProcess && (i.Restarts < 1 || i.State != runtime.Running) {
				return fmt.Errorf("web.0: %s, %d restarts", i.State, i.Restarts)
			}
		}
		_, err = get(p, "crashy", "/")
		return err
	})
}

// TestRestartsMetricCountsEachRestart: a worker that exits at each start
// while a marker file exists is restarted again and again, shows as
// Crashed in bex_runtime_instances between its restarts, and once it
// runs, bex_runtime_restarts_total is the restarts Status counts, exactly:
// each restart counted once, none missed.
func TestRestartsMetricCountsEachRestart(t *testing.T) {
	// A backoff long enough for a scrape to find the worker crashed.
	d := newDriver(t, process.Options{BackoffMin: 300 * time.Millisecond, BackoffMax: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	metrics := d.Collector()
	read := func() runtimetest.Metrics { return runtimetest.ReadMetrics(t, metrics, process.DriverLabel) }
	if m := read(); m.Restarts != 0 || !m.HasRestarts {
		t.Fatalf("a new driver: %+v, want 0 restarts", m)
	}
	marker := filepath.Join(t.TempDir(), "crash")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rel := webRelease(t, "restarts", 1, 1, "v1", map[string]string{"MARKER": marker})
	rel.Processes["worker"] = runtime.Process{Replicas: 1, Command: `if [ -e "$MARKER" ]; then echo "crashing on purpose" >&2; exit 3; fi
exec ./testapp worker`}
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("deploying: %v", err)
	}
	restarts := func() (worker runtime.Instance, total int) {
		st, err := d.Status(ctx, tenant, "restarts")
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		for _, i := range st.Instances {
			total += i.Restarts
			if i.Process == "worker" {
				worker = i
			}
		}
		return worker, total
	}
	platformtest.Eventually(t, 30*time.Second, "the metrics to show the worker crashed, restarted 3 times", func(context.Context) error {
		m := read()
		if m.Instances[runtime.Crashed] != 1 || m.Restarts < 3 {
			return fmt.Errorf("%+v", m)
		}
		return nil
	})
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	var worker runtime.Instance
	platformtest.Eventually(t, 30*time.Second, "the worker to run", func(context.Context) error {
		if worker, _ = restarts(); worker.State != runtime.Running {
			return fmt.Errorf("worker.0 is %s with %d restarts", worker.State, worker.Restarts)
		}
		return nil
	})
	_, total := restarts()
	m := read()
	if m.Restarts != float64(total) || total < 3 {
		t.Errorf("bex_runtime_restarts_total %v, want the %d restarts Status counts", m.Restarts, total)
	}
	if m.Instances[runtime.Running] != 2 || m.Instances[runtime.Crashed] != 0 {
		t.Errorf("bex_runtime_instances %v, want web.0 and worker.0 Running, none Crashed", m.Instances)
	}
}

// TestCrashLoopShowsInStatus: a release that went live healthy and then
// keeps crashing, each restart serving for a moment before it exits, is
// not ready in every Status from its second crash on (not only while it
// waits for a restart), and the message says how often it crashed, what
// comes next and how it last exited.
func TestCrashLoopShowsInStatus(t *testing.T) {
	d := newDriver(t, process.Options{BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	marker := filepath.Join(t.TempDir(), "crashed")
	rel := webRelease(t, "looping", 1, 1, "v1", map[string]string{"MARKER": marker})
	// Once the marker exists, every start serves for half a second, then
	// exits with status 1.
	rel.Processes[runtime.WebProcess] = runtime.Process{Replicas: 1, Command: `if [ -e "$MARKER" ]; then
  ./testapp & app=$!
  sleep 0.5; kill $app; wait $app
  echo "crashing again" >&2; exit 1
fi
exec ./testapp`}
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("deploying: %v", err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := newEdge(t, d)
	_, _ = get(p, "looping", "/exit") // the connection drops as it exits

	re := regexp.MustCompile(`^release 1: web\.0 crashed (\d+) times; (restarting in \S+|restarted \S+ ago); last exit: exit status 1$`)
	crashes := func() (int, runtime.Status, error) {
		st, err := d.Status(ctx, tenant, "looping")
		if err != nil {
			return 0, st, err
		}
		m := re.FindStringSubmatch(st.Message)
		if m == nil {
			return 0, st, fmt.Errorf("message %q", st.Message)
		}
		n, _ := strconv.Atoi(m[1])
		return n, st, nil
	}
	platformtest.Eventually(t, 30*time.Second, "Status to say web.0 crashed twice", func(context.Context) error {
		n, _, err := crashes()
		if err == nil && n < 2 {
			err = fmt.Errorf("%d crashes", n)
		}
		return err
	})
	// Between crashes the instance runs and passes its health check; the
	// app stays not ready all the same, and the crashes add up.
	sawRunning := false
	platformtest.Eventually(t, 30*time.Second, "web.0 to crash 6 times, not ready throughout", func(context.Context) error {
		n, st, err := crashes()
		if err != nil {
			t.Fatalf("Status of a crash-looping app: %v", err)
		}
		if st.Ready {
			t.Fatalf("Status is ready while web.0 crash-loops: %q", st.Message)
		}
		for _, i := range st.Instances {
			sawRunning = sawRunning || i.State == runtime.Running
		}
		if n < 6 {
			return fmt.Errorf("%d crashes", n)
		}
		return nil
	})
	if !sawRunning {
		t.Error("web.0 never ran between its crashes: the test did not check a running crash-looping instance")
	}
}

func TestFirstDeployThatCrashesLeavesNothing(t *testing.T) {
	d := newDriver(t, process.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var deployLog strings.Builder
	err := d.Deploy(ctx, webRelease(t, "broken", 1, 1, "v1", map[string]string{runtimetest.EnvCrash: "1"}), &deployLog)
	if err == nil || !strings.Contains(err.Error(), "web.0 exited during start-up: exit status 3") {
		t.Fatalf("Deploy error %v, want web.0 exited during start-up: exit status 3", err)
	}
	// The deploy log, which the push shows, says what the app said.
	if !strings.Contains(deployLog.String(), "Last output of web.0:\n") || !strings.Contains(deployLog.String(), "crashing on purpose") {
		t.Errorf("the deploy log lacks the app's last output:\n%s", deployLog.String())
	}
	if _, err := d.Status(ctx, tenant, "broken"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Status: %v, want ErrNotFound", err)
	}
	if pids := d.PIDs(tenant, "broken"); len(pids) != 0 {
		t.Errorf("processes left: %v", pids)
	}
	// Its logs say why.
	ch, err := d.Logs(ctx, tenant, "broken", -1, false)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for l := range ch {
		found = found || strings.Contains(l.Text, "crashing on purpose")
	}
	if !found {
		t.Error("the app's own output is not in its logs")
	}
}

func TestStartTimeout(t *testing.T) {
	d := newDriver(t, process.Options{StartTimeout: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rel := webRelease(t, "silent", 1, 1, "v1", nil)
	rel.Processes[runtime.WebProcess] = runtime.Process{Command: "./testapp worker", Replicas: 1} // never listens
	err := d.Deploy(ctx, rel, nil)
	if err == nil || !strings.Contains(err.Error(), "did not accept connections on port") {
		t.Fatalf("Deploy error %v, want a start-up timeout", err)
	}
}

func TestTCPHealthCheck(t *testing.T) {
	d := newDriver(t, process.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rel := webRelease(t, "tcp", 1, 1, "v1", nil)
	rel.HealthCheck = runtime.HealthCheck{}
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("Deploy with a TCP check: %v", err)
	}
	if body, err := get(newEdge(t, d), "tcp", "/"); err != nil || strings.TrimSpace(body) != "v1" {
		t.Fatalf("GET: %q, %v", body, err)
	}
}

// groupMembers returns the pids of every live process in the process groups led by pids.
func groupMembers(t *testing.T, leaders []int) []int {
	t.Helper()
	groups := map[int]bool{}
	for _, p := range leaders {
		groups[p] = true
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pgid, ok := procStat(pid)
		if ok && groups[pgid] && state != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

func procStat(pid int) (state string, pgid int, ok bool) {
	f, err := procstat.Fields(pid)
	if err != nil {
		return "", 0, false
	}
	g, err := procstat.Int(f, procstat.PGRP)
	if err != nil {
		return "", 0, false
	}
	return f[procstat.State], int(g), true
}

func TestRemoveAndCloseLeaveNoProcess(t *testing.T) {
	for _, how := range []string{"Remove", "Close"} {
		t.Run(how, func(t *testing.T) {
			d := newDriver(t, process.Options{GracePeriod: 2 * time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rel := webRelease(t, "gone", 1, 2, "v1", nil)
			// A worker that leaves a child behind, and ignores SIGTERM.
			rel.Processes["worker"] = runtime.Process{Command: "trap '' TERM; sleep 600 & ./testapp worker; wait", Replicas: 1}
			if err := d.Deploy(ctx, rel, nil); err != nil {
				t.Fatalf("deploying: %v", err)
			}
			leaders := d.PIDs(tenant, "gone")
			if len(leaders) != 3 {
				t.Fatalf("%d instance processes, want 3", len(leaders))
			}
			var members []int
			platformtest.Eventually(t, 10*time.Second, "the worker's child runs", func(context.Context) error {
				members = groupMembers(t, leaders)
				if len(members) < 5 { // 2 web, sh, sleep, testapp worker
					return fmt.Errorf("%d processes in the groups", len(members))
				}
				return nil
			})
			if how == "Remove" {
				if err := d.Remove(ctx, tenant, "gone"); err != nil {
					t.Fatal(err)
				}
			} else {
				d.Close()
			}
			if left := groupMembers(t, leaders); len(left) > 0 {
				t.Errorf("processes left after %s: %v (of %v)", how, left, members)
			}
			if d.Runs(tenant, "gone") || len(d.Upstreams(tenant, "gone")) > 0 {
				t.Errorf("the app is still routed after %s", how)
			}
		})
	}
}

func TestLogFile(t *testing.T) {
	dir := t.TempDir()
	d := newDriver(t, process.Options{LogDir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Deploy(ctx, webRelease(t, "filed", 1, 1, "v1", nil), nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, tenant, "filed.log")
	platformtest.Eventually(t, 10*time.Second, "the log file has the start-up line", func(context.Context) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), "web[0] stdout: listening on port") {
			return fmt.Errorf("log file:\n%s", data)
		}
		return nil
	})
}

func TestUnhealthyInstanceGetsNoTraffic(t *testing.T) {
	d := newDriver(t, process.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Deploy(ctx, webRelease(t, "sickly", 1, 2, "v1", nil), nil); err != nil {
		t.Fatal(err)
	}
	ups := d.Upstreams(tenant, "sickly")
	if len(ups) != 2 {
		t.Fatalf("upstreams %v, want 2", ups)
	}
	resp, err := http.Get("http://" + ups[0] + "/sick")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	platformtest.Eventually(t, 20*time.Second, "the sick instance leaves the routing table", func(context.Context) error {
		if got := d.Upstreams(tenant, "sickly"); len(got) != 1 || got[0] != ups[1] {
			return fmt.Errorf("upstreams %v", got)
		}
		st, err := d.Status(ctx, tenant, "sickly")
		if err != nil {
			return err
		}
		unhealthy := 0
		for _, i := range st.Instances {
			if i.State == runtime.Unhealthy {
				unhealthy++
			}
		}
		if unhealthy != 1 || st.Ready {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	p := newEdge(t, d)
	for range 6 {
		if body, err := get(p, "sickly", "/"); err != nil || strings.TrimSpace(body) != "v1" {
			t.Fatalf("GET through the edge: %q, %v", body, err)
		}
	}
}

// A web instance's port must be free on every address, not only on
// 127.0.0.1: apps bind ":$PORT", and anything else on the machine holding
// the port on another address would make them exit at start-up.
func TestPortInUseOnAnotherAddressIsSkipped(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().(*net.TCPAddr).Port
	probe, err := net.Listen("tcp", ":"+strconv.Itoa(taken+1))
	if err != nil {
		t.Skipf("port %d, needed free beside the busy one, is in use: %v", taken+1, err)
	}
	probe.Close()

	d := newDriver(t, process.Options{FirstPort: taken, LastPort: taken + 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Deploy(ctx, webRelease(t, "ports", 1, 1, "v1", nil), nil); err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if got, want := d.Upstreams(tenant, "ports"), []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(taken+1))}; !slices.Equal(got, want) {
		t.Fatalf("upstreams %v, want %v (port %d is in use on 127.0.0.2)", got, want, taken)
	}

	// With every port of the range in use, the deploy says so and the
	// serving release is untouched.
	err = d.Deploy(ctx, webRelease(t, "ports", 2, 1, "v2", nil), nil)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("no free port in %d-%d", taken, taken+1)) {
		t.Fatalf("Deploy with the range exhausted: %v, want no free port", err)
	}
	if body, err := get(newEdge(t, d), "ports", "/"); err != nil || strings.TrimSpace(body) != "v1" {
		t.Fatalf("after the refused deploy GET: %q, %v; want v1 serving", body, err)
	}
}

// The process driver has no image to take an environment from: it starts
// from the release's ImageEnv, and the platform's Env wins over it.
func TestImageEnvUnderEnv(t *testing.T) {
	d := newDriver(t, process.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newEdge(t, d)

	rel := webRelease(t, "imgenv", 1, 1, "", nil)
	delete(rel.Env, runtimetest.EnvVersion)
	rel.ImageEnv = map[string]string{runtimetest.EnvVersion: "from-image"}
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if body, err := get(p, "imgenv", "/"); err != nil || strings.TrimSpace(body) != "from-image" {
		t.Fatalf("GET with the version only in ImageEnv: %q, %v; want from-image", body, err)
	}

	rel = webRelease(t, "imgenv", 2, 1, "from-config", nil)
	rel.ImageEnv = map[string]string{runtimetest.EnvVersion: "from-image"}
	if err := d.Deploy(ctx, rel, nil); err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if body, err := get(p, "imgenv", "/"); err != nil || strings.TrimSpace(body) != "from-config" {
		t.Fatalf("GET with the version in both: %q, %v; want from-config (Env wins)", body, err)
	}
}

// TestWatchTellsOfChanges: a watcher hears of an app's instance that
// crashes and comes back, and of the app's removal, by the app's name,
// and nothing once its context ended.
func TestWatchTellsOfChanges(t *testing.T) {
	d := newDriver(t, process.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	heard := map[string]int{}
	watchCtx, stopWatch := context.WithCancel(ctx)
	d.Watch(watchCtx, func(tn, app string) {
		mu.Lock()
		defer mu.Unlock()
		heard[tn+"/"+app]++
	})
	count := func(app string) int {
		mu.Lock()
		defer mu.Unlock()
		return heard[tenant+"/"+app]
	}
	if err := d.Deploy(ctx, webRelease(t, "watched", 1, 1, "v1", nil), nil); err != nil {
		t.Fatalf("deploying: %v", err)
	}
	if count("watched") == 0 {
		t.Fatal("a deploy that started an instance and made it live told nothing")
	}
	before := count("watched")
	if _, err := get(newEdge(t, d), "watched", "/exit"); err == nil {
		t.Log("the /exit request got an answer")
	}
	platformtest.Eventually(t, 30*time.Second, "the crash told", func(context.Context) error {
		if count("watched") == before {
			return errors.New("nothing told since the crash")
		}
		return nil
	})
	if err := d.Remove(ctx, tenant, "watched-not"); err != nil {
		t.Fatal(err)
	}
	if n := count("watched-not"); n != 0 {
		t.Errorf("an app the driver never ran was told of %d times", n)
	}
	stopWatch()
	after := count("watched")
	if err := d.Remove(ctx, tenant, "watched"); err != nil {
		t.Fatal(err)
	}
	if n := count("watched"); n != after {
		t.Errorf("a watcher whose context ended heard %d more changes", n-after)
	}
}
