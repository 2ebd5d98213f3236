package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/controllers"
	appctrl "bex.co/bex/controllers/app"
	"bex.co/bex/internal/edge"
)

// convergeResult is what converge measured.
type convergeResult struct {
	// apps and routes are the times from the manager's start until every
	// App and every Route had the status the controllers set.
	apps, routes time.Duration
	// heapBefore and heapAfter are the bench process's live heap (after a
	// GC) before the manager and the edge's watch started and once
	// everything converged.
	heapBefore, heapAfter uint64
	// planeAfter is the control plane's memory once everything
	// converged.
	planeAfter planeSample
	// requests are the controllers' requests to the apiserver by verb from
	// the manager's start until everything converged, writes their writes
	// by verb and resource.
	requests, writes map[string]int
	// steady are the controllers' requests to the apiserver, by verb, per
	// second, once everything converged; reconciles the reconciles per
	// second by controller, and queue the workqueue depths at the end.
	steady     map[string]float64
	reconciles map[string]float64
	queue      map[string]float64
	window     time.Duration
	// watchedReconciles are the reconciles per second by controller in a
	// second window, once the runtime tells of its apps' changes
	// (runtime.Watcher) and every App was reconciled since; reconciles is
	// the baseline, with a runtime the App controller polls.
	watchedReconciles map[string]float64
	// edgeUpdates counts the edge table's Route updates while the
	// controllers converged.
	edgeUpdates int
}

// verbCounter counts a client's requests by method, and its writes by
// method and resource.
type verbCounter struct {
	mu     sync.Mutex
	n      map[string]int
	writes map[string]int
}

func newVerbCounter() *verbCounter {
	return &verbCounter{n: map[string]int{}, writes: map[string]int{}}
}

func (c *verbCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		verb := req.Method
		if req.URL.Query().Get("watch") == "true" {
			verb = "WATCH"
		}
		c.mu.Lock()
		c.n[verb]++
		if verb != http.MethodGet && verb != "WATCH" {
			c.writes[verb+" "+resourceOf(req.URL.Path)]++
		}
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// take returns the requests by method since the last take, and the
// writes by method and resource.
func (c *verbCounter) take() (requests, writes map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	requests, writes = c.n, c.writes
	c.n, c.writes = map[string]int{}, map[string]int{}
	return requests, writes
}

// resourceOf names the resource of an apiserver path, with its
// subresource: "apps/status" for
// /apis/platform.bex.co/v1alpha1/namespaces/t/apps/web/status.
func resourceOf(path string) string {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(seg) > 2 && seg[0] == "api":
		seg = seg[2:]
	case len(seg) > 3 && seg[0] == "apis":
		seg = seg[3:]
	default:
		return path
	}
	if len(seg) > 2 && seg[0] == "namespaces" {
		seg = seg[2:]
	}
	if len(seg) > 2 {
		return seg[0] + "/" + seg[2]
	}
	return seg[0]
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// converge starts the App and Route controllers as the platform runs them
// (controllers.Setup, the control plane's client limits) on the seeded
// fleet and waits until every App is Ready at its generation and every
// Route is Ready at its generation; then it counts their requests for
// steady.
func (e *env) converge(ctx context.Context, f *fleet, steady time.Duration, r *report) error {
	w, err := e.watchConvergence(ctx)
	if err != nil {
		return err
	}
	cr := &r.converge
	cr.heapBefore = liveHeap()
	// The edge follows the Routes as they converge, as bex-edge would.
	edgeTable, err := e.watchEdge(ctx)
	if err != nil {
		return err
	}
	var edgeUpdates atomic.Int64
	countCtx, stopCounting := context.WithCancel(ctx)
	defer stopCounting()
	go func() {
		for {
			select {
			case <-countCtx.Done():
				return
			case <-edgeTable.Changed():
				edgeUpdates.Add(1)
			}
		}
	}()

	counter := newVerbCounter()
	cfg := rest.CopyConfig(e.cfg)
	cfg.Wrap(counter.wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 controllers.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	rt := &benchRuntime{release: map[string]int{}, kube: mgr.GetClient()}
	rel, err := e.newReleaser(rt, mgr.GetClient())
	if err != nil {
		return err
	}
	if err := controllers.Setup(mgr, controllers.Deps{
		Releases: rel, DNS: e.dns.Resolver(), EdgeAddresses: []string{edgeAddress}, AppDomain: appDomain,
	}); err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- mgr.Start(mctx) }()
	e.stops = append(e.stops, func() { cancel(); <-done })

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for cr.apps == 0 || cr.routes == 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-done:
			return fmt.Errorf("the manager stopped: %w", err)
		case <-tick.C:
		}
		apps, routes := w.converged()
		if cr.apps == 0 && apps == f.apps {
			cr.apps = time.Since(start)
		}
		if cr.routes == 0 && routes == f.apps {
			cr.routes = time.Since(start)
		}
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "converged after %s: %d/%d apps, %d/%d routes\n", time.Since(start).Round(time.Second), apps, f.apps, routes, f.apps)
		}
	}
	cr.edgeUpdates = int(edgeUpdates.Load())
	fmt.Fprintf(os.Stderr, "converged: apps in %s, routes in %s; counting requests for %s\n", cr.apps.Round(time.Millisecond), cr.routes.Round(time.Millisecond), steady)
	cr.heapAfter = liveHeap()
	cr.requests, cr.writes = counter.take()
	if cr.planeAfter, err = e.samplePlane(ctx); err != nil {
		return err
	}

	before, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(steady):
	}
	cr.window = time.Since(t0)
	cr.steady = map[string]float64{}
	steadyRequests, _ := counter.take()
	for verb, n := range steadyRequests {
		cr.steady[verb] = float64(n) / cr.window.Seconds()
	}
	after, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return err
	}
	cr.reconciles = reconcileRates(before, after, cr.window)
	cr.queue = byLabel(after, "workqueue_depth", "name")

	// The same window once the runtime watches: each App's polling resync
	// (15 s) comes once more and finds it watched.
	rt.watches.Store(true)
	switchWait := 2 * appctrl.ResyncPeriod
	fmt.Fprintf(os.Stderr, "the runtime now tells of its apps' changes; counting reconciles again after %s\n", switchWait)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(switchWait):
	}
	if before, err = ctrlmetrics.Registry.Gather(); err != nil {
		return err
	}
	t0 = time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(steady):
	}
	if after, err = ctrlmetrics.Registry.Gather(); err != nil {
		return err
	}
	cr.watchedReconciles = reconcileRates(before, after, time.Since(t0))
	return nil
}

// reconcileRates are the reconciles per second by controller between two
// gatherings of the controllers' metrics, window apart.
func reconcileRates(before, after []*dto.MetricFamily, window time.Duration) map[string]float64 {
	out := map[string]float64{}
	b, a := byLabel(before, "controller_runtime_reconcile_total", "controller"), byLabel(after, "controller_runtime_reconcile_total", "controller")
	for c, n := range a {
		out[c] = (n - b[c]) / window.Seconds()
	}
	return out
}

// byLabel sums the samples of metric name by the value of label.
func byLabel(families []*dto.MetricFamily, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] += v
				}
			}
		}
	}
	return out
}

// liveHeap returns the heap in use after a garbage collection.
func liveHeap() uint64 {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// convergenceWatch follows every App and Route through a cache of its
// own, which keeps of each object only what convergence is judged by (so
// that its own memory stays out of the heap figures).
type convergenceWatch struct {
	mu           sync.Mutex
	apps, routes map[string]bool
	nApps        atomic.Int64
	nRoutes      atomic.Int64
}

func (w *convergenceWatch) converged() (apps, routes int) {
	return int(w.nApps.Load()), int(w.nRoutes.Load())
}

// set records whether the object key has converged.
func (w *convergenceWatch) set(m map[string]bool, n *atomic.Int64, key string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m[key] == ok {
		return
	}
	m[key] = ok
	if ok {
		n.Add(1)
	} else {
		n.Add(-1)
	}
}

// readyAt reports whether conds has Ready True at generation, and the
// status was written for generation.
func readyAt(conds []metav1.Condition, observed, generation int64) bool {
	c := meta.FindStatusCondition(conds, "Ready")
	return observed == generation && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}

// slim keeps of an App or Route what convergence is judged by.
func slim(o any) (any, error) {
	switch obj := o.(type) {
	case *platformv1alpha1.App:
		return &platformv1alpha1.App{ObjectMeta: slimMeta(obj.ObjectMeta), Status: platformv1alpha1.AppStatus{
			ObservedGeneration: obj.Status.ObservedGeneration, Conditions: readyOnly(obj.Status.Conditions, obj.Status.ObservedGeneration, obj.Generation),
		}}, nil
	case *platformv1alpha1.Route:
		return &platformv1alpha1.Route{ObjectMeta: slimMeta(obj.ObjectMeta), Status: platformv1alpha1.RouteStatus{
			ObservedGeneration: obj.Status.ObservedGeneration, Conditions: readyOnly(obj.Status.Conditions, obj.Status.ObservedGeneration, obj.Generation),
		}}, nil
	}
	return o, nil
}

func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Generation: m.Generation, ResourceVersion: m.ResourceVersion}
}

// readyOnly returns a Ready condition at generation when conds has one
// (readyAt), else none.
func readyOnly(conds []metav1.Condition, observed, generation int64) []metav1.Condition {
	if !readyAt(conds, observed, generation) {
		return nil
	}
	return []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: generation}}
}

// watchEdge runs the edge's watch of Routes and maintenance Apps (as
// bex-edge does) on a cache of its own, and returns its table.
func (e *env) watchEdge(ctx context.Context) (*edge.Table, error) {
	c, err := cache.New(e.cfg, cache.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Start(cctx); close(done) }()
	e.stops = append(e.stops, func() { cancel(); <-done })
	table := &edge.Table{}
	if err := edge.WatchRoutes(ctx, c, table, logr.Discard()); err != nil {
		return nil, err
	}
	if err := edge.WatchMaintenance(ctx, c, table, logr.Discard()); err != nil {
		return nil, err
	}
	return table, nil
}

func (e *env) watchConvergence(ctx context.Context) (*convergenceWatch, error) {
	c, err := cache.New(e.cfg, cache.Options{Scheme: controllers.NewScheme(), DefaultTransform: slim})
	if err != nil {
		return nil, err
	}
	w := &convergenceWatch{apps: map[string]bool{}, routes: map[string]bool{}}
	for _, k := range []struct {
		obj   client.Object
		m     map[string]bool
		n     *atomic.Int64
		ready func(any) bool
	}{
		{&platformv1alpha1.App{}, w.apps, &w.nApps, func(o any) bool {
			a := o.(*platformv1alpha1.App)
			return readyAt(a.Status.Conditions, a.Status.ObservedGeneration, a.Generation)
		}},
		{&platformv1alpha1.Route{}, w.routes, &w.nRoutes, func(o any) bool {
			rt := o.(*platformv1alpha1.Route)
			return readyAt(rt.Status.Conditions, rt.Status.ObservedGeneration, rt.Generation)
		}},
	} {
		inf, err := c.GetInformer(ctx, k.obj)
		if err != nil {
			return nil, err
		}
		update := func(o any) {
			if obj, ok := o.(client.Object); ok {
				w.set(k.m, k.n, obj.GetNamespace()+"/"+obj.GetName(), k.ready(o))
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: update, UpdateFunc: func(_, o any) { update(o) },
		}); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Start(cctx); close(done) }()
	e.stops = append(e.stops, func() { cancel(); <-done })
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the convergence cache did not sync: %w", ctx.Err())
	}
	return w, nil
}
