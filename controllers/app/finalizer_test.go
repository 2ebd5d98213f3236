package app_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/test/platformtest"
)

// removingReleases runs every App, healthy, and records the Apps removed
// from the runtime.
type removingReleases struct {
	countingReleases
	mu      sync.Mutex
	removed []string
}

func (r *removingReleases) Remove(_ context.Context, tenant, app string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, tenant+"/"+app)
	return nil
}

func (r *removingReleases) removedApps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.removed)
}

// appWrites records the controller's writes to Apps, as "METHOD path".
type appWrites struct {
	mu     sync.Mutex
	writes []string
}

func (w *appWrites) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/apps/") {
			w.mu.Lock()
			w.writes = append(w.writes, req.Method+" "+req.URL.Path)
			w.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// of returns the writes to the App name, its status's included.
func (w *appWrites) of(name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, s := range w.writes {
		if strings.HasSuffix(s, "/apps/"+name) || strings.Contains(s, "/apps/"+name+"/") {
			out = append(out, s)
		}
	}
	return out
}

// TestFinalizerSetAtCreation: an App created with the controller's
// finalizer, as the platform's API creates it, is made Ready with no
// write but its status patch; one created without (kubectl's) gets the
// finalizer from the controller, one update more. Deleting the first
// still stops it in the runtime before it goes.
func TestFinalizerSetAtCreation(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writes := &appWrites{}
	cfg := rest.CopyConfig(cp.RESTConfig())
	cfg.Wrap(writes.wrap)
	releases := &removingReleases{}
	startController(ctx, t, cfg, releases, nil)

	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-fin"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		finalizers []string
		// updates is whether the controller writes the App itself, not
		// only its status.
		updates bool
	}{
		{"by-api", []string{platformv1alpha1.AppFinalizer}, false},
		{"by-kubectl", nil, true},
	} {
		a := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-fin", Name: tc.name, Finalizers: tc.finalizers}}
		createReleased(ctx, t, c, a)
		got := waitReady(t, c, a, platformv1alpha1.AppHealthyReason, "")
		if !controllerutil.ContainsFinalizer(got, platformv1alpha1.AppFinalizer) {
			t.Errorf("App %s Ready with finalizers %v, want %s", tc.name, got.Finalizers, platformv1alpha1.AppFinalizer)
		}
		var updates, statuses int
		for _, w := range writes.of(tc.name) {
			if strings.HasSuffix(w, "/status") {
				statuses++
			} else {
				updates++
			}
		}
		if statuses == 0 || (updates > 0) != tc.updates {
			t.Errorf("App %s: the controller wrote %v until Ready; want a status patch, and writes of the App itself: %v", tc.name, writes.of(tc.name), tc.updates)
		}
	}

	a := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-fin", Name: "by-api"}}
	if err := c.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "the App made by the API gone", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(a), a); !apierrors.IsNotFound(err) {
			return fmt.Errorf("get: %v, finalizers %v", err, a.Finalizers)
		}
		return nil
	})
	if removed := releases.removedApps(); !slices.Equal(removed, []string{"tenant-fin/by-api"}) {
		t.Errorf("removed from the runtime: %v, want tenant-fin/by-api", removed)
	}
}
