package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/apiserver/local"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/app"
	"bex.co/bex/deploy"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/test/bench"
	"bex.co/bex/test/scheduler/fleettest"
)

// options are the bench's sizes.
type options struct {
	clusters, nodes, apps, tenants, concurrency int
	// window is how long reconciles and requests are counted in each run.
	window time.Duration
	// placeTimeout bounds the wait for every App to be placed.
	placeTimeout time.Duration
	// placePolled places the Apps in the run with the 30 s resync, which
	// then runs first.
	placePolled bool
}

func defaultOptions() options {
	return options{clusters: 100, nodes: 3, apps: 10000, tenants: 1000, concurrency: 16, window: 60 * time.Second, placeTimeout: 30 * time.Minute}
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.IntVar(&o.clusters, "clusters", o.clusters, "Cluster API workload clusters in the fleet")
	fs.IntVar(&o.nodes, "nodes", o.nodes, "nodes per cluster (one pool, 16 cpu, 64Gi, 110 pods each)")
	fs.IntVar(&o.apps, "apps", o.apps, "Apps to place (plan starter)")
	fs.IntVar(&o.tenants, "tenants", o.tenants, "tenant namespaces the Apps spread over")
	fs.IntVar(&o.concurrency, "concurrency", o.concurrency, "concurrent clients while seeding")
	fs.DurationVar(&o.window, "window", o.window, "how long each run counts reconciles and requests, once every App is placed")
	fs.BoolVar(&o.placePolled, "place-polled", o.placePolled, "run the 30 s resync first, so that it places the Apps")
	fs.DurationVar(&o.placeTimeout, "place-timeout", o.placeTimeout, "how long to wait for every App to be placed")
}

func (o options) validate() error {
	switch {
	case o.clusters < 1, o.nodes < 1, o.apps < 1, o.concurrency < 1:
		return errors.New("--clusters, --nodes, --apps and --concurrency must be at least 1")
	case o.tenants < 1 || o.tenants > o.apps:
		return fmt.Errorf("--tenants must be between 1 and --apps (%d), got %d", o.apps, o.tenants)
	case o.window <= 0:
		return errors.New("--window must be positive")
	case int64(o.apps) > int64(o.clusters)*int64(o.nodes)*110:
		return fmt.Errorf("%d Apps do not fit %d clusters of %d nodes of 110 pods: raise --clusters or --nodes", o.apps, o.clusters, o.nodes)
	}
	return nil
}

func run(ctx context.Context, o options, out io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	ctrllog.SetLogger(logr.Discard())
	fmt.Fprintf(out, "placebench: %d clusters × %d nodes, %d Apps over %d tenants, window %s; load %s\n", o.clusters, o.nodes, o.apps, o.tenants, o.window, bench.LoadAverage())

	cp, err := controlplane.Start(ctx, controlplane.Options{Log: os.Stderr})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer cp.Stop()
	if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), deploy.CRDs()); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	dir, err := os.MkdirTemp("", "bex-placebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := local.Start(ctx, local.Options{ControlPlane: cp, Dir: dir, LocalClusters: []string{}})
	if err != nil {
		return fmt.Errorf("starting bex-apiserver: %w", err)
	}
	defer srv.Stop()

	seedCfg := rest.CopyConfig(cp.RESTConfig())
	seedCfg.QPS, seedCfg.Burst = -1, 0
	seed, err := ctrl.New(seedCfg, ctrl.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := seedFleet(ctx, o, seed, cp); err != nil {
		return err
	}
	if err := waitFleet(ctx, o, seed); err != nil {
		return err
	}
	fmt.Fprintf(out, "fleet: %d clusters accepting placements in %s\n", o.clusters, time.Since(t0).Round(time.Second))
	t0 = time.Now()
	if err := seedApps(ctx, o, seed, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "created %d Apps in %s\n", o.apps, time.Since(t0).Round(time.Second))

	var runs [2]result
	for i, poll := range []bool{o.placePolled, !o.placePolled} {
		if runs[i], err = measure(ctx, o, cp.RESTConfig(), seed, poll, out); err != nil {
			return err
		}
	}
	if o.placePolled {
		runs[0], runs[1] = runs[1], runs[0]
	}
	report(out, o, runs[0], runs[1])
	return nil
}

// result is one run's counts.
type result struct {
	name string
	// toPlace is how long the controller took, from its start, until
	// every App was placed (or, already placed, reconciled once).
	toPlace time.Duration
	// toPlaceCalls and toPlaceFailed are the calls of Place until then,
	// and how many of them failed.
	toPlaceCalls, toPlaceFailed int64
	// placing are the controller's requests until then.
	placing map[string]int64
	// reconciles are the placement reconciles (calls of Place) in the
	// window; requests the controller's requests by "VERB resource".
	reconciles, failed int64
	requests           map[string]int64
	window             time.Duration
	loadBefore         string
	loadAfter          string
}

func (r result) perSecond(n int64) float64 { return float64(n) / r.window.Seconds() }

// measure runs the App controller (polling placements or following the
// ClusterCapacities), waits until every App is placed and the
// controller's first pass is done, then counts over the window.
func measure(ctx context.Context, o options, cfg *rest.Config, seed ctrl.Client, poll bool, out io.Writer) (result, error) {
	res := result{name: "capacity watch", window: o.window, loadBefore: bench.LoadAverage()}
	if poll {
		res.name = "30 s resync"
	}
	fmt.Fprintf(out, "run %q: starting the App controller; load %s\n", res.name, res.loadBefore)
	counts := &requestCounts{byKey: map[string]int64{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counts.wrap(rt) })
	skip := true
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 controllers.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Each run starts a controller of its own.
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return res, fmt.Errorf("creating the manager: %w", err)
	}
	// Uncached, as controllers.Setup gives it.
	pc, err := ctrl.New(mgr.GetConfig(), ctrl.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return res, fmt.Errorf("creating the scheduler client: %w", err)
	}
	placer := &countingPlacer{Placer: app.SchedulerPlacer{Client: pc}}
	r := &app.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Placer: placer, PollPlacements: poll}
	if err := r.SetupWithManager(mgr); err != nil {
		return res, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		<-done
	}()

	start := time.Now()
	var last string
	err = wait.PollUntilContextTimeout(ctx, 5*time.Second, o.placeTimeout, false, func(ctx context.Context) (bool, error) {
		placed, err := countPlaced(ctx, seed)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		calls := placer.calls.Load()
		last = fmt.Sprintf("%d of %d Apps placed, %d placement reconciles (%d failed, %d placed nowhere)", placed, o.apps, calls, placer.failed.Load(), placer.unplaced.Load())
		fmt.Fprintf(out, "  %s: %s\n", time.Since(start).Round(time.Second), last)
		return placed == o.apps && calls >= int64(o.apps), nil
	})
	if err != nil {
		return res, fmt.Errorf("run %q: waiting for every App to be placed (%s): %w", res.name, last, err)
	}
	res.toPlace = time.Since(start)
	res.toPlaceCalls, res.toPlaceFailed = placer.calls.Load(), placer.failed.Load()
	res.placing = counts.snapshot()
	if e, ok := placer.lastErr.Load().(string); ok {
		fmt.Fprintf(out, "run %q: last failed placement: %s\n", res.name, e)
	}
	if moved, err := movedReasons(ctx, seed); err != nil {
		fmt.Fprintf(out, "run %q: counting the moves: %v\n", res.name, err)
	} else if len(moved) > 0 {
		fmt.Fprintf(out, "run %q: Placements moved once placed, by reason of the last move: %v\n", res.name, moved)
	}
	if m, ok := placer.lastUnplaced.Load().(string); ok {
		fmt.Fprintf(out, "run %q: last App placed nowhere: %s\n", res.name, m)
	}
	fmt.Fprintf(out, "run %q: every App placed %s after the controller's start; counting for %s\n", res.name, res.toPlace.Round(time.Second), o.window)
	c0, f0, r0 := placer.calls.Load(), placer.failed.Load(), counts.snapshot()
	select {
	case <-time.After(o.window):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	c1, f1, r1 := placer.calls.Load(), placer.failed.Load(), counts.snapshot()
	res.reconciles, res.failed = c1-c0, f1-f0
	res.requests = map[string]int64{}
	for k, v := range r1 {
		if d := v - r0[k]; d > 0 {
			res.requests[k] = d
		}
	}
	res.loadAfter = bench.LoadAverage()
	return res, nil
}

// movedReasons counts the Placements that moved, by the reason of their
// last move (spec.movedFrom).
func movedReasons(ctx context.Context, c ctrl.Client) (map[string]int, error) {
	var list schedulingv1alpha1.PlacementList
	if err := c.List(ctx, &list); err != nil {
		return nil, err
	}
	moved := map[string]int{}
	for _, p := range list.Items {
		if m := p.Spec.MovedFrom; m != nil {
			moved[m.Reason]++
		}
	}
	return moved, nil
}

// countPlaced counts the Apps whose status names a cluster.
func countPlaced(ctx context.Context, c ctrl.Client) (int, error) {
	n := 0
	opts := &ctrl.ListOptions{Limit: 2000}
	for {
		var apps platformv1alpha1.AppList
		if err := c.List(ctx, &apps, opts); err != nil {
			return 0, err
		}
		for _, a := range apps.Items {
			if a.Status.Cluster != "" {
				n++
			}
		}
		if apps.Continue == "" {
			return n, nil
		}
		opts.Continue = apps.Continue
	}
}

// countingPlacer counts the controller's placement reconciles: each calls
// Place once.
// Failed calls count in failed too, and the last failure is kept; calls
// that left the App placed nowhere count in unplaced, and the last one's
// message is kept.
type countingPlacer struct {
	app.Placer
	calls, failed, unplaced atomic.Int64
	lastErr, lastUnplaced   atomic.Value
}

func (p *countingPlacer) Place(ctx context.Context, a *platformv1alpha1.App) (app.Placement, error) {
	p.calls.Add(1)
	pl, err := p.Placer.Place(ctx, a)
	switch {
	case err != nil:
		p.failed.Add(1)
		p.lastErr.Store(err.Error())
	case !pl.Placed:
		p.unplaced.Add(1)
		p.lastUnplaced.Store(pl.Message)
	}
	return pl, err
}

// requestCounts counts requests by verb and resource.
type requestCounts struct {
	mu    sync.Mutex
	byKey map[string]int64
}

func (c *requestCounts) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		key := requestKey(req)
		c.mu.Lock()
		c.byKey[key]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (c *requestCounts) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int64, len(c.byKey))
	for k, v := range c.byKey {
		m[k] = v
	}
	return m
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestKey names a request "VERB resource" (get, list, watch, create,
// update, patch, delete): /apis/G/V/namespaces/NS/R/NAME[/SUB] and
// /apis/G/V/R[/NAME]; "other" for anything else.
func requestKey(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	default:
		return "other"
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) > 2 {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return "other"
	}
	resource, named := rest[0], len(rest) > 1
	if len(rest) > 2 {
		resource += "/" + rest[2]
	}
	verb := strings.ToLower(req.Method)
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	}
	return verb + " " + resource
}

func seedFleet(ctx context.Context, o options, c ctrl.Client, cp *controlplane.ControlPlane) error {
	kubeconfig, err := os.ReadFile(cp.KubeconfigPath())
	if err != nil {
		return err
	}
	return bench.Parallel(o.clusters, o.concurrency, func(i int) error {
		name := fmt.Sprintf("c%03d", i)
		var nodes []fleettest.Node
		for j := range o.nodes {
			nodes = append(nodes, fleettest.Node{Name: fmt.Sprintf("%s-w-%d", name, j), CPU: "16", Memory: "64Gi", Pods: 110, Ready: true})
		}
		return fleettest.Seed(ctx, c, c, kubeconfig, fleettest.Cluster{
			Name: name, Namespace: "fleet-" + name,
			SpecVersion: "v1.37.2", Versions: []fleettest.Version{{Version: "v1.37.2", Replicas: 3}},
			Pools: []fleettest.Pool{{Name: name + "-workers", Nodes: nodes}},
		})
	})
}

// waitFleet waits until every cluster accepts placements.
func waitFleet(ctx context.Context, o options, c ctrl.Client) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list schedulingv1alpha1.ClusterCapacityList
		if err := c.List(ctx, &list); err != nil {
			last = err.Error()
			return false, nil
		}
		accepting := 0
		for _, cc := range list.Items {
			if cc.Status.AcceptsPlacements {
				accepting++
			}
		}
		last = fmt.Sprintf("%d clusters, %d accepting", len(list.Items), accepting)
		return accepting == o.clusters, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the fleet (%s): %w", last, err)
	}
	return nil
}

// seedApps creates the tenants' namespaces and the Apps, consecutive
// blocks of Apps per tenant.
func seedApps(ctx context.Context, o options, c ctrl.Client, out io.Writer) error {
	if err := bench.Parallel(o.tenants, o.concurrency, func(t int) error {
		return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tenant-%04d", t)}})
	}); err != nil {
		return fmt.Errorf("creating namespaces: %w", err)
	}
	per := (o.apps + o.tenants - 1) / o.tenants
	var created atomic.Int64
	return bench.Parallel(o.apps, o.concurrency, func(i int) error {
		a := &platformv1alpha1.App{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("tenant-%04d", i/per), Name: fmt.Sprintf("app-%05d", i)},
			Spec:       platformv1alpha1.AppSpec{Plan: platformv1alpha1.PlanStarter},
		}
		if err := c.Create(ctx, a); err != nil {
			return fmt.Errorf("creating app %d: %w", i, err)
		}
		if n := created.Add(1); n%1000 == 0 {
			fmt.Fprintf(out, "  %d Apps created\n", n)
		}
		return nil
	})
}

func report(out io.Writer, o options, watched, polled result) {
	fmt.Fprintf(out, "\n%d Apps over %d tenants on %d clusters, counted over %s each:\n", o.apps, o.tenants, o.clusters, o.window)
	for _, r := range []result{watched, polled} {
		fmt.Fprintf(out, "%-15s placed or reconciled once in %s (%d placement reconciles, %d failed); in the window %d placement reconciles (%.1f/s, %d failed); load %s before, %s after\n",
			r.name, r.toPlace.Round(time.Second), r.toPlaceCalls, r.toPlaceFailed, r.reconciles, r.perSecond(r.reconciles), r.failed, r.loadBefore, r.loadAfter)
		fmt.Fprintf(out, "%17suntil placed:\n", "")
		for _, k := range sortedKeys(r.placing) {
			fmt.Fprintf(out, "%17s%-40s %7d\n", "", k, r.placing[k])
		}
		fmt.Fprintf(out, "%17sin the window:\n", "")
		for _, k := range sortedKeys(r.requests) {
			fmt.Fprintf(out, "%17s%-40s %7d (%.1f/s)\n", "", k, r.requests[k], r.perSecond(r.requests[k]))
		}
	}
	if watched.reconciles > 0 {
		fmt.Fprintf(out, "reconciles polled / watched: %.1f×\n", float64(polled.reconciles)/float64(watched.reconciles))
	} else {
		fmt.Fprintf(out, "reconciles polled / watched: %d against none\n", polled.reconciles)
	}
	fmt.Fprintf(out, "scheduling reads (get placements + get clustercapacities): %d watched, %d polled\n",
		watched.requests["get placements"]+watched.requests["get clustercapacities"], polled.requests["get placements"]+polled.requests["get clustercapacities"])
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
