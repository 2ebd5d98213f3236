package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api"
)

const (
	// appDomain is the domain of the apps' default hostnames.
	appDomain = "apps.bench.test"
	// routeDomain is the domain every Route's hostname is under, one
	// label down (<app>-<tenant>.bench.test), each proved by its tenant's
	// TXT record: the shape of many tenants' names under one domain, and
	// the most Routes one parent domain gathers.
	routeDomain = "bench.test"
	// edgeAddress is where every Route's hostname points.
	edgeAddress = "192.0.2.10"
)

// fleet names the seeded apps: the tenants hold consecutive blocks of
// apps, tenant 0 the first apps/tenants (rounded up).
type fleet struct {
	apps, tenants int
	// finalizer: the Apps carry the App controller's finalizer from
	// their creation, as the API makes them.
	finalizer bool
	// tenantIDs are the store's IDs of the tenants, once seeded.
	mu        sync.Mutex
	tenantIDs map[int]string
	token     string // tenant 0's API token
}

func newFleet(apps, tenants int, finalizer bool) *fleet {
	return &fleet{apps: apps, tenants: tenants, finalizer: finalizer, tenantIDs: map[int]string{}}
}

// tenantOf is the tenant number of app i.
func (f *fleet) tenantOf(i int) int { return i * f.tenants / f.apps }

func (f *fleet) tenant(i int) string { return fmt.Sprintf("t%04d", f.tenantOf(i)) }
func (f *fleet) app(i int) string    { return fmt.Sprintf("app%05d", i) }
func (f *fleet) host(i int) string   { return f.app(i) + "-" + f.tenant(i) + "." + routeDomain }

// firstTenantApps is how many apps tenant 0 holds: apps [0, n).
func (f *fleet) firstTenantApps() int {
	n := 0
	for n < f.apps && f.tenantOf(n) == 0 {
		n++
	}
	return n
}

// seed creates apps [from, to): each app's tenant (namespace, store row,
// on first use), the App (with the App controller's finalizer when
// f.finalizer, as the API creates it) with a release in the store and status
// currentRelease 1 (as the pipeline leaves it after a deploy), and a Route
// for its hostname with plain HTTP, the hostname's TXT and A records in
// DNS. It prints progress.
func (e *env) seed(ctx context.Context, f *fleet, from, to, workers int) error {
	start := time.Now()
	var next, done atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Tenants first, so that each app finds its tenant.
	for t := f.tenantOf(from); t <= f.tenantOf(to-1); t++ {
		if from > 0 && t == f.tenantOf(from-1) {
			continue // seeded with the apps before from
		}
		if err := e.seedTenant(ctx, f, t); err != nil {
			return err
		}
	}
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to || ctx.Err() != nil {
					return
				}
				if err := e.seedApp(ctx, f, i); err != nil {
					errs <- fmt.Errorf("seeding app %d: %w", i, err)
					cancel()
					return
				}
				if n := done.Add(1); n%500 == 0 || int(n) == to-from {
					fmt.Fprintf(os.Stderr, "seeded %d/%d apps (%.0f/s)\n", int(n)+from, f.apps, float64(n)/time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (e *env) seedTenant(ctx context.Context, f *fleet, t int) error {
	name := fmt.Sprintf("t%04d", t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.TenantLabel: name}}}
	if err := e.kube.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	tn, err := e.store.CreateTenant(ctx, name)
	if err != nil {
		return fmt.Errorf("creating tenant %s: %w", name, err)
	}
	f.mu.Lock()
	f.tenantIDs[t] = tn.ID
	f.mu.Unlock()
	if t == 0 {
		secret, _, err := e.store.CreateToken(ctx, tn.ID, "", "appsbench")
		if err != nil {
			return fmt.Errorf("creating a token of %s: %w", name, err)
		}
		f.token = secret
	}
	return nil
}

func (e *env) seedApp(ctx context.Context, f *fleet, i int) error {
	tenant, name, host := f.tenant(i), f.app(i), f.host(i)
	f.mu.Lock()
	tenantID := f.tenantIDs[f.tenantOf(i)]
	f.mu.Unlock()
	labels := map[string]string{api.TenantLabel: tenant}
	app := &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, Labels: labels}}
	if f.finalizer {
		app.Finalizers = []string{platformv1alpha1.AppFinalizer}
	}
	if err := e.kube.Create(ctx, app); err != nil {
		return fmt.Errorf("creating app: %w", err)
	}
	b, err := e.store.CreateBuild(ctx, store.NewBuild{TenantID: tenantID, App: name, Commit: "0123456789abcdef0123456789abcdef01234567", Stack: "go"})
	if err != nil {
		return fmt.Errorf("creating build: %w", err)
	}
	image := fmt.Sprintf("registry.bench.test/%s/%s@sha256:%064x", tenant, name, i)
	if _, err := e.store.FinishBuild(ctx, b.ID, store.BuildResult{Status: store.BuildSucceeded, Image: image}); err != nil {
		return fmt.Errorf("finishing build: %w", err)
	}
	rel, err := e.store.CreateRelease(ctx, store.NewRelease{TenantID: tenantID, App: name, Kind: store.ReleaseKindDeploy,
		BuildID: b.ID, Image: image, Description: "Deploy 0123456", CreatedBy: "appsbench"})
	if err != nil {
		return fmt.Errorf("creating release: %w", err)
	}
	base := app.DeepCopy()
	app.Status.CurrentRelease = int64(rel.Number)
	if err := e.kube.Status().Patch(ctx, app, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("setting the current release: %w", err)
	}
	e.dns.SetTXT(domains.ChallengeName(host), domains.Token(appDomain, tenant, host))
	e.dns.SetA(host, edgeAddress)
	rt := &platformv1alpha1.Route{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, Labels: labels},
		Spec: platformv1alpha1.RouteSpec{Hostname: host, AppRef: platformv1alpha1.AppReference{Name: name},
			TLS: platformv1alpha1.RouteTLS{Mode: platformv1alpha1.TLSModeNone}},
	}
	if err := e.kube.Create(ctx, rt); err != nil {
		return fmt.Errorf("creating route: %w", err)
	}
	return nil
}
