package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/upgrade/rollout"
	"bex.co/bex/test/platformtest"
)

const (
	fromVersion = "1.36.3"
	toVersion   = "1.37.2"
)

// startPlane starts three MVP-wired apiservers at fromVersion behind the
// plane's load balancer.
func startPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	return cptest.StartWith(t, controlplane.Options{
		LoadBalancer: true,
		DrainTimeout: 2 * time.Second,
		APIServers: []controlplane.APIServerSpec{
			{Name: "apiserver-1", Version: fromVersion},
			{Name: "apiserver-2", Version: fromVersion},
			{Name: "apiserver-3", Version: fromVersion},
		},
	})
}

// TestRolloutUnderLoad rolls three MVP-wired 1.36.3 apiservers to 1.37.2
// behind the load balancer while tenant-like clients list namespaces and
// configmaps through it. It pauses the rollout in the gate after the first
// step and shows the mixed plane serving meanwhile, then shows that the
// rollout completes with every server at 1.37.2, under new names, all in the
// load balancer, that no more than three servers ever ran (maxSurge 0), and
// that the gate saw every step. Load failures are reported, not asserted:
// the verifier-gated suite owns that verdict.
func TestRolloutUnderLoad(t *testing.T) {
	cp := startPlane(t)
	load := startLoad(t, cp.RESTConfig())
	waitEveryServerServed(t, cp)
	rec := newRecorder(t)

	paused := make(chan rollout.Step)
	resume := make(chan struct{})
	var gated []int
	opts := rollout.Options{
		Version: toVersion,
		OnEvent: rec.record,
		Gate: func(ctx context.Context, s rollout.Step) error {
			gated = append(gated, s.Index)
			if s.Index != 1 {
				return nil
			}
			select {
			case paused <- s:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case <-resume:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	type outcome struct {
		res rollout.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := rollout.Run(ctx, cp, opts)
		done <- outcome{res, err}
	}()

	select {
	case s := <-paused:
		if s.Old != "apiserver-1" || s.New != "apiserver-1-"+toVersion || s.Total != 3 {
			t.Errorf("first step = %+v, want apiserver-1 replaced by apiserver-1-%s of 3", s, toVersion)
		}
		if got := versionCounts(cp); got != fmt.Sprintf("%s×2 %s×1", fromVersion, toVersion) {
			t.Errorf("running versions while paused = %s", got)
		}
		assertRotationIsRunning(t, cp)
		// Paused: the mixed plane serves the tenants.
		before := load.snapshot().ok
		platformtest.Eventually(t, 2*time.Minute, "20 more successful requests while paused", func(context.Context) error {
			if n := load.snapshot().ok; n < before+20 {
				return fmt.Errorf("%d successful requests", n-before)
			}
			return nil
		})
		close(resume)
	case o := <-done:
		t.Fatalf("rollout ended before its gate paused it: %v", o.err)
	}
	o := <-done
	if o.err == nil {
		waitEveryServerServed(t, cp)
	}
	load.stopAndReport()
	rec.report(o.res.Started)
	if o.err != nil {
		t.Fatalf("rollout: %v", o.err)
	}
	t.Logf("rollout took %s for %d steps", o.res.Finished.Sub(o.res.Started).Round(100*time.Millisecond), len(o.res.Steps))
	logLBStats(t, cp)

	if len(o.res.Steps) != 3 {
		t.Fatalf("steps done = %d, want 3", len(o.res.Steps))
	}
	if !slices.Equal(gated, []int{1, 2, 3}) {
		t.Fatalf("gate saw steps %v, want [1 2 3]", gated)
	}
	var names []string
	for _, s := range running(cp) {
		names = append(names, s.Name)
		if s.Version != toVersion {
			t.Errorf("%s runs %s after the rollout, want %s", s.Name, s.Version, toVersion)
		}
	}
	sort.Strings(names)
	want := []string{"apiserver-1-" + toVersion, "apiserver-2-" + toVersion, "apiserver-3-" + toVersion}
	if !slices.Equal(names, want) {
		t.Fatalf("running after the rollout: %v, want %v", names, want)
	}
	assertRotationIsRunning(t, cp)
	rec.assertMaxSurgeZero(3)
	if _, err := kubernetes.NewForConfigOrDie(cp.RESTConfig()).CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing namespaces through the load balancer after the rollout: %v", err)
	}
}

// TestRolloutKillAbortResume kills the first step's old server with SIGKILL
// instead of stopping it, aborts in the gate after that step, and shows the
// plane left mixed (the killed server gone from the load balancer, its
// replacement in); a second Run resumes from there and finishes the
// remaining two steps.
func TestRolloutKillAbortResume(t *testing.T) {
	cp := startPlane(t)
	load := startLoad(t, cp.RESTConfig())
	waitEveryServerServed(t, cp)
	rec := newRecorder(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	errAbort := errors.New("verifier says no")
	res, err := rollout.Run(ctx, cp, rollout.Options{
		Version: toVersion,
		OnEvent: rec.record,
		Kill:    func(s rollout.Step) bool { return s.Index == 1 },
		Gate:    func(context.Context, rollout.Step) error { return errAbort },
	})
	if !errors.Is(err, errAbort) {
		t.Fatalf("first run: err = %v, want the gate's error", err)
	}
	if len(res.Steps) != 1 || !res.Steps[0].Killed || res.Steps[0].Old != "apiserver-1" {
		t.Fatalf("first run's steps = %+v, want one step that killed apiserver-1", res.Steps)
	}
	if got := versionCounts(cp); got != fmt.Sprintf("%s×2 %s×1", fromVersion, toVersion) {
		t.Fatalf("running versions after the abort = %s", got)
	}
	if cp.APIServer("apiserver-1").Running() {
		t.Fatal("the killed server still runs")
	}
	assertRotationIsRunning(t, cp)
	afterAbort := load.snapshot()

	res, err = rollout.Run(ctx, cp, rollout.Options{Version: toVersion, OnEvent: rec.record})
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	if len(res.Steps) != 2 || res.Steps[0].Total != 2 || res.Steps[0].Killed {
		t.Fatalf("resumed run's steps = %+v, want two clean steps of two", res.Steps)
	}
	waitEveryServerServed(t, cp)
	load.stopAndReport()
	t.Logf("load until the abort: %d requests, %d failures", afterAbort.ok+afterAbort.failed, afterAbort.failed)
	rec.report(rec.start)
	logLBStats(t, cp)
	if got := versionCounts(cp); got != toVersion+"×3" {
		t.Fatalf("running versions after the resumed run = %s", got)
	}
	assertRotationIsRunning(t, cp)
	rec.assertMaxSurgeZero(3)
}

// TestRolloutRefusesTooFewServers shows KCP's rule: maxSurge 0 needs three
// servers. No apiserver is touched.
func TestRolloutRefusesTooFewServers(t *testing.T) {
	cp := cptest.StartWith(t, controlplane.Options{APIServers: []controlplane.APIServerSpec{{Name: "only", Version: fromVersion}}})
	_, err := rollout.Run(context.Background(), cp, rollout.Options{Version: toVersion})
	if !errors.Is(err, rollout.ErrTooFewServers) {
		t.Fatalf("err = %v, want ErrTooFewServers", err)
	}
	if s := cp.APIServer("only"); !s.Running() || s.Version != fromVersion {
		t.Fatal("a refused rollout touched the server")
	}
	if _, err := rollout.Run(context.Background(), cp, rollout.Options{Version: fromVersion}); err != nil {
		t.Fatalf("a rollout with nothing to do: %v", err)
	}
}

// TestRolloutOutdated rolls three 1.36.3 apiservers without MVP to 1.36.3
// with MVP: a flags-only rollout, as wiring MVP is. With Options.Outdated
// choosing the unwired servers and Options.Spec wiring each replacement,
// every server is replaced once, under a new name, and the rollout ends;
// without Outdated the same target version means nothing to do.
func TestRolloutOutdated(t *testing.T) {
	cp := cptest.StartWith(t, controlplane.Options{
		LoadBalancer: true,
		DrainTimeout: time.Second,
		APIServers: []controlplane.APIServerSpec{
			{Name: "apiserver-1", Version: fromVersion, NoMVP: true},
			{Name: "apiserver-2", Version: fromVersion, NoMVP: true},
			{Name: "apiserver-3", Version: fromVersion, NoMVP: true},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	res, err := rollout.Run(ctx, cp, rollout.Options{Version: fromVersion})
	if err != nil || len(res.Steps) != 0 {
		t.Fatalf("same version without Outdated: %d steps, %v; want nothing done", len(res.Steps), err)
	}

	rec := newRecorder(t)
	res, err = rollout.Run(ctx, cp, rollout.Options{
		Version:  fromVersion,
		OnEvent:  rec.record,
		Outdated: func(s *controlplane.APIServer) bool { return s.Spec.NoMVP },
		Spec:     func(s *controlplane.APIServerSpec) { s.NoMVP = false },
	})
	rec.report(rec.start)
	if err != nil {
		t.Fatalf("flags-only rollout: %v", err)
	}
	if len(res.Steps) != 3 {
		t.Fatalf("steps done = %d, want 3", len(res.Steps))
	}
	var names []string
	for _, s := range running(cp) {
		names = append(names, s.Name)
		if s.Version != fromVersion || s.Spec.NoMVP {
			t.Errorf("%s runs %s with NoMVP=%t, want %s wired", s.Name, s.Version, s.Spec.NoMVP, fromVersion)
		}
	}
	sort.Strings(names)
	want := []string{"apiserver-1-" + fromVersion, "apiserver-2-" + fromVersion, "apiserver-3-" + fromVersion}
	if !slices.Equal(names, want) {
		t.Fatalf("running after the rollout: %v, want %v", names, want)
	}
	assertRotationIsRunning(t, cp)
	rec.assertMaxSurgeZero(3)
}

func running(cp *controlplane.ControlPlane) []*controlplane.APIServer {
	return slices.DeleteFunc(cp.APIServers(), func(s *controlplane.APIServer) bool { return !s.Running() })
}

// versionCounts renders the running servers' versions, "1.36.3×2 1.37.2×1".
func versionCounts(cp *controlplane.ControlPlane) string {
	n := map[string]int{}
	for _, s := range running(cp) {
		n[s.Version]++
	}
	var parts []string
	for v, c := range n {
		parts = append(parts, fmt.Sprintf("%s×%d", v, c))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// assertRotationIsRunning checks that the load balancer's rotation is exactly
// the running servers.
func assertRotationIsRunning(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	var want []string
	for _, s := range running(cp) {
		want = append(want, s.Addr())
	}
	got := cp.LoadBalancer().Backends()
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("load balancer rotation %v is not the running servers %v", got, want)
	}
}

// waitEveryServerServed waits until the load has reached every running
// server through the load balancer.
func waitEveryServerServed(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	platformtest.Eventually(t, 2*time.Minute, "the load to reach every running server", func(context.Context) error {
		st := cp.LoadBalancer().Stats()
		for _, s := range running(cp) {
			if b, ok := st.Backend(s.Addr()); !ok || b.Total == 0 {
				return fmt.Errorf("no connection to %s yet", s.Name)
			}
		}
		return nil
	})
}

func logLBStats(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	names := map[string]string{}
	for _, s := range cp.APIServers() {
		names[s.Addr()] = s.Name
	}
	st := cp.LoadBalancer().Stats()
	t.Logf("load balancer: %d connections accepted, %d refused", st.Accepted, st.Refused)
	for _, b := range st.Backends {
		t.Logf("  %-22s %s in rotation=%t active=%d total=%d dialFailures=%d", names[b.Addr], b.Addr, b.InRotation, b.Active, b.Total, b.DialFailures)
	}
}

// recorder keeps the rollout's events and logs them as a timeline.
type recorder struct {
	t      *testing.T
	start  time.Time
	mu     sync.Mutex
	events []rollout.Event
}

func newRecorder(t *testing.T) *recorder { return &recorder{t: t, start: time.Now()} }

func (r *recorder) record(ev rollout.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) report(origin time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		var servers []string
		for _, s := range ev.Servers {
			lb := ""
			if s.InLoadBalancer {
				lb = "+lb"
			}
			servers = append(servers, s.Name+"@"+s.Version+lb)
		}
		step := ""
		if ev.Step.Index > 0 {
			step = fmt.Sprintf("step %d/%d %s@%s → %s@%s", ev.Step.Index, ev.Step.Total, ev.Step.Old, ev.Step.OldVersion, ev.Step.New, ev.Step.NewVersion)
		}
		r.t.Logf("%+8.1fs %-12s %s [%s]", ev.Time.Sub(origin).Seconds(), ev.Phase, step, strings.Join(servers, " "))
	}
}

// assertMaxSurgeZero checks, over every event, that no more than n servers
// ran, and that each replacement started with the old server already gone.
func (r *recorder) assertMaxSurgeZero(n int) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if len(ev.Servers) > n {
			r.t.Fatalf("%s of step %d: %d servers running, more than %d", ev.Phase, ev.Step.Index, len(ev.Servers), n)
		}
		if ev.Phase != rollout.PhaseStarting {
			continue
		}
		if len(ev.Servers) != n-1 || slices.ContainsFunc(ev.Servers, func(s rollout.Server) bool { return s.Name == ev.Step.Old }) {
			r.t.Fatalf("step %d started %s with %v running, want the %d others only", ev.Step.Index, ev.Step.New, ev.Servers, n-1)
		}
	}
}

// load is a tenant-like load through the plane's endpoint: two clients with
// long-lived connections (as controllers hold) and one that opens a new
// connection per request (as kubectl does), each listing namespaces and
// configmaps in turn, paced, until stopped.
type load struct {
	t    *testing.T
	stop chan struct{}
	wg   sync.WaitGroup
	t0   time.Time

	mu       sync.Mutex
	ok       map[string]int
	failed   map[string]int
	failures []string // the first few, with the time since t0
}

type loadCounts struct{ ok, failed int }

func startLoad(t *testing.T, cfg *rest.Config) *load {
	l := &load{t: t, stop: make(chan struct{}), t0: time.Now(), ok: map[string]int{}, failed: map[string]int{}}
	for _, name := range []string{"controller-1", "controller-2"} {
		c := rest.CopyConfig(cfg)
		// A Dial of its own gives the client its own transport, and so its
		// own connection through the load balancer.
		c.Dial = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
		cs := kubernetes.NewForConfigOrDie(c)
		l.run(name, func(ctx context.Context, i int) error {
			if i%2 == 0 {
				_, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
				return err
			}
			_, err := cs.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
			return err
		})
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.run("kubectl", func(ctx context.Context, i int) error {
		tr := &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		path := "/api/v1/namespaces"
		if i%2 == 1 {
			path = "/api/v1/namespaces/kube-system/configmaps"
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return nil
	})
	t.Cleanup(func() { l.halt() })
	return l
}

// run starts one client: a request every 50 ms, at most for 30 minutes.
func (l *load) run(name string, request func(ctx context.Context, i int) error) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		end := time.After(30 * time.Minute)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-end:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := request(ctx, i)
			cancel()
			l.mu.Lock()
			if err == nil {
				l.ok[name]++
			} else {
				l.failed[name]++
				if len(l.failures) < 20 {
					l.failures = append(l.failures, fmt.Sprintf("%+8.1fs %s: %v", time.Since(l.t0).Seconds(), name, err))
				}
			}
			l.mu.Unlock()
		}
	}()
}

func (l *load) snapshot() loadCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	var c loadCounts
	for _, n := range l.ok {
		c.ok += n
	}
	for _, n := range l.failed {
		c.failed += n
	}
	return c
}

func (l *load) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// stopAndReport stops the clients and logs what they got.
func (l *load) stopAndReport() {
	l.halt()
	c := l.snapshot()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Logf("load through the load balancer over %s: %d requests, %d failures", time.Since(l.t0).Round(100*time.Millisecond), c.ok+c.failed, c.failed)
	for _, name := range []string{"controller-1", "controller-2", "kubectl"} {
		l.t.Logf("  %-12s ok=%d failed=%d", name, l.ok[name], l.failed[name])
	}
	for _, f := range l.failures {
		l.t.Logf("  failure %s", f)
	}
}
