package app_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/test/platformtest"
)

// watchingReleases runs every App, with a health the test sets, and tells
// of changes only when the test says so (changed), as a runtime that
// watches its apps (app.HealthWatcher) does.
type watchingReleases struct {
	reconciles atomic.Int64

	mu      sync.Mutex
	health  map[string]string // app → message of a failing app
	changed []func(tenant, app string)
}

var _ app.HealthWatcher = (*watchingReleases)(nil)

func (*watchingReleases) EnsureRunning(context.Context, *platformv1alpha1.App) error { return nil }
func (r *watchingReleases) Health(_ context.Context, _, name string) (bool, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg, ok := r.health[name]; ok {
		return false, msg, nil
	}
	return true, "1 web instance running", nil
}
func (*watchingReleases) Remove(context.Context, string, string) error { return nil }
func (r *watchingReleases) LastBuild(context.Context, string, string) (app.LastBuild, error) {
	r.reconciles.Add(1)
	return app.LastBuild{Number: 1}, nil
}

func (r *watchingReleases) WatchHealth(_ context.Context, changed func(tenant, app string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed = append(r.changed, changed)
}
func (*watchingReleases) WatchesHealth(string, string) bool { return true }

// set makes name fail with msg ("" heals it) and, with tell, tells the
// watchers.
func (r *watchingReleases) set(tenant, name, msg string, tell bool) {
	r.mu.Lock()
	if msg == "" {
		delete(r.health, name)
	} else {
		r.health[name] = msg
	}
	fns := r.changed
	r.mu.Unlock()
	if tell {
		for _, f := range fns {
			f(tenant, name)
		}
	}
}

// TestWatchedAppsWaitForTheirRuntime: Apps whose runtime tells of their
// changes are not polled while they serve (a resync every 15 s of every
// App was 657 reconciles a second with 10,000 Apps doing nothing); a
// change the runtime tells of shows at once, and an App that does not
// serve is still looked at every resync, since its status changes with
// time alone.
func TestWatchedAppsWaitForTheirRuntime(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	releases := &watchingReleases{health: map[string]string{}}
	startController(ctx, t, cp.RESTConfig(), releases, nil)

	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	const tenant = "tenant-watched"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil {
		t.Fatal(err)
	}
	var apps []*platformv1alpha1.App
	for _, name := range []string{"a", "b", "c", "d"} {
		a := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name}}
		createReleased(ctx, t, c, a)
		apps = append(apps, a)
	}
	for _, a := range apps {
		waitReady(t, c, a, platformv1alpha1.AppHealthyReason, "")
	}

	// A change nobody told of is not seen: nothing polls the serving
	// Apps. With a resync every 15 s, four Apps come back at least four
	// times in 20 s and find it. The count starts once the reconciles of
	// the Apps' own last status writes are done (on a loaded machine one
	// may come after the last App read Ready).
	n := settled(t, &releases.reconciles, 2*time.Second, 30*time.Second)
	releases.set(tenant, "a", "web.0 crashed 2 times", false)
	time.Sleep(20 * time.Second)
	if got := releases.reconciles.Load() - n; got != 0 {
		t.Errorf("serving Apps whose runtime watches them were reconciled %d times in 20 s with nothing told", got)
	}
	if got := readyReason(t, c, apps[0]); got != platformv1alpha1.AppHealthyReason {
		t.Fatalf("app a became %s though nobody told of its change", got)
	}

	// Told, it shows at once (its next resync is minutes away).
	releases.set(tenant, "a", "web.0 crashed 2 times", true)
	waitReadyWithin(t, c, apps[0], platformv1alpha1.AppUnhealthyReason, "crashed 2 times", time.Minute)

	// An App that does not serve is polled: its health comes back
	// without being told.
	releases.set(tenant, "a", "", false)
	waitReadyWithin(t, c, apps[0], platformv1alpha1.AppHealthyReason, "", time.Minute)
}

// settled waits until count has not changed for quiet, at most within,
// and returns it.
func settled(t *testing.T, count *atomic.Int64, quiet, within time.Duration) int64 {
	t.Helper()
	n, since, deadline := count.Load(), time.Now(), time.Now().Add(within)
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("reconciles did not stop for %s within %s: %d so far", quiet, within, n)
		}
		time.Sleep(100 * time.Millisecond)
		if m := count.Load(); m != n {
			n, since = m, time.Now()
		}
	}
	return n
}

// readyReason is the reason of the App's Ready condition now.
func readyReason(t *testing.T, c client.Client, a *platformv1alpha1.App) string {
	t.Helper()
	var got platformv1alpha1.App
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(a), &got); err != nil {
		t.Fatal(err)
	}
	for _, cond := range got.Status.Conditions {
		if cond.Type == platformv1alpha1.AppReadyCondition {
			return cond.Reason
		}
	}
	return ""
}

// waitReadyWithin is waitReady with a shorter wait than the watched
// Apps' resync, so that only an event or a resync for a failing App
// brings the change.
func waitReadyWithin(t *testing.T, c client.Client, a *platformv1alpha1.App, reason, substr string, within time.Duration) {
	t.Helper()
	platformtest.Eventually(t, within, "Ready with reason "+reason, func(ctx context.Context) error {
		if got := readyReason(t, c, a); got != reason {
			return errors.New("Ready's reason is " + got)
		}
		return nil
	})
	waitReady(t, c, a, reason, substr)
}
