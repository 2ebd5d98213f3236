package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/apiserver/local"
	"bex.co/bex/builder/gitserver"
	"bex.co/bex/builder/release"
	appctrl "bex.co/bex/controllers/app"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

// envAppJS answers FOO, API_KEY and its process id, and exits at start
// when CRASH is 1.
const envAppJS = `if (process.env.CRASH === "1") { console.error("crashing on purpose"); process.exit(3); }
require("http").createServer((req, res) => {
  res.end(JSON.stringify({foo: process.env.FOO || "", key: process.env.API_KEY || "", pid: process.pid}));
}).listen(process.env.PORT);
`

// envAnswer is what envAppJS answers.
type envAnswer struct {
	Foo string `json:"foo"`
	Key string `json:"key"`
	PID int    `json:"pid"`
}

// commitEnvApp commits envAppJS and returns its push.
func (e *env) commitEnvApp(t *testing.T) gitserver.Push {
	t.Helper()
	platformtest.WriteNodeApp(t, e.repo, "unused", "")
	if err := os.WriteFile(filepath.Join(e.repo, "server.js"), []byte(envAppJS), 0o644); err != nil {
		t.Fatal(err)
	}
	return e.pushWork(t, "env app")
}

// get asks the app, through an edge, what it runs with.
func (e *env) get() (envAnswer, error) {
	body, err := runtimetest.EdgeGet(e.rt, "apps.test", e.tenant, e.name, "/")
	if err != nil {
		return envAnswer{}, err
	}
	var a envAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		return envAnswer{}, fmt.Errorf("answer %q: %w", body, err)
	}
	return a, nil
}

// setEnv gives the App the environment env, as the API stores it: plain
// values in spec.env, and secret ones in the Secret <app>-env that
// spec.env references.
func (e *env) setEnv(t *testing.T, env map[string]string, secrets map[string]string) {
	t.Helper()
	ctx := t.Context()
	if len(secrets) > 0 {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.tenant, Name: e.name + "-env"}, StringData: secrets}
		if err := e.kube.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	app := e.app(t)
	app.Spec.Env = nil
	for name, v := range env {
		app.Spec.Env = append(app.Spec.Env, platformv1alpha1.EnvVar{Name: name, Value: ptr.To(v)})
	}
	for name := range secrets {
		app.Spec.Env = append(app.Spec.Env, platformv1alpha1.EnvVar{Name: name, SecretKeyRef: &platformv1alpha1.SecretKeySelector{Name: e.name + "-env", Key: name}})
	}
	if err := e.kube.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
}

// TestConfigReleaseAndRestart, on a real build, store and process
// runtime: a config release rolls the current image out as a new release
// with the App's new environment (a secret's value read from its Secret,
// never stored), which the app then serves; a restart gives the app new
// processes while every request is answered, and records no release; a
// process the release does not have is refused, changing nothing; a
// config release whose instances crash leaves the previous one serving
// and records nothing; a rollback gives the App the variables of the
// release it goes back to, which the next release then keeps.
func TestConfigReleaseAndRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	e := newEnv(t)
	tenantID := mustTenantID(t, e.st, e.tenant)

	if n, err := e.a.ReleaseConfig(ctx, e.tenant, e.name, "Set FOO", "user:test"); err != nil || n != 0 {
		t.Fatalf("a config release of an app without a release: v%d, %v; want nothing", n, err)
	}
	if v1 := e.deploy(t, e.a, e.commitEnvApp(t)); v1 != 1 {
		t.Fatalf("first deploy made v%d", v1)
	}
	first, err := e.get()
	if err != nil || first.Foo != "" {
		t.Fatalf("v1 answers %+v, %v; want no FOO", first, err)
	}

	const secret = "s3cret-value"
	e.setEnv(t, map[string]string{"FOO": "1"}, map[string]string{"API_KEY": secret})
	n, err := e.b.ReleaseConfig(ctx, e.tenant, e.name, "Set API_KEY, FOO", "user:test")
	if err != nil || n != 2 {
		t.Fatalf("config release: v%d, %v; want v2", n, err)
	}
	second, err := e.get()
	if err != nil || second.Foo != "1" || second.Key != secret || second.PID == first.PID {
		t.Fatalf("after the config release the app answers %+v, %v; want FOO 1, the secret, a new process (v1's was %d)", second, err, first.PID)
	}
	rel, err := e.st.GetRelease(ctx, tenantID, e.name, 2)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := e.st.GetRelease(ctx, tenantID, e.name, 1)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := json.Marshal(rel)
	if v1.Kind != store.ReleaseKindDeploy || rel.Kind != store.ReleaseKindConfig || rel.RollbackTo != 0 {
		t.Errorf("v1 of kind %q, v2 of kind %q (to v%d); want a deploy then a config release", v1.Kind, rel.Kind, rel.RollbackTo)
	}
	if rel.Description != "Set API_KEY, FOO" || rel.Image != v1.Image || rel.CreatedBy != "user:test" || strings.Contains(string(stored), secret) ||
		rel.Config["API_KEY"].SecretKeyRef == nil || rel.Config["FOO"].Value == nil || *rel.Config["FOO"].Value != "1" {
		t.Errorf("release v2 = %s; want v1's image, FOO by value, API_KEY by reference only", stored)
	}
	if got := e.app(t).Status.CurrentRelease; got != 2 || e.serving(t) != 2 {
		t.Errorf("current release v%d, the runtime serves v%d; want v2", got, e.serving(t))
	}

	// A restart: new processes, no request lost, no release.
	stop := e.keepAsking()
	number, procs, err := e.a.Restart(ctx, e.tenant, e.name, "")
	served, failures := stop()
	if err != nil || number != 2 || len(procs) != 1 || procs[0] != runtime.WebProcess {
		t.Fatalf("restart: v%d %v, %v; want v2 [web]", number, procs, err)
	}
	if len(failures) > 0 || served == 0 {
		t.Errorf("during the restart %d requests were answered and %d failed: %q", served, len(failures), failures)
	}
	third, err := e.get()
	if err != nil || third.PID == second.PID || third.Foo != "1" || third.Key != secret {
		t.Fatalf("after the restart the app answers %+v, %v; want a new process (was %d) with the same env", third, err, second.PID)
	}
	if latest, err := e.st.LatestRelease(ctx, tenantID, e.name); err != nil || latest.Number != 2 {
		t.Errorf("after the restart the latest release is v%d, %v; want v2 still", latest.Number, err)
	}

	// A process the release does not have: refused, nothing restarted.
	if _, _, err := e.b.Restart(ctx, e.tenant, e.name, "worker"); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), `process "worker": release v2 of web has web`) {
		t.Errorf("restarting a process the release lacks: %v", err)
	}
	if now, err := e.get(); err != nil || now.PID != third.PID {
		t.Errorf("a refused restart changed the app: %+v, %v (was %d)", now, err, third.PID)
	}

	// A config release whose instances crash: v2 keeps serving, v3 is
	// recorded failed with the reason; the App keeps the new env.
	e.setEnv(t, map[string]string{"FOO": "1", "CRASH": "1"}, nil)
	n, err = e.a.ReleaseConfig(ctx, e.tenant, e.name, "Set CRASH", "user:test")
	var nd *runtime.NotDeployedError
	if !errors.As(err, &nd) || n != 0 || !strings.Contains(err.Error(), "release v3 did not go out, v2 keeps serving") {
		t.Fatalf("a config release that crashes: v%d, %v; want a NotDeployedError saying v2 keeps serving", n, err)
	}
	t.Logf("the failed config release says: %v", err)
	if now, err := e.get(); err != nil || now.PID != third.PID {
		t.Errorf("after the failed config release the app answers %+v, %v; want v2's process %d", now, err, third.PID)
	}
	if latest, err := e.st.LatestRelease(ctx, tenantID, e.name); err != nil || latest.Number != 2 || e.app(t).Status.CurrentRelease != 2 {
		t.Errorf("after the failed config release: latest v%d (%v), current v%d; want v2", latest.Number, err, e.app(t).Status.CurrentRelease)
	}
	v3, err := e.st.GetRelease(ctx, tenantID, e.name, 3)
	if err != nil || v3.Status != store.ReleaseFailed || v3.Kind != store.ReleaseKindConfig || v3.Description != "Set CRASH" ||
		v3.Failure == "" || !strings.Contains(nd.Error(), v3.Failure) || v3.Config["CRASH"].Value == nil {
		t.Errorf("the failed config release v3 = %+v, %v; want it failed with the rollout's reason", v3, err)
	}
	if strings.Contains(v3.Failure, "s3cret") {
		t.Errorf("the failed release's reason shows a secret's value: %q", v3.Failure)
	}
	if _, err := e.a.Rollback(ctx, e.tenant, e.name, 3, "user:test"); err == nil || !strings.Contains(err.Error(), "v3 failed (") ||
		!strings.Contains(err.Error(), "e.g. v2") {
		t.Errorf("a rollback to failed v3: %v, want it refused naming v2", err)
	}
	// Its number is taken: the next config release is v4.
	e.setEnv(t, map[string]string{"FOO": "1"}, nil)
	if n, err := e.a.ReleaseConfig(ctx, e.tenant, e.name, "Unset CRASH", "user:test"); err != nil || n != 4 {
		t.Errorf("the config release after failed v3: v%d, %v; want v4", n, err)
	}

	// A rollback gives the App the variables of the release it goes back
	// to, as a Heroku rollback restores config vars: back to v1, none;
	// the next config release keeps none rather than bringing FOO back.
	if n, err := e.a.Rollback(ctx, e.tenant, e.name, 1, "user:test"); err != nil || n != 5 {
		t.Fatalf("rolling back to v1: v%d, %v; want v5", n, err)
	}
	if env := e.app(t).Spec.Env; len(env) != 0 {
		t.Errorf("after the rollback to v1 the App's env is %+v, want v1's: none", env)
	}
	if n, err := e.a.ReleaseConfig(ctx, e.tenant, e.name, "Release the env again", "user:test"); err != nil || n != 6 {
		t.Fatalf("a config release after the rollback to v1: v%d, %v; want v6", n, err)
	}
	if now, err := e.get(); err != nil || now.Foo != "" || now.Key != "" {
		t.Errorf("a config release after the rollback to v1 answers %+v, %v; want no FOO and no API_KEY, as v1", now, err)
	}
	// Back to v2: FOO by value and API_KEY by its reference, whose Secret
	// still holds the value.
	if n, err := e.a.Rollback(ctx, e.tenant, e.name, 2, "user:test"); err != nil || n != 7 {
		t.Fatalf("rolling back to v2: v%d, %v; want v7", n, err)
	}
	env := e.app(t).Spec.Env
	if len(env) != 2 || env[0].Name != "API_KEY" || env[0].SecretKeyRef == nil || env[0].SecretKeyRef.Key != "API_KEY" ||
		env[1].Name != "FOO" || env[1].Value == nil || *env[1].Value != "1" {
		t.Errorf("after the rollback to v2 the App's env is %+v, want API_KEY by reference and FOO=1", env)
	}
	if n, err := e.a.ReleaseConfig(ctx, e.tenant, e.name, "Release the env again", "user:test"); err != nil || n != 8 {
		t.Fatalf("a config release after the rollback to v2: v%d, %v; want v8", n, err)
	}
	if now, err := e.get(); err != nil || now.Foo != "1" || now.Key != secret {
		t.Errorf("a config release after the rollback to v2 answers %+v, %v; want FOO 1 and the secret, as v2", now, err)
	}
}

// keepAsking asks the app through the edge until the returned stop is
// called, which says how many requests were answered and how the others
// failed.
func (e *env) keepAsking() (stop func() (served int, failures []string)) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var failures []string
	served := 0
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := e.get(); err != nil {
				failures = append(failures, err.Error())
			} else {
				served++
			}
		}
	})
	return func() (int, []string) {
		close(done)
		wg.Wait()
		return served, failures
	}
}

// pids asks the app n times through the edge and each of its healthy
// web instances once, and returns the process ids that answered.
func (e *env) pids(t *testing.T, n int) map[int]bool {
	t.Helper()
	seen := map[int]bool{}
	for range n {
		a, err := e.get()
		if err != nil {
			t.Fatalf("asking the app: %v", err)
		}
		seen[a.PID] = true
	}
	for _, addr := range e.rt.Upstreams(e.tenant, e.name) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			t.Fatalf("asking instance %s: %v", addr, err)
		}
		var a envAnswer
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("instance %s: %v", addr, err)
		}
		seen[a.PID] = true
	}
	return seen
}

// replicas returns the App's spec.processes replicas by process.
func (e *env) replicas(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, p := range e.app(t).Spec.Processes {
		if p.Replicas != nil {
			out[p.Name] = int(*p.Replicas)
		}
	}
	return out
}

// TestScale, on a real build, store and process runtime: scaling web to
// 2 adds an instance and keeps the one that ran, so that two distinct
// processes answer; scaling back to 1 stops one of them and starts none;
// every request is answered throughout; no release is recorded; the App
// keeps the count, which a restart then runs; a process the release does
// not have is refused, changing nothing.
func TestScale(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	e := newEnv(t)
	tenantID := mustTenantID(t, e.st, e.tenant)

	if n, procs, err := e.a.Scale(ctx, e.tenant, e.name, map[string]int{"web": 2}, ""); err != nil || n != 0 || procs["web"] != 2 {
		t.Fatalf("scaling an app without a release: v%d %v, %v; want the count stored only", n, procs, err)
	}
	if got := e.replicas(t); got["web"] != 2 {
		t.Fatalf("the App's spec says %v, want web 2", got)
	}
	if _, _, err := e.a.Scale(ctx, e.tenant, e.name, map[string]int{"web": 1}, ""); err != nil {
		t.Fatal(err)
	}
	if v1 := e.deploy(t, e.a, e.commitEnvApp(t)); v1 != 1 {
		t.Fatalf("first deploy made v%d", v1)
	}
	first := e.pids(t, 5)
	if len(first) != 1 {
		t.Fatalf("web=1 answers from %v", first)
	}

	stop := e.keepAsking()
	// e.a released v1: its unpacked directory is the one that runs (e.b
	// has a release directory of its own, as another machine would).
	n, procs, err := e.a.Scale(ctx, e.tenant, e.name, map[string]int{"web": 2}, "")
	if err != nil || n != 1 || procs["web"] != 2 {
		t.Fatalf("scale web=2: v%d %v, %v", n, procs, err)
	}
	two := e.pids(t, 20)
	for pid := range first {
		if len(two) != 2 || !two[pid] {
			t.Errorf("after web=2 the app answers from %v; want two processes, %v among them", two, first)
		}
	}
	if n, _, err := e.a.Scale(ctx, e.tenant, e.name, map[string]int{"web": 1}, ""); err != nil || n != 1 {
		t.Fatalf("scale web=1: v%d, %v", n, err)
	}
	served, failures := stop()
	if len(failures) > 0 || served == 0 {
		t.Errorf("while scaling %d requests were answered and %d failed: %q", served, len(failures), failures)
	}
	one := e.pids(t, 10)
	for pid := range one {
		if len(one) != 1 || !two[pid] {
			t.Errorf("after web=1 the app answers from %v; want one of %v", one, two)
		}
	}
	if got := len(e.rt.PIDs(e.tenant, e.name)); got != 1 {
		t.Errorf("after web=1 the runtime runs %d processes", got)
	}
	if latest, err := e.st.LatestRelease(ctx, tenantID, e.name); err != nil || latest.Number != 1 {
		t.Errorf("after scaling the latest release is v%d, %v; want v1 still", latest.Number, err)
	}

	// Refused: nothing changes, neither the spec nor what runs.
	if _, _, err := e.b.Scale(ctx, e.tenant, e.name, map[string]int{"web": 3, "clock": 1}, ""); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "process clock: release v1 of web has web") {
		t.Errorf("scaling a process the release lacks: %v", err)
	}
	if got := e.replicas(t); got["web"] != 1 || len(got) != 1 {
		t.Errorf("a refused scale changed the spec: %v", got)
	}
	if now := e.pids(t, 10); len(now) != 1 || !maps.Equal(now, one) {
		t.Errorf("a refused scale changed what runs: %v, was %v", now, one)
	}

	// The App keeps the count: a restart runs it.
	if _, _, err := e.a.Scale(ctx, e.tenant, e.name, map[string]int{"web": 2}, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.a.Restart(ctx, e.tenant, e.name, ""); err != nil {
		t.Fatal(err)
	}
	if got := len(e.rt.PIDs(e.tenant, e.name)); got != 2 {
		t.Errorf("after a restart of web=2 the runtime runs %d processes", got)
	}
}

// TestScaleNeedsRoom scales an app on a real build, store and process
// runtime whose Releaser asks a real scheduler (bex-apiserver, one static
// cluster of 1 cpu and 2Gi) for room: a scale or a plan the fleet cannot
// hold is refused, names the size and the cluster's shortage, and changes
// neither the spec nor what runs; one within the room, and a scale down,
// go out.
func TestScaleNeedsRoom(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	e := newEnv(t)
	srv, err := local.Start(ctx, local.Options{ControlPlane: e.cp, Dir: t.TempDir(), LocalClusters: []string{"small:cpu=1,memory=2Gi,pods=110"}})
	if err != nil {
		t.Fatalf("starting bex-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stopping bex-apiserver: %v", err)
		}
	})
	p := e.releaserWith(func(o *release.Options) { o.Fits = appctrl.SchedulerPlacer{Client: e.kube} })
	if v1 := e.deploy(t, p, e.commitEnvApp(t)); v1 != 1 {
		t.Fatalf("first deploy made v%d", v1)
	}
	// Four starter instances (250m, 512Mi each) fill small.
	if _, procs, err := p.Scale(ctx, e.tenant, e.name, map[string]int{"web": 4}, ""); err != nil || procs["web"] != 4 {
		t.Fatalf("scale web=4 within the room: %v, %v", procs, err)
	}
	four := e.pids(t, 30)

	refused := func(what string, err error, want string) {
		t.Helper()
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want a refusal saying %q", what, err, want)
		}
		if got := e.replicas(t); got["web"] != 4 || len(got) != 1 {
			t.Errorf("%s changed the spec: %v", what, got)
		}
		if plan := e.app(t).Spec.Plan; plan != platformv1alpha1.PlanStarter {
			t.Errorf("%s changed the plan to %s", what, plan)
		}
		if got := len(e.rt.PIDs(e.tenant, e.name)); got != 4 {
			t.Errorf("%s: the runtime runs %d processes, want the 4 it ran", what, got)
		}
	}
	_, _, err = p.Scale(ctx, e.tenant, e.name, map[string]int{"web": 5}, "")
	refused("scale web=5", err, "no cluster of the fleet can hold web at 5 × (cpu 250m, memory 512Mi)")
	_, _, err = p.Scale(ctx, e.tenant, e.name, nil, string(platformv1alpha1.PlanStandard))
	refused("scale to the standard plan", err, "at 4 × (cpu 1, memory 2Gi)")
	_, err = p.Update(ctx, e.tenant, e.name, func(a *platformv1alpha1.App) error {
		a.Spec.Processes = append(a.Spec.Processes, platformv1alpha1.Process{Name: "worker", Replicas: ptr.To[int32](1)})
		return nil
	})
	refused("apps set worker=1", err, "small")
	if now := e.pids(t, 30); !maps.Equal(now, four) {
		t.Errorf("refused scales changed what answers: %v, was %v", now, four)
	}

	if _, procs, err := p.Scale(ctx, e.tenant, e.name, map[string]int{"web": 1}, ""); err != nil || procs["web"] != 1 {
		t.Fatalf("scale web=1: %v, %v", procs, err)
	}
	if got := len(e.rt.PIDs(e.tenant, e.name)); got != 1 {
		t.Errorf("after web=1 the runtime runs %d processes", got)
	}
}

// TestInstancesQuota, on a real build, store and process runtime: the
// tenant's instances quota counts every app's instances; a scale past it
// is refused naming it and changes neither the spec nor what runs; one
// within it goes out; a push whose App asks for more instances than the
// quota leaves is refused with the previous release serving; a quota
// lowered below what runs takes nothing away (a restart of the same
// counts goes out).
func TestInstancesQuota(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	e := newEnv(t)
	tenantID := mustTenantID(t, e.st, e.tenant)
	setQuota := func(n int) {
		t.Helper()
		if err := e.st.SetTenantQuotas(ctx, tenantID, store.QuotaOverrides{Instances: &n}); err != nil {
			t.Fatal(err)
		}
	}
	setQuota(3)
	// Another app of the tenant runs one instance.
	if err := e.st.SetAppInstances(ctx, e.tenant, "shop", store.AppSize{Instances: 1, MilliCPU: 250, MemoryBytes: 512 << 20}); err != nil {
		t.Fatal(err)
	}
	if v1 := e.deploy(t, e.a, e.commitEnvApp(t)); v1 != 1 {
		t.Fatalf("first deploy made v%d", v1)
	}
	counted := func() int {
		t.Helper()
		n, err := e.st.TenantInstances(ctx, tenantID)
		if err != nil {
			t.Fatal(err)
		}
		return n.Instances
	}
	if got := counted(); got != 2 {
		t.Fatalf("after v1 with web=1 the tenant counts %d instances, want 2", got)
	}

	_, _, err := e.b.Scale(ctx, e.tenant, e.name, map[string]int{"web": 3}, "")
	var qe *store.QuotaError
	if !errors.As(err, &qe) || qe.Quota != "instances" || !strings.Contains(err.Error(), "web would run 3 instances and the tenant's other apps run 1") {
		t.Fatalf("scale web=3 with 1 of 3 used elsewhere: %v; want the instances quota named", err)
	}
	if got := e.replicas(t); len(got) != 0 {
		t.Errorf("a refused scale changed the spec: %v", got)
	}
	if got := len(e.rt.PIDs(e.tenant, e.name)); got != 1 {
		t.Errorf("after a refused scale the runtime runs %d processes, want 1", got)
	}
	if got := counted(); got != 2 {
		t.Errorf("after a refused scale the tenant counts %d, want 2", got)
	}
	if _, _, err := e.b.Scale(ctx, e.tenant, e.name, map[string]int{"web": 2}, ""); err != nil {
		t.Fatalf("scale web=2, 3 of 3: %v", err)
	}
	if got := len(e.rt.PIDs(e.tenant, e.name)); got != 2 || counted() != 3 {
		t.Errorf("after web=2 the runtime runs %d processes and the tenant counts %d; want 2 and 3", got, counted())
	}

	// The App asks for more than the quota leaves (a spec edited by
	// hand): the push builds and is not released.
	app := e.app(t)
	three := int32(3)
	app.Spec.Processes = []platformv1alpha1.Process{{Name: "web", Replicas: &three}}
	if err := e.kube.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.repo, "NOTE"), []byte("v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	_, err = e.a.Deploy(ctx, e.pushWork(t, "v2"), &out)
	if err == nil || !strings.Contains(err.Error(), "release v2 failed, the previous release keeps serving: the tenant's instances quota (3) is reached") {
		t.Fatalf("a push asking for web=3: %v; want the instances quota", err)
	}
	if !strings.Contains(out.String(), "instances quota (3) is reached") {
		t.Errorf("the push output does not say why:\n%s", out.String())
	}
	if got := e.serving(t); got != 1 {
		t.Errorf("after the refused push the runtime serves v%d, want v1", got)
	}
	if got := len(e.rt.PIDs(e.tenant, e.name)); got != 2 || counted() != 3 {
		t.Errorf("after the refused push the runtime runs %d processes and the tenant counts %d; want 2 and 3", got, counted())
	}
	two := int32(2)
	app = e.app(t)
	app.Spec.Processes[0].Replicas = &two
	if err := e.kube.Update(ctx, app); err != nil {
		t.Fatal(err)
	}

	// Lowered below what runs: nothing is taken away, the same counts
	// restart; fewer are counted once they run.
	setQuota(1)
	if _, _, err := e.a.Restart(ctx, e.tenant, e.name, ""); err != nil {
		t.Fatalf("a restart of web=2 under a quota lowered to 1: %v", err)
	}
	if _, _, err := e.a.Scale(ctx, e.tenant, e.name, map[string]int{"web": 1}, ""); err != nil {
		t.Fatal(err)
	}
	if got := counted(); got != 2 {
		t.Errorf("after web=1 the tenant counts %d, want 2", got)
	}

	// A bigger plan: the instances quota allows web=1 on pro, the cpu
	// quota of 2 CPUs with shop's 0.25 does not; standard fits.
	instances, cpu := 3, int64(2000)
	if err := e.st.SetTenantQuotas(ctx, tenantID, store.QuotaOverrides{Instances: &instances, MilliCPU: &cpu}); err != nil {
		t.Fatal(err)
	}
	pids := e.rt.PIDs(e.tenant, e.name)
	_, _, err = e.a.Scale(ctx, e.tenant, e.name, nil, "pro")
	if !errors.As(err, &qe) || qe.Quota != "cpu" || !strings.Contains(err.Error(),
		"the tenant's cpu quota (2 CPUs) is reached: web would request 2 CPUs for its 1 instance and the tenant's other apps request 0.25 CPUs; scale an app down or pick a smaller plan (bex scale --plan)") {
		t.Fatalf("scale web=1 to pro under 2 CPUs: %v; want the cpu quota named", err)
	}
	if plan := e.app(t).Spec.Plan; plan == "pro" {
		t.Errorf("a refused scale set the plan to %s", plan)
	}
	if got := e.rt.PIDs(e.tenant, e.name); !slices.Equal(got, pids) {
		t.Errorf("after a refused scale to pro the runtime runs %v, want %v unchanged", got, pids)
	}
	if _, _, err := e.a.Scale(ctx, e.tenant, e.name, nil, "standard"); err != nil {
		t.Fatalf("scale web=1 to standard, 1.25 of 2 CPUs: %v", err)
	}
	if got, err := e.st.TenantInstances(ctx, tenantID); err != nil || got != (store.AppSize{Instances: 2, MilliCPU: 1250, MemoryBytes: 2<<30 + 512<<20}) {
		t.Errorf("after web=1 on standard the tenant counts %+v, %v; want 2 instances, 1250m and 2.5 GiB", got, err)
	}
}
