package placed_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/internal/runtime/process"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/internal/store"
)

const (
	tenant = "acme"
	domain = "bex.test"
)

var (
	appDir    string
	buildOnce sync.Once
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bex-placed-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	appDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// ledger is an in-memory placed.Ledger (the store's is tested in
// internal/store); fail makes SetServingCluster fail.
type ledger struct {
	mu        sync.Mutex
	m         map[string]string
	fail      error
	leftovers []store.Leftover
}

func (l *ledger) AddLeftover(_ context.Context, left store.Leftover) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Contains(l.leftovers, left) {
		l.leftovers = append(l.leftovers, left)
	}
	return nil
}

func (l *ledger) Leftovers(context.Context) ([]store.Leftover, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.leftovers), nil
}

func (l *ledger) ClearLeftover(_ context.Context, left store.Leftover) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leftovers = slices.DeleteFunc(l.leftovers, func(x store.Leftover) bool { return x == left })
	return nil
}

func (l *ledger) ServingClusters(context.Context) (map[string]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.m), nil
}

func (l *ledger) ServingCluster(_ context.Context, tenant, app string) (string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.m[placed.Key(tenant, app)]
	return c, ok, nil
}

func (l *ledger) SetServingCluster(_ context.Context, tenant, app, cluster string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	if l.m == nil {
		l.m = map[string]string{}
	}
	l.m[placed.Key(tenant, app)] = cluster
	return nil
}

func (l *ledger) ClearServingCluster(_ context.Context, tenant, app string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, placed.Key(tenant, app))
	return nil
}

func (l *ledger) get(tenant, app string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[placed.Key(tenant, app)]
}

func newProcessDriver(t *testing.T) *process.Driver {
	t.Helper()
	d := process.New(process.Options{
		LogDir: t.TempDir(), BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		DrainDelay: 100 * time.Millisecond, GracePeriod: 5 * time.Second,
	})
	t.Cleanup(func() { d.Close() })
	return d
}

// fleet is two clusters, a and b, each a process driver.
func fleet(t *testing.T) placed.Static {
	a, b := newProcessDriver(t), newProcessDriver(t)
	return placed.Static{"a": {Driver: a, Apps: a}, "b": {Driver: b, Apps: b}}
}

func newDriver(t *testing.T, clusters placed.Clusters, l placed.Ledger) *placed.Driver {
	t.Helper()
	return newDriverWith(t, placed.Options{Clusters: clusters, Ledger: l})
}

func newDriverWith(t *testing.T, opts placed.Options) *placed.Driver {
	t.Helper()
	opts.DrainDelay = cmp.Or(opts.DrainDelay, 300*time.Millisecond)
	opts.RoutedTimeout = cmp.Or(opts.RoutedTimeout, 10*time.Second)
	d, err := placed.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func complete(t *testing.T, rel runtime.Release) runtime.Release {
	buildOnce.Do(func() { runtimetest.BuildTestApp(t, appDir) })
	return runtimetest.InDir(rel, appDir)
}

func get(d *placed.Driver, tenant, app, path string) (string, error) {
	return runtimetest.EdgeGet(d, domain, tenant, app, path)
}

// TestDriverSuite: the placed driver keeps every promise of a driver, on
// the cluster each release names.
func TestDriverSuite(t *testing.T) {
	runtimetest.RunDriverSuite(t, func(t *testing.T) runtime.Driver { return newDriver(t, fleet(t), &ledger{}) }, runtimetest.Harness{
		Complete: func(t *testing.T, rel runtime.Release) runtime.Release {
			rel = complete(t, rel)
			rel.Cluster = "b"
			return rel
		},
		Get: func(t *testing.T, d runtime.Driver, tenant, app, path string) (string, error) {
			return get(d.(*placed.Driver), tenant, app, path)
		},
		Logs: true,
	})
}

func webRelease(t *testing.T, app, cluster string, number int, env map[string]string) runtime.Release {
	e := map[string]string{runtimetest.EnvVersion: fmt.Sprintf("v%d", number)}
	maps.Copy(e, env)
	return complete(t, runtime.Release{
		Tenant: tenant, App: app, Number: number, Cluster: cluster, Env: e,
		Processes:   map[string]runtime.Process{runtime.WebProcess: {Replicas: 2}},
		HealthCheck: runtime.HealthCheck{Path: runtimetest.HealthPath, Interval: 100 * time.Millisecond, Timeout: 2 * time.Second},
	})
}

func deploy(t *testing.T, d runtime.Driver, rel runtime.Release) string {
	t.Helper()
	var log strings.Builder
	if err := d.Deploy(t.Context(), rel, &log); err != nil {
		t.Fatalf("deploying v%d on %s: %v\n%s", rel.Number, rel.Cluster, err, log.String())
	}
	return log.String()
}

// runs reports whether cluster's own driver runs the app.
func runs(t *testing.T, clusters placed.Static, cluster, app string) bool {
	t.Helper()
	_, err := clusters[cluster].Driver.Status(t.Context(), tenant, app)
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// load sends requests through h until stop is closed, and counts those
// that did not answer v1.
func load(h *placed.Driver, app string, stop <-chan struct{}) (sent, failed *atomic.Int64, firstErr *atomic.Value, done <-chan struct{}) {
	sent, failed, firstErr = &atomic.Int64{}, &atomic.Int64{}, &atomic.Value{}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			select {
			case <-stop:
				return
			default:
			}
			sent.Add(1)
			if body, err := get(h, tenant, app, "/"); err != nil || strings.TrimSpace(body) != "v1" {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("%q %v", body, err))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return sent, failed, firstErr, ch
}

// TestMoveLosesNoRequest: a deploy onto another cluster starts the
// release there, switches the edge and removes the app from the old
// cluster, while requests through the edge keep being answered.
func TestMoveLosesNoRequest(t *testing.T) {
	clusters, l := fleet(t), &ledger{}
	d := newDriver(t, clusters, l)
	h := d
	deploy(t, d, webRelease(t, "web", "a", 1, nil))
	if got := l.get(tenant, "web"); got != "a" {
		t.Fatalf("ledger says %q serves, want a", got)
	}
	if body, err := get(h, tenant, "web", "/"); err != nil || strings.TrimSpace(body) != "v1" {
		t.Fatalf("before the move: %q %v", body, err)
	}

	stop := make(chan struct{})
	sent, failed, firstErr, done := load(h, "web", stop)
	time.Sleep(200 * time.Millisecond)
	log := deploy(t, d, webRelease(t, "web", "b", 1, nil))
	time.Sleep(200 * time.Millisecond)
	close(stop)
	<-done
	t.Logf("%d requests during the move", sent.Load())
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed during the move, first: %v", n, sent.Load(), firstErr.Load())
	}
	for _, want := range []string{"Moving from cluster a to b", "Serving from cluster b", "Removed from cluster a"} {
		if !strings.Contains(log, want) {
			t.Errorf("deploy output has no %q:\n%s", want, log)
		}
	}
	if runs(t, clusters, "a", "web") || !runs(t, clusters, "b", "web") {
		t.Fatalf("after the move: runs on a %v, on b %v; want b only", runs(t, clusters, "a", "web"), runs(t, clusters, "b", "web"))
	}
	st, err := d.Status(t.Context(), tenant, "web")
	if err != nil || st.Cluster != "b" || st.Release != 1 {
		t.Fatalf("status after the move: %+v %v", st, err)
	}
	if got := l.get(tenant, "web"); got != "b" {
		t.Fatalf("ledger says %q serves, want b", got)
	}

	// A driver made anew (the platform restarted) finds where the app runs.
	again := newDriver(t, clusters, l)
	if c, ok := again.Serving(tenant, "web"); !ok || c != "b" {
		t.Fatalf("after a restart the app is served by %q (%v), want b", c, ok)
	}
	if body, err := get(again, tenant, "web", "/"); err != nil || strings.TrimSpace(body) != "v1" {
		t.Fatalf("after a restart: %q %v", body, err)
	}
}

// TestFailedMoveKeepsTheOldCluster: a release that does not become healthy
// on the new cluster is removed there, and the old one keeps serving.
func TestFailedMoveKeepsTheOldCluster(t *testing.T) {
	clusters, l := fleet(t), &ledger{}
	d := newDriver(t, clusters, l)
	h := d
	deploy(t, d, webRelease(t, "web", "a", 1, nil))

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var log strings.Builder
	err := d.Deploy(ctx, webRelease(t, "web", "b", 2, map[string]string{runtimetest.EnvFailHealth: "1"}), &log)
	if err == nil || !strings.Contains(err.Error(), "keeps running on a") {
		t.Fatalf("a failed move: %v, want an error saying a keeps serving\n%s", err, log.String())
	}
	if !runs(t, clusters, "a", "web") || runs(t, clusters, "b", "web") {
		t.Fatalf("after a failed move: runs on a %v, on b %v; want a only", runs(t, clusters, "a", "web"), runs(t, clusters, "b", "web"))
	}
	if body, err := get(h, tenant, "web", "/"); err != nil || strings.TrimSpace(body) != "v1" {
		t.Fatalf("after a failed move: %q %v", body, err)
	}

	// The ledger refuses: the move is undone as well.
	l.fail = errors.New("database down")
	err = d.Deploy(t.Context(), webRelease(t, "web", "b", 2, nil), &log)
	if err == nil || !strings.Contains(err.Error(), "database down") {
		t.Fatalf("a move the ledger refuses: %v", err)
	}
	if !runs(t, clusters, "a", "web") || runs(t, clusters, "b", "web") {
		t.Fatalf("after a move the ledger refused: runs on a %v, on b %v; want a only", runs(t, clusters, "a", "web"), runs(t, clusters, "b", "web"))
	}
}

// unreachable is a cluster's driver whose Remove fails while down is set,
// as a cluster's apiserver that does not answer.
type unreachable struct {
	runtime.Driver
	down atomic.Bool
}

func (u *unreachable) Remove(ctx context.Context, tenant, app string) error {
	if u.down.Load() {
		return errors.New("connection refused")
	}
	return u.Driver.Remove(ctx, tenant, app)
}

// TestLeftoversAreRemovedLater: a move whose removal from the old cluster
// fails says so, keeps the app served from the new cluster, and records
// the leftover; RemoveLeftovers removes it once the old cluster answers,
// and forgets a leftover whose cluster serves the app again.
func TestLeftoversAreRemovedLater(t *testing.T) {
	clusters, l := fleet(t), &ledger{}
	a := &unreachable{Driver: clusters["a"].Driver}
	clusters["a"] = placed.Cluster{Driver: a, Apps: clusters["a"].Apps}
	d := newDriver(t, clusters, l)
	deploy(t, d, webRelease(t, "web", "a", 1, nil))

	a.down.Store(true)
	var log strings.Builder
	if err := d.Deploy(t.Context(), webRelease(t, "web", "b", 2, nil), &log); err != nil {
		t.Fatalf("a move whose removal fails: %v, want it done\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "could not be removed from cluster a yet") {
		t.Errorf("the move's log does not say the app is left on a:\n%s", log.String())
	}
	if body, err := get(d, tenant, "web", "/"); err != nil || strings.TrimSpace(body) != "v2" {
		t.Fatalf("after the move: %q %v, want v2 from b", body, err)
	}
	left := store.Leftover{Tenant: tenant, App: "web", Cluster: "a"}
	if got, _ := l.Leftovers(t.Context()); !slices.Equal(got, []store.Leftover{left}) {
		t.Fatalf("leftovers %v, want %v", got, left)
	}
	if !runs(t, clusters, "a", "web") {
		t.Fatal("the app does not run on a: the removal was meant to fail")
	}

	// Still down: the leftover stays.
	if err := d.RemoveLeftovers(t.Context()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("RemoveLeftovers with a down: %v, want its error", err)
	}
	if got, _ := l.Leftovers(t.Context()); len(got) != 1 || !runs(t, clusters, "a", "web") {
		t.Fatalf("after a failed retry: leftovers %v, runs on a %t", got, runs(t, clusters, "a", "web"))
	}

	a.down.Store(false)
	if err := d.RemoveLeftovers(t.Context()); err != nil {
		t.Fatal(err)
	}
	if runs(t, clusters, "a", "web") {
		t.Fatal("the app still runs on a after RemoveLeftovers")
	}
	if got, _ := l.Leftovers(t.Context()); len(got) != 0 {
		t.Fatalf("leftovers %v after their removal", got)
	}
	if body, err := get(d, tenant, "web", "/"); err != nil || strings.TrimSpace(body) != "v2" {
		t.Fatalf("after the leftover's removal: %q %v, want v2 from b", body, err)
	}

	// A leftover on the cluster that serves the app again is forgotten,
	// not removed.
	if err := l.AddLeftover(t.Context(), store.Leftover{Tenant: tenant, App: "web", Cluster: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveLeftovers(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Leftovers(t.Context()); len(got) != 0 || !runs(t, clusters, "b", "web") {
		t.Fatalf("a leftover on the serving cluster: leftovers %v, runs on b %t", got, runs(t, clusters, "b", "web"))
	}
}

// TestUnplacedAndGoneClusters: a release placed nowhere, or on a cluster
// the fleet does not have, changes nothing; an app whose cluster is gone
// is removed from the ledger.
func TestUnplacedAndGoneClusters(t *testing.T) {
	clusters, l := fleet(t), &ledger{}
	d := newDriver(t, clusters, l)
	if err := d.Deploy(t.Context(), webRelease(t, "web", "", 1, nil), &strings.Builder{}); !errors.Is(err, placed.ErrNotPlaced) {
		t.Fatalf("a release with no cluster: %v, want ErrNotPlaced", err)
	}
	if err := d.Deploy(t.Context(), webRelease(t, "web", "c", 1, nil), &strings.Builder{}); !errors.Is(err, placed.ErrNoCluster) {
		t.Fatalf("a release on an unknown cluster: %v, want ErrNoCluster", err)
	}
	if _, ok := d.Serving(tenant, "web"); ok {
		t.Fatal("a refused release left the app served")
	}

	_ = l.SetServingCluster(t.Context(), tenant, "old", "gone")
	d = newDriver(t, clusters, l)
	if _, err := d.Status(t.Context(), tenant, "old"); !errors.Is(err, placed.ErrNoCluster) {
		t.Fatalf("status of an app on a gone cluster: %v, want ErrNoCluster", err)
	}
	if err := d.Remove(t.Context(), tenant, "old"); err != nil {
		t.Fatalf("removing an app whose cluster is gone: %v", err)
	}
	if _, ok := d.Serving(tenant, "old"); ok || l.get(tenant, "old") != "" {
		t.Fatal("the app whose cluster is gone is still in the ledger")
	}
}

// TestRunsWhereTheAppIsPlaced: a one-off command runs on the cluster the
// release names; on a cluster whose driver runs none the error says so
// (runtime.ErrRunNotSupported), and a release placed nowhere runs nothing.
func TestRunsWhereTheAppIsPlaced(t *testing.T) {
	clusters := fleet(t)
	// A driver that is no runtime.Runner, as a workload cluster's.
	clusters["k"] = placed.Cluster{Driver: &unreachable{Driver: clusters["a"].Driver}}
	d := newDriver(t, clusters, &ledger{})
	var out strings.Builder
	cmd := runtime.Command{Args: []string{"sh", "-c", "echo ran"}, Name: "run.1", Attach: func(int) (runtime.Streams, error) {
		return runtime.Streams{Stdout: &out}, nil
	}}
	if exit, err := d.Run(t.Context(), webRelease(t, "web", "b", 1, nil), cmd); err != nil || exit.Code != 0 || out.String() != "ran\n" {
		t.Fatalf("a run on b: %+v, %v, output %q", exit, err, out.String())
	}
	if _, err := d.Run(t.Context(), webRelease(t, "web", "k", 1, nil), cmd); !errors.Is(err, runtime.ErrRunNotSupported) {
		t.Errorf("a run on a cluster that runs no commands: %v, want ErrRunNotSupported", err)
	}
	if _, err := d.Run(t.Context(), webRelease(t, "web", "", 1, nil), cmd); !errors.Is(err, placed.ErrNotPlaced) {
		t.Errorf("a run placed nowhere: %v, want ErrNotPlaced", err)
	}
	if out.String() != "ran\n" {
		t.Errorf("refused runs ran: output %q", out.String())
	}
}

// polled is a cluster's driver that tells of no change, as a kube
// driver's: it hides the process driver's Watch.
type polled struct{ runtime.Driver }

// TestWatchesFollowTheServingCluster: the placed driver tells of the
// changes of an app that a watching cluster serves, and says it does not
// see them once the app moved to a cluster whose driver tells nothing.
func TestWatchesFollowTheServingCluster(t *testing.T) {
	a, b := newProcessDriver(t), newProcessDriver(t)
	clusters := placed.Static{"a": {Driver: a, Apps: a}, "b": {Driver: polled{b}, Apps: b}}
	d := newDriver(t, clusters, &ledger{})
	var told atomic.Int64
	d.Watch(t.Context(), func(tn, app string) {
		if tn == tenant && app == "watched" {
			told.Add(1)
		}
	})
	if d.Watches(tenant, "watched") {
		t.Error("an app no cluster serves is said to be watched")
	}
	deploy(t, d, webRelease(t, "watched", "a", 1, nil))
	if !d.Watches(tenant, "watched") || told.Load() == 0 {
		t.Fatalf("on the watching cluster: watched %v, told %d times", d.Watches(tenant, "watched"), told.Load())
	}
	deploy(t, d, webRelease(t, "watched", "b", 1, nil))
	if d.Watches(tenant, "watched") {
		t.Error("an app moved to a cluster whose driver tells nothing is still said to be watched")
	}
}

// together is a cluster's driver that reads apps together
// (runtime.AppsReader), as a kube driver does, from its driver's Status
// and Usage; it counts its calls.
type together struct {
	runtime.Driver
	calls atomic.Int32
}

func (g *together) ReadApps(ctx context.Context, apps []runtime.AppName) (map[runtime.AppName]runtime.AppReading, error) {
	g.calls.Add(1)
	out := map[runtime.AppName]runtime.AppReading{}
	for _, a := range apps {
		var r runtime.AppReading
		r.Status, r.StatusErr = g.Driver.Status(ctx, a.Tenant, a.App)
		r.Usage, r.UsageErr = g.Driver.(runtime.UsageReader).Usage(ctx, a.Tenant, a.App)
		out[a] = r
	}
	return out, nil
}

// TestReadAppsByCluster: the apps a cluster whose driver reads apps
// together serves are read there in one call, those of a cluster whose
// driver does not one by one, each reading with its cluster; an app served
// nowhere reads as not found.
func TestReadAppsByCluster(t *testing.T) {
	a, b := newProcessDriver(t), newProcessDriver(t)
	g := &together{Driver: b}
	d := newDriver(t, placed.Static{"a": {Driver: a, Apps: a}, "b": {Driver: g, Apps: b}}, &ledger{})
	for _, rel := range []runtime.Release{webRelease(t, "one", "a", 1, nil), webRelease(t, "two", "b", 1, nil), webRelease(t, "three", "b", 1, nil)} {
		if err := d.Deploy(t.Context(), rel, &strings.Builder{}); err != nil {
			t.Fatalf("deploying %s on %s: %v", rel.App, rel.Cluster, err)
		}
	}
	names := []runtime.AppName{{Tenant: tenant, App: "one"}, {Tenant: tenant, App: "two"}, {Tenant: tenant, App: "three"}, {Tenant: tenant, App: "none"}}
	readings, err := d.ReadApps(t.Context(), names)
	if err != nil {
		t.Fatal(err)
	}
	if n := g.calls.Load(); n != 1 {
		t.Errorf("cluster b's ReadApps was called %d times for its two apps, want once", n)
	}
	for _, c := range []struct{ app, cluster string }{{"one", "a"}, {"two", "b"}, {"three", "b"}} {
		r := readings[runtime.AppName{Tenant: tenant, App: c.app}]
		if r.StatusErr != nil || r.Status.Cluster != c.cluster || len(r.Status.Instances) != 2 || r.UsageErr != nil || len(r.Usage) != 2 {
			t.Errorf("%s: %+v, want its two instances on %s with their usage", c.app, r, c.cluster)
		}
	}
	if r := readings[runtime.AppName{Tenant: tenant, App: "none"}]; !errors.Is(r.StatusErr, runtime.ErrNotFound) {
		t.Errorf("an app served nowhere: %+v, want ErrNotFound", r)
	}
}

// TestSharedLedger: in a cluster install three processes deploy through
// one Ledger, each with a driver of its own, and the edge only routes.
// A move made by one (the git receiver) is seen by the others at their
// next call (web's status and logs, the controller manager's deploy of
// the same release, which moves nothing), and the edge, following the
// Ledger, keeps routing to the old cluster while its table of the new one
// lists no instance, then switches, without losing a request.
func TestSharedLedger(t *testing.T) {
	clusters, l := fleet(t), &ledger{}
	shared := func(drain time.Duration, c placed.Clusters) *placed.Driver {
		return newDriverWith(t, placed.Options{Clusters: c, Ledger: l, Shared: true, DrainDelay: drain})
	}
	lag := &lagging{Static: clusters}
	git, web, cm, edge := shared(2*time.Second, clusters), shared(0, clusters), shared(0, clusters), shared(0, lag)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go edge.Follow(ctx, 50*time.Millisecond)

	deploy(t, git, webRelease(t, "web", "a", 1, nil))
	if st, err := cm.Status(t.Context(), tenant, "web"); err != nil || st.Cluster != "a" || st.Release != 1 {
		t.Fatalf("the controller manager's status of an app the git receiver deployed: %+v %v", st, err)
	}
	waitFor(t, "the edge to route to cluster a", func() bool {
		body, err := get(edge, tenant, "web", "/")
		return err == nil && strings.TrimSpace(body) == "v1"
	})

	stop := make(chan struct{})
	sent, failed, firstErr, done := load(edge, "web", stop)
	time.Sleep(200 * time.Millisecond)
	lag.hideB.Store(true)
	moved := make(chan string, 1)
	go func() {
		var log strings.Builder
		if err := git.Deploy(t.Context(), webRelease(t, "web", "b", 1, nil), &log); err != nil {
			fmt.Fprintf(&log, "deploy failed: %v", err)
		}
		moved <- log.String()
	}()
	waitFor(t, "the move to be recorded", func() bool { return l.get(tenant, "web") == "b" })
	time.Sleep(150 * time.Millisecond)
	if c, _ := edge.Serving(tenant, "web"); c != "a" {
		t.Errorf("the edge routes to %q while its table of b lists no instance, want a", c)
	}
	lag.hideB.Store(false)
	waitFor(t, "the edge to route to b", func() bool {
		c, _ := edge.Serving(tenant, "web")
		return c == "b"
	})
	log := <-moved
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done
	t.Logf("%d requests through the edge during the move", sent.Load())
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests through the edge failed during the move, first: %v", n, sent.Load(), firstErr.Load())
	}
	if !strings.Contains(log, "Removed from cluster a") {
		t.Fatalf("the move did not remove the app from a:\n%s", log)
	}

	// The others knew the app on a: they find it on b.
	if st, err := web.Status(t.Context(), tenant, "web"); err != nil || st.Cluster != "b" {
		t.Fatalf("web's status after another process moved the app: %+v %v", st, err)
	}
	lines, err := web.Logs(t.Context(), tenant, "web", 10, false)
	if err != nil {
		t.Fatalf("web's logs after the move: %v", err)
	}
	for range lines {
	}
	if log := deploy(t, cm, webRelease(t, "web", "b", 1, nil)); strings.Contains(log, "Moving") {
		t.Fatalf("a deploy on the cluster that serves moved the app:\n%s", log)
	}
	if runs(t, clusters, "a", "web") || !runs(t, clusters, "b", "web") {
		t.Fatalf("runs on a %v, on b %v; want b only", runs(t, clusters, "a", "web"), runs(t, clusters, "b", "web"))
	}

	// Removed by one process, the app is gone for the others and the edge.
	if err := web.Remove(t.Context(), tenant, "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := cm.Status(t.Context(), tenant, "web"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("status of a removed app: %v, want not found", err)
	}
	waitFor(t, "the edge to forget the app", func() bool {
		_, ok := edge.Serving(tenant, "web")
		return !ok
	})
}

// lagging is the edge's view of a fleet whose table of cluster b lists
// nothing while hideB is set: an edge not yet connected to b.
type lagging struct {
	placed.Static
	hideB atomic.Bool
}

func (g *lagging) Apps(name string) placed.Apps {
	if name == "b" && g.hideB.Load() {
		return nil
	}
	return g.Static.Apps(name)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The store's Ledger tells Follow when it changed.
var _ placed.VersionedLedger = (*store.Store)(nil)

// versioned is the in-memory ledger as a VersionedLedger whose version is
// its content, counting the reads of every app.
type versioned struct {
	*ledger
	reads atomic.Int64
}

func (v *versioned) ServingClusters(ctx context.Context) (map[string]string, error) {
	v.reads.Add(1)
	return v.ledger.ServingClusters(ctx)
}

func (v *versioned) ServingClustersSince(ctx context.Context, since int64) (map[string]string, int64, error) {
	v.ledger.mu.Lock()
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(v.ledger.m)) {
		fmt.Fprintf(h, "%s=%s;", k, v.ledger.m[k])
	}
	v.ledger.mu.Unlock()
	version := int64(h.Sum64() >> 1)
	if version == since {
		return nil, since, nil
	}
	m, err := v.ServingClusters(ctx)
	return m, version, err
}

// TestFollowReadsAChangedLedgerOnly: the edge's Follow reads every app only
// when the Ledger changed, and still switches an app that moved.
func TestFollowReadsAChangedLedgerOnly(t *testing.T) {
	clusters, l := fleet(t), &versioned{ledger: &ledger{}}
	git := newDriverWith(t, placed.Options{Clusters: clusters, Ledger: l, Shared: true})
	edge := newDriverWith(t, placed.Options{Clusters: clusters, Ledger: l, Shared: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go edge.Follow(ctx, 20*time.Millisecond)

	deploy(t, git, webRelease(t, "web", "a", 1, nil))
	waitFor(t, "the edge to route to cluster a", func() bool {
		c, _ := edge.Serving(tenant, "web")
		return c == "a"
	})
	before := l.reads.Load()
	time.Sleep(400 * time.Millisecond) // about 20 rounds
	if n := l.reads.Load() - before; n > 0 {
		t.Fatalf("Follow read every app %d times in 400 ms with nothing changed, want 0", n)
	}
	deploy(t, git, webRelease(t, "web", "b", 1, nil))
	waitFor(t, "the edge to route to cluster b after the move", func() bool {
		c, _ := edge.Serving(tenant, "web")
		return c == "b"
	})
}

// readsInstances is a cluster's driver that reads all its instances at
// once (as the kube driver does).
type readsInstances struct{ runtime.Driver }

func (readsInstances) ReadInstances(context.Context) ([]runtime.AppInstance, error) {
	return nil, nil
}

// TestInstancesReaders: the runtime's metrics read the clusters whose
// driver reads its instances at once, by name, and leave out the process
// driver, which counts its own.
func TestInstancesReaders(t *testing.T) {
	a, b := newProcessDriver(t), newProcessDriver(t)
	d := newDriver(t, placed.Static{"a": {Driver: a, Apps: a}, "b": {Driver: readsInstances{b}, Apps: b}}, &ledger{})
	got := d.InstancesReaders()
	if _, ok := got["b"]; len(got) != 1 || !ok {
		t.Errorf("InstancesReaders: %v, want cluster b alone", got)
	}
}
