package main

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/builder/release"
	"bex.co/bex/controllers"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
)

// benchRuntime is a runtime.Driver that runs nothing and reports every app
// as running its App's current release, ready, with one web instance: ten
// thousand apps do not run on one machine, and the bench measures the
// platform around them. A Deploy is remembered as what runs. While
// watches is false it is a runtime the App controller must poll (a kube
// cluster's); once true, one that tells of its apps' changes
// (runtime.Watcher, as make run's process runtime), none of which come.
type benchRuntime struct {
	watches atomic.Bool

	mu      sync.Mutex
	release map[string]int // tenant/app → release deployed, when one was
	kube    client.Client
}

var (
	_ runtime.Driver  = (*benchRuntime)(nil)
	_ runtime.Watcher = (*benchRuntime)(nil)
)

// Watch implements runtime.Watcher: nothing changes.
func (r *benchRuntime) Watch(context.Context, func(tenant, app string)) {}

// Watches implements runtime.Watcher.
func (r *benchRuntime) Watches(string, string) bool { return r.watches.Load() }

func (r *benchRuntime) Deploy(_ context.Context, rel runtime.Release, _ io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.release[rel.Tenant+"/"+rel.App] = rel.Number
	return nil
}

func (r *benchRuntime) Remove(_ context.Context, tenant, app string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.release, tenant+"/"+app)
	return nil
}

// Status reports the release a Deploy gave, else the App's current release
// (what the platform ran before the bench started it).
func (r *benchRuntime) Status(ctx context.Context, tenant, app string) (runtime.Status, error) {
	r.mu.Lock()
	n, ok := r.release[tenant+"/"+app]
	r.mu.Unlock()
	if !ok {
		var a platformv1alpha1.App
		if err := r.kube.Get(ctx, client.ObjectKey{Namespace: tenant, Name: app}, &a); err != nil || a.Status.CurrentRelease == 0 {
			return runtime.Status{}, fmt.Errorf("app %s/%s: %w", tenant, app, runtime.ErrNotFound)
		}
		n = int(a.Status.CurrentRelease)
	}
	return runtime.Status{Release: n, Ready: true, Message: "1 web instance running",
		Instances: []runtime.Instance{{Process: "web", ID: "web-1", Release: n, State: runtime.Running, Since: time.Now()}}}, nil
}

func (r *benchRuntime) Logs(context.Context, string, string, int, bool) (<-chan runtime.LogLine, error) {
	ch := make(chan runtime.LogLine)
	close(ch)
	return ch, nil
}

// newReleaser returns the platform's release pipeline over rt; kube must
// read what the App controller writes (the manager's client).
func (e *env) newReleaser(rt runtime.Driver, kube client.Client) (*release.Releaser, error) {
	dir, err := os.MkdirTemp("", "bex-appsbench-releases-")
	if err != nil {
		return nil, err
	}
	e.stops = append(e.stops, func() { os.RemoveAll(dir) })
	return release.New(release.Options{
		Store: e.store, Kube: kube, Runtime: rt, ReleasesDir: dir,
		URL: func(tenant, app string) string { return "https://" + app + "-" + tenant + "." + appDomain },
		Log: logr.Discard(),
	})
}

// apiURL serves the platform API on the bench's store and control plane,
// with the uncached cluster client the platform gives it, and returns its
// URL.
func (e *env) apiURL() (string, error) {
	kube, err := client.New(e.cfg, client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		return "", err
	}
	rt := &benchRuntime{release: map[string]int{}, kube: kube}
	rel, err := e.newReleaser(rt, kube)
	if err != nil {
		return "", err
	}
	srv, err := api.New(api.Options{
		Store: e.store, Kube: kube, Deployer: rel, Logs: api.RuntimeLogs{Driver: rt}, Instances: api.RuntimeInstances{Driver: rt},
		GitBase: "http://git.bench.test", AppDomain: appDomain, EdgeAddresses: []string{edgeAddress}, Log: logr.Discard(),
	})
	if err != nil {
		return "", err
	}
	hs := httptest.NewServer(srv.Handler())
	e.stops = append(e.stops, hs.Close)
	return hs.URL, nil
}

// latencies are the durations of requests of one kind.
type latencies []time.Duration

// quantile returns the q-quantile (0 to 1) by the nearest rank.
func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// listTiming is how long tenant 0's app list took through the API.
type listTiming struct {
	clusterApps, tenantApps int
	took                    latencies
}

// timeAppList times n lists of tenant 0's apps through the API (the
// client bex apps list uses), after n/10 unmeasured ones.
func (e *env) timeAppList(ctx context.Context, f *fleet, n int) (listTiming, error) {
	if e.api == "" {
		u, err := e.apiURL()
		if err != nil {
			return listTiming{}, err
		}
		e.api = u
	}
	c, err := apiclient.New(e.api, f.token, nil)
	if err != nil {
		return listTiming{}, err
	}
	var all platformv1alpha1.AppList
	if err := e.kube.List(ctx, &all, client.Limit(1)); err != nil {
		return listTiming{}, err
	}
	t := listTiming{clusterApps: len(all.Items) + int(ptrOr(all.RemainingItemCount))}
	for i := range n/10 + n {
		start := time.Now()
		apps, err := c.ListApps(ctx)
		if err != nil {
			return listTiming{}, fmt.Errorf("listing apps: %w", err)
		}
		if i >= n/10 {
			t.took = append(t.took, time.Since(start))
		}
		t.tenantApps = len(apps)
	}
	fmt.Fprintf(os.Stderr, "app list of a tenant with %d apps, %d in the cluster: p50 %s\n", t.tenantApps, t.clusterApps, t.took.quantile(0.5))
	return t, nil
}

func ptrOr(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
