package app_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/test/platformtest"
)

// TestAppConditionsFollowSecrets runs the App controller against a real
// apiserver: an App whose env refers to a missing Secret is not Ready with
// the field named, nor while the Secret lacks the key; once the key is
// there (a change of the Secret's data only) it waits for a push instead.
// The manager lists and watches no Secret but their metadata: it holds no
// Secret's data.
func TestAppConditionsFollowSecrets(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cfg := rest.CopyConfig(cp.RESTConfig())
	var secretLists platformtest.SecretLists
	cfg.Wrap(secretLists.Wrap)
	startController(ctx, t, cfg, nil, nil)

	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	a := &platformv1alpha1.App{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web"},
		Spec: platformv1alpha1.AppSpec{Env: []platformv1alpha1.EnvVar{
			{Name: "DATABASE_URL", SecretKeyRef: &platformv1alpha1.SecretKeySelector{Name: "db", Key: "url"}},
		}},
	}
	if err := c.Create(ctx, a); err != nil {
		t.Fatal(err)
	}

	waitReady(t, c, a, platformv1alpha1.AppInvalidSpecReason, `spec.env[0].secretKeyRef: Secret "db" not found`)

	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "db"},
		Data:       map[string][]byte{"user": []byte("web")},
	}
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, a, platformv1alpha1.AppInvalidSpecReason, `spec.env[0].secretKeyRef: Secret "db" has no key "url"`)

	sec.Data["url"] = []byte("postgres://")
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, c, a, platformv1alpha1.AppAwaitingPushReason, "git push")
	if got.Status.ObservedGeneration != got.Generation {
		t.Fatalf("observedGeneration = %d, generation = %d", got.Status.ObservedGeneration, got.Generation)
	}
	if reqs := secretLists.Requests(); len(reqs) > 0 {
		t.Fatalf("the manager listed or watched Secrets with their data (a full Secret cache): %s", strings.Join(reqs, "; "))
	}
}

// startController runs the App controller, with releases and placer (nil:
// none), until ctx ends.
func startController(ctx context.Context, t *testing.T, cfg *rest.Config, releases app.Releases, placer app.Placer) {
	t.Helper()
	startReconciler(ctx, t, cfg, &app.Reconciler{Releases: releases, Placer: placer})
}

// startReconciler runs r, with the manager's client and an event
// recorder, until ctx ends.
func startReconciler(ctx context.Context, t *testing.T, cfg *rest.Config, r *app.Reconciler) {
	t.Helper()
	skipNameValidation := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 controllers.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Each test of this package runs a controller of its own.
		Controller: config.Controller{SkipNameValidation: &skipNameValidation},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Client, r.Reader, r.Events = mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder(app.ControllerName)
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
}

// waitReady polls until the App's Ready condition has reason and its message
// contains substr.
func waitReady(t *testing.T, c client.Client, a *platformv1alpha1.App, reason, substr string) *platformv1alpha1.App {
	t.Helper()
	got := &platformv1alpha1.App{}
	platformtest.Eventually(t, 2*time.Minute, fmt.Sprintf("Ready with reason %s and %q", reason, substr), func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil {
			t.Fatal(err)
		}
		if err := platformtest.HasCondition(got.Status.Conditions, platformv1alpha1.AppReadyCondition, "", reason); err != nil {
			return err
		}
		if ready := meta.FindStatusCondition(got.Status.Conditions, platformv1alpha1.AppReadyCondition); !strings.Contains(ready.Message, substr) {
			return fmt.Errorf("Ready says %q", ready.Message)
		}
		return nil
	})
	return got
}

// createReleased creates a and writes its status.currentRelease 1, as the
// release pipeline leaves an App after its first deploy.
func createReleased(ctx context.Context, t *testing.T, c client.Client, a *platformv1alpha1.App) {
	t.Helper()
	if err := c.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	base := a.DeepCopy()
	a.Status.CurrentRelease = 1
	if err := c.Status().Patch(ctx, a, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// driverReleases is a Releases over the real kube driver, with nothing
// released: what the App controller prepares comes from the driver.
type driverReleases struct{ *kube.Driver }

func (driverReleases) EnsureRunning(context.Context, *platformv1alpha1.App) error { return nil }
func (driverReleases) Health(context.Context, string, string) (bool, string, error) {
	return false, "", nil
}
func (driverReleases) LastBuild(context.Context, string, string) (app.LastBuild, error) {
	return app.LastBuild{}, nil
}

// TestAppPreparesItsNamespace: an App of a new tenant, before any push,
// gets its namespace prepared by the App controller (Pod Security labels,
// the tenant NetworkPolicy), so that a git receiver that may only check
// namespaces can deploy its first push.
func TestAppPreparesItsNamespace(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	driver, err := kube.New(cp.RESTConfig(), kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	startController(ctx, t, cp.RESTConfig(), driverReleases{driver}, nil)

	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b"}}); err != nil {
		t.Fatal(err)
	}
	pc, err := client.New(cp.RESTConfig(), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Create(ctx, &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 2*time.Minute, "namespace tenant-b prepared", func(ctx context.Context) error {
		var ns corev1.Namespace
		var np networkingv1.NetworkPolicy
		nsErr := c.Get(ctx, client.ObjectKey{Name: "tenant-b"}, &ns)
		npErr := c.Get(ctx, client.ObjectKey{Namespace: "tenant-b", Name: kube.TenantPolicyName}, &np)
		if nsErr != nil || npErr != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			return fmt.Errorf("labels %v (%v), policy: %v", ns.Labels, nsErr, npErr)
		}
		return nil
	})
}

// countingReleases runs every App, healthy, and counts the reconciles
// that asked it for the last build.
type countingReleases struct{ reconciles atomic.Int64 }

func (*countingReleases) EnsureRunning(context.Context, *platformv1alpha1.App) error { return nil }
func (*countingReleases) Health(context.Context, string, string) (bool, string, error) {
	return true, "1 web instance running", nil
}
func (*countingReleases) Remove(context.Context, string, string) error { return nil }
func (r *countingReleases) LastBuild(context.Context, string, string) (app.LastBuild, error) {
	r.reconciles.Add(1)
	return app.LastBuild{Number: 1}, nil
}

// TestResyncWritesNothing: a reconcile that finds the App as its status
// says writes no status. A running App is reconciled every 15 s; with
// 10,000 Apps a PATCH each time was 667 requests a second to the
// apiserver for nothing.
func TestResyncWritesNothing(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var patches atomic.Int64
	cfg := rest.CopyConfig(cp.RESTConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/status") {
				patches.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	releases := &countingReleases{}
	startController(ctx, t, cfg, releases, nil)

	c, err := client.New(cp.RESTConfig(), client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-quiet"}}); err != nil {
		t.Fatal(err)
	}
	a := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-quiet", Name: "web"}}
	createReleased(ctx, t, c, a)
	waitReady(t, c, a, platformv1alpha1.AppHealthyReason, "")

	before := patches.Load()
	// Two changes that are not the spec's: the second reconcile starts
	// only once the first, and its status write if any, ended.
	for _, v := range []string{"a", "b"} {
		n := releases.reconciles.Load()
		base := a.DeepCopy()
		a.Annotations = map[string]string{"example.test/touch": v}
		if err := c.Patch(ctx, a, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, time.Minute, "a reconcile after touch "+v, func(context.Context) error {
			if releases.reconciles.Load() <= n {
				return errors.New("not reconciled yet")
			}
			return nil
		})
	}
	if n := patches.Load() - before; n != 0 {
		t.Errorf("reconciles that changed nothing wrote the status %d times", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
