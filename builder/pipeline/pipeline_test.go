package pipeline_test

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/build"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/builder/pipeline"
	"bex.co/bex/builder/release"
	"bex.co/bex/controllers"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/registry"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/internal/runtime/process"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is one tenant's app on a real apiserver and Postgres, with two
// pipelines over two stores of one database: two processes of a cluster
// install (the git receiver and the web API), sharing the runtime.
type env struct {
	cp           *controlplane.ControlPlane
	kube         client.Client
	a, b         *pipeline.Pipeline
	st           *store.Store
	rt           *process.Driver
	repo, bare   string
	tenant, name string
	// registry is the platform registry's host:port; while
	// refuseDeletes is set it answers every DELETE with 503.
	registry      string
	refuseDeletes *atomic.Bool
	// pipelineWith returns a pipeline on the first store, with its own
	// releases directory, handing releases to rt.
	pipelineWith func(rt runtime.Driver, binDir string) *pipeline.Pipeline
	// retaining returns a pipeline on the first store and rt that keeps
	// keep releases of an app, and its releases directory.
	retaining func(keep int) (*pipeline.Pipeline, string)
	// releaserWith returns a pipeline on the first store and rt whose
	// Releaser's options mod changed.
	releaserWith func(mod func(*release.Options)) *pipeline.Pipeline
	// metered returns a pipeline on the first store and rt whose
	// Releaser and pipeline register their metrics with reg.
	metered func(reg prometheus.Registerer) *pipeline.Pipeline
}

// newEnv sets the environment up; mod changes the builder's options.
// registryToken opens the test registry.
const registryToken = "pipeline-test-token"

func newEnv(t *testing.T, mod ...func(*build.Options)) *env {
	t.Helper()
	ctx := t.Context()
	cp := cptest.Start(t)
	kube, err := client.New(cp.RESTConfig(), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.NewDatabase(t)
	open := func() *store.Store {
		st, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	stA, stB := open(), open()

	e := &env{cp: cp, kube: kube, st: stA, tenant: "acme", name: "web"}
	if _, err := stA.CreateTenant(ctx, e.tenant); err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.tenant}}); err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: e.tenant, Name: e.name}}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	reg, err := registry.New(filepath.Join(dir, "registry"), registryToken)
	if err != nil {
		t.Fatal(err)
	}
	e.refuseDeletes = new(atomic.Bool)
	regHandler := reg.Handler()
	regSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete && e.refuseDeletes.Load() {
			http.Error(w, "the registry is unavailable", http.StatusServiceUnavailable)
			return
		}
		regHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(regSrv.Close)
	e.registry = regSrv.Listener.Addr().String()
	opts := build.Options{
		WorkRoot: filepath.Join(dir, "builds"), Registry: e.registry,
		RegistryAuth: registry.Auth(registryToken), Log: testr.New(t),
	}
	for _, f := range mod {
		f(&opts)
	}
	builder, err := build.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.rt = process.New(process.Options{LogDir: filepath.Join(dir, "logs")})
	t.Cleanup(func() { _ = e.rt.Close() })
	newPipeline := func(st *store.Store, releases string, rt runtime.Driver, binDir string, mods ...func(*release.Options)) *pipeline.Pipeline {
		var reg prometheus.Registerer
		_, follow := rt.(*placed.Driver)
		opts := release.Options{
			Store: st, Kube: kube, Runtime: rt, Keychain: builder.Keychain(), BinDir: binDir,
			ReleasesDir: filepath.Join(dir, releases), FollowPlacement: follow,
			URL: func(tenant, app string) string { return "https://" + app + "-" + tenant + ".example.test" },
			Log: testr.New(t),
		}
		for _, mod := range mods {
			mod(&opts)
		}
		reg = opts.Metrics
		rel, err := release.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := pipeline.New(pipeline.Options{Releaser: rel, Builder: builder, Metrics: reg, Log: testr.New(t)})
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	e.a, e.b = newPipeline(stA, "releases-a", e.rt, ""), newPipeline(stB, "releases-b", e.rt, "")
	more := 0
	e.pipelineWith = func(rt runtime.Driver, binDir string) *pipeline.Pipeline {
		more++
		return newPipeline(stA, "releases-"+strconv.Itoa(more), rt, binDir)
	}
	e.retaining = func(keep int) (*pipeline.Pipeline, string) {
		more++
		releases := "releases-" + strconv.Itoa(more)
		return newPipeline(stA, releases, e.rt, "", func(o *release.Options) { o.ReleaseRetention = keep }), filepath.Join(dir, releases)
	}
	e.releaserWith = func(mod func(*release.Options)) *pipeline.Pipeline {
		more++
		return newPipeline(stA, "releases-"+strconv.Itoa(more), e.rt, "", mod)
	}

	e.metered = func(reg prometheus.Registerer) *pipeline.Pipeline {
		more++
		return newPipeline(stA, "releases-"+strconv.Itoa(more), e.rt, "", func(o *release.Options) { o.Metrics = reg })
	}

	e.repo, e.bare = filepath.Join(dir, "work"), filepath.Join(dir, "web.git")
	if err := os.MkdirAll(e.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	platformtest.Git(t, dir, "init", "-q", "--bare", e.bare)
	platformtest.Git(t, e.repo, "init", "-q", "-b", "main")
	return e
}

// commit writes version body of the app (with buildJS as its build step),
// commits it into the bare repository and returns the push of it.
func (e *env) commit(t *testing.T, body, buildJS string) gitserver.Push {
	t.Helper()
	platformtest.WriteNodeApp(t, e.repo, body, buildJS)
	return e.pushWork(t, body)
}

// pushWork commits the work tree as it is with message, pushes it into
// the bare repository and returns the push of it.
func (e *env) pushWork(t *testing.T, message string) gitserver.Push {
	t.Helper()
	platformtest.Git(t, e.repo, "add", ".")
	platformtest.Git(t, e.repo, "commit", "-q", "-m", message)
	platformtest.Git(t, e.repo, "push", "-q", e.bare, "main")
	return gitserver.Push{
		Tenant: e.tenant, App: e.name, Branch: "main", Actor: "user:test",
		New: platformtest.Git(t, e.repo, "rev-parse", "HEAD")[:40], RepoDir: e.bare,
	}
}

func (e *env) deploy(t *testing.T, pl *pipeline.Pipeline, push gitserver.Push) int {
	t.Helper()
	res, err := pl.Deploy(t.Context(), push, testWriter{t})
	if err != nil {
		t.Fatalf("deploying %s: %v", push.New[:7], err)
	}
	return res.Release
}

func (e *env) app(t *testing.T) *platformv1alpha1.App {
	t.Helper()
	app := &platformv1alpha1.App{}
	if err := e.kube.Get(t.Context(), client.ObjectKey{Namespace: e.tenant, Name: e.name}, app); err != nil {
		t.Fatal(err)
	}
	return app
}

// serving is the release the runtime runs for the app.
func (e *env) serving(t *testing.T) int {
	t.Helper()
	st, err := e.rt.Status(t.Context(), e.tenant, e.name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Release
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func TestPipelineAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	e := newEnv(t)
	if got := e.deploy(t, e.a, e.commit(t, "v1", "")); got != 1 {
		t.Fatalf("first deploy made release v%d, want v1", got)
	}

	// The build record keeps each step's time, and the push output ends
	// with them.
	t.Run("timings", func(t *testing.T) {
		bs, err := e.st.ListBuilds(ctx, mustTenantID(t, e.st, e.tenant), e.name, 10)
		if err != nil || len(bs) != 1 {
			t.Fatalf("builds %v, %v; want one", bs, err)
		}
		got := map[string]float64{}
		for _, st := range bs[0].Timings {
			got[st.Name] = st.Seconds
		}
		for _, step := range []string{"prepare", "checkout", "app build", "image", "registry push", "unpack", "start", "health check", "switch"} {
			if s, ok := got[step]; !ok || s < 0 {
				t.Errorf("the build record has no time for %q: %+v", step, bs[0].Timings)
			}
		}
		if got["app build"] <= 0 || got["start"] <= 0 {
			t.Errorf("app build %.3fs, start %.3fs: want both above zero", got["app build"], got["start"])
		}
		lines, err := e.st.BuildLogs(ctx, bs[0].ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l.Line, "-----> Timings: prepare ")
		}
		if !found {
			t.Errorf("the build log has no timings line")
		}
	})

	// A rollback asked of the web API while the git receiver deploys the
	// same app waits for the deploy, then rolls back from what the deploy
	// left: the rollback is the newest release, and it is what serves.
	t.Run("rollback waits for a deploy in another process", func(t *testing.T) {
		gate := filepath.Join(t.TempDir(), "go")
		push := e.commit(t, "v2", platformtest.GoAheadBuildJS(gate, "v2"))
		deployed := make(chan int, 1)
		go func() {
			res, err := e.a.Deploy(ctx, push, testWriter{t})
			if err != nil {
				t.Errorf("deploying v2: %v", err)
			}
			deployed <- res.Release
		}()
		// The deploy holds the app's lock while its build waits; then the
		// rollback starts and must wait for the lock.
		platformtest.Eventually(t, 10*time.Minute, "the v2 build to start", func(ctx context.Context) error {
			bs, err := e.st.ListBuilds(ctx, mustTenantID(t, e.st, e.tenant), e.name, 10)
			if err != nil {
				return err
			}
			if len(bs) != 2 {
				return fmt.Errorf("%d builds, want 2", len(bs))
			}
			return nil
		})
		rolledBack := make(chan int, 1)
		go func() {
			n, err := e.b.Rollback(ctx, e.tenant, e.name, 1, "user:test")
			if err != nil {
				t.Errorf("rolling back to v1: %v", err)
			}
			rolledBack <- n
		}()
		platformtest.Eventually(t, time.Minute, "the rollback to wait for the app's lock", func(ctx context.Context) error {
			if n := pgtest.AdvisoryLockWaiters(ctx, t, e.st.Pool()); n != 1 {
				return fmt.Errorf("%d sessions wait for an advisory lock, want 1", n)
			}
			return nil
		})
		select {
		case n := <-rolledBack:
			t.Fatalf("the rollback made v%d while the deploy held the app", n)
		default:
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := <-deployed; got != 2 {
			t.Fatalf("the deploy made v%d, want v2", got)
		}
		if got := <-rolledBack; got != 3 {
			t.Fatalf("the rollback made v%d, want v3 (after the deploy's v2)", got)
		}
		if v3, err := e.st.GetRelease(ctx, mustTenantID(t, e.st, e.tenant), e.name, 3); err != nil || v3.Kind != store.ReleaseKindRollback || v3.RollbackTo != 1 {
			t.Errorf("v3 = kind %q to v%d, %v; want a rollback to v1", v3.Kind, v3.RollbackTo, err)
		}
		if got := e.app(t).Status.CurrentRelease; got != 3 {
			t.Errorf("App's current release v%d, want v3", got)
		}
		if got := e.serving(t); got != 3 {
			t.Errorf("the runtime serves v%d, want v3", got)
		}
	})

	// The App controller may hold an App read before a deploy made a newer
	// release current; EnsureRunning with it must not roll the app back.
	t.Run("EnsureRunning with a stale App", func(t *testing.T) {
		stale := e.app(t)
		now := e.deploy(t, e.a, e.commit(t, "v4", ""))
		if err := e.b.EnsureRunning(ctx, stale); err != nil {
			t.Fatalf("EnsureRunning: %v", err)
		}
		if got := e.serving(t); got != now {
			t.Errorf("after EnsureRunning with an App read at v%d the runtime serves v%d, want v%d", stale.Status.CurrentRelease, got, now)
		}
	})

	// After a restart nothing runs: EnsureRunning brings back the current
	// release.
	t.Run("EnsureRunning after a restart", func(t *testing.T) {
		if err := e.rt.Remove(ctx, e.tenant, e.name); err != nil {
			t.Fatal(err)
		}
		app := e.app(t)
		if err := e.b.EnsureRunning(ctx, app); err != nil {
			t.Fatalf("EnsureRunning: %v", err)
		}
		if got := e.serving(t); got != int(app.Status.CurrentRelease) {
			t.Errorf("the runtime serves v%d, want v%d", got, app.Status.CurrentRelease)
		}
	})
}

func mustTenantID(t *testing.T, st *store.Store, name string) string {
	t.Helper()
	tenant, err := st.GetTenantByName(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return tenant.ID
}

// place sets the App's placement as the App controller does: on cluster,
// or (cluster "") nowhere, with the scheduler's message.
func (e *env) place(t *testing.T, cluster, message string) {
	t.Helper()
	if err := platformtest.PlaceApp(t.Context(), e.kube, e.tenant, e.name, cluster, cluster != "", message); err != nil {
		t.Fatal(err)
	}
}

// TestPipelineFollowsPlacement: with a runtime that follows the placement,
// a release goes out on the cluster the App is placed on; an App placed
// elsewhere is moved there by EnsureRunning; and an App that fits no
// cluster gets the scheduler's explanation at its push, while the release
// before keeps serving.
func TestPipelineFollowsPlacement(t *testing.T) {
	e := newEnv(t)
	b := process.New(process.Options{LogDir: t.TempDir()})
	t.Cleanup(func() { _ = b.Close() })
	clusters := placed.Static{"a": {Driver: e.rt, Apps: e.rt}, "b": {Driver: b, Apps: b}}
	pd, err := placed.New(t.Context(), placed.Options{Clusters: clusters, Ledger: e.st, DrainDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pl := e.pipelineWith(pd, "")

	e.place(t, "a", "placed on a/default")
	e.deploy(t, pl, e.commit(t, "v1", ""))
	if st, err := pd.Status(t.Context(), e.tenant, e.name); err != nil || st.Cluster != "a" || st.Release != 1 {
		t.Fatalf("after the first push: %+v %v, want v1 on a", st, err)
	}
	// The wait for the placement is a step of its own, before the unpack.
	bs, err := e.st.ListBuilds(t.Context(), mustTenantID(t, e.st, e.tenant), e.name, 10)
	if err != nil || len(bs) != 1 {
		t.Fatalf("builds %v, %v; want one", bs, err)
	}
	var steps []string
	for _, st := range bs[0].Timings {
		steps = append(steps, st.Name)
	}
	if i, j := slices.Index(steps, "placement"), slices.Index(steps, "unpack"); i < 0 || j < i {
		t.Errorf("steps %v, want placement, then unpack", steps)
	}

	e.place(t, "b", "moved from a/default to b/default: a is cordoned")
	if err := pl.EnsureRunning(t.Context(), e.app(t)); err != nil {
		t.Fatalf("EnsureRunning after the App was placed on b: %v", err)
	}
	if st, err := pd.Status(t.Context(), e.tenant, e.name); err != nil || st.Cluster != "b" || st.Release != 1 {
		t.Fatalf("after the move: %+v %v, want v1 on b", st, err)
	}
	if _, err := e.rt.Status(t.Context(), e.tenant, e.name); err == nil {
		t.Fatal("after the move the app still runs on a")
	}
	serving, err := e.st.ServingClusters(t.Context())
	if err != nil || serving[e.tenant+"/"+e.name] != "b" {
		t.Fatalf("the store says %v serve (%v), want b", serving, err)
	}

	const why = "no cluster fits: a: Cordoned (annotation scheduling.bex.co/cordoned=true); b: InsufficientMemory (needs 512Mi, 128Mi free)"
	e.place(t, "", why)
	_, err = pl.Deploy(t.Context(), e.commit(t, "v2", ""), testWriter{t})
	if err == nil || !strings.Contains(err.Error(), "fits no cluster of the fleet: "+why) {
		t.Fatalf("a push of an App that fits no cluster: %v, want the scheduler's explanation", err)
	}
	if st, err := pd.Status(t.Context(), e.tenant, e.name); err != nil || st.Cluster != "b" || st.Release != 1 {
		t.Fatalf("after the refused push: %+v %v, want v1 still on b", st, err)
	}
	if got := e.app(t).Status.CurrentRelease; got != 1 {
		t.Fatalf("after the refused push the current release is v%d, want v1", got)
	}
}
