package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/gitserver"
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
	platformtest.Git(t, e.repo, "add", ".")
	platformtest.Git(t, e.repo, "commit", "-q", "-m", "env app")
	platformtest.Git(t, e.repo, "push", "-q", e.bare, "main")
	return gitserver.Push{
		Tenant: e.tenant, App: e.name, Branch: "main", Actor: "user:test",
		New: platformtest.Git(t, e.repo, "rev-parse", "HEAD")[:40], RepoDir: e.bare,
	}
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
// and records nothing.
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
	if rel.Description != "Set API_KEY, FOO" || rel.Image != v1.Image || rel.CreatedBy != "user:test" || strings.Contains(string(stored), secret) ||
		rel.Config["API_KEY"].SecretKeyRef == nil || rel.Config["FOO"].Value == nil || *rel.Config["FOO"].Value != "1" {
		t.Errorf("release v2 = %s; want v1's image, FOO by value, API_KEY by reference only", stored)
	}
	if got := e.app(t).Status.CurrentRelease; got != 2 || e.serving(t) != 2 {
		t.Errorf("current release v%d, the runtime serves v%d; want v2", got, e.serving(t))
	}

	// A restart: new processes, no request lost, no release.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	served := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := e.get()
			mu.Lock()
			if err != nil {
				failures = append(failures, err.Error())
			} else {
				served++
			}
			mu.Unlock()
		}
	})
	number, procs, err := e.a.Restart(ctx, e.tenant, e.name, "")
	close(stop)
	wg.Wait()
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

	// A config release whose instances crash: v2 keeps serving, nothing
	// recorded; the App keeps the new env.
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
}
