package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/apiserver/local"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/test/bench"
	"bex.co/bex/test/scheduler/fleettest"
)

type options struct {
	clusters, nodesPerCluster, placements, tenants int
	reviews, lists, concurrency                    int
	// profileDir, when set, receives CPU profiles of the review phases:
	// this process's (bex-apiserver and the clients) and, through the
	// aggregator, the kube-apiserver's.
	profileDir string
}

func main() {
	var o options
	flag.IntVar(&o.clusters, "clusters", 100, "workload clusters")
	flag.IntVar(&o.nodesPerCluster, "nodes", 3, "nodes per cluster (one pool)")
	flag.IntVar(&o.placements, "placements", 10000, "stored placements")
	flag.IntVar(&o.tenants, "tenants", 100, "tenant namespaces the placements spread over")
	flag.IntVar(&o.reviews, "reviews", 2000, "placement reviews per measurement")
	flag.IntVar(&o.lists, "lists", 200, "clustercapacity lists per measurement")
	flag.IntVar(&o.concurrency, "concurrency", 8, "concurrent clients for reviews and seeding")
	flag.StringVar(&o.profileDir, "profile", "", "write CPU profiles of the review phases to this directory (bench-aggregator.pprof, kube-apiserver-aggregator.pprof, bench-direct.pprof)")
	flag.Parse()
	klog.SetOutput(discard{})
	klog.LogToStderr(false)
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func run(ctx context.Context, o options) error {
	// Profiling on the management apiserver serves /debug/pprof to the
	// admin; the bench reads it only with --profile.
	mgmt, err := controlplane.Start(ctx, controlplane.Options{Log: os.Stderr, APIServers: []controlplane.APIServerSpec{{ExtraArgs: []string{"--profiling=true"}}}})
	if err != nil {
		return fmt.Errorf("starting management control plane: %w", err)
	}
	defer mgmt.Stop()
	work, err := controlplane.Start(ctx, controlplane.Options{Log: os.Stderr, APIServers: []controlplane.APIServerSpec{{NoMVP: true}}})
	if err != nil {
		return fmt.Errorf("starting workload control plane: %w", err)
	}
	defer work.Stop()
	dir, err := os.MkdirTemp("", "bex-apiserver-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := local.Start(ctx, local.Options{ControlPlane: mgmt, Dir: dir, LocalClusters: []string{}})
	if err != nil {
		return fmt.Errorf("starting bex-apiserver: %w", err)
	}
	defer srv.Stop()

	// The clients talk to the kube-apiserver itself, not through the
	// plane's load balancer: that is a TCP proxy in this process, whose
	// CPU would count as the bench's.
	kube := mgmt.APIServers()[0]
	viaAggregator, err := newClient(kube.RESTConfig())
	if err != nil {
		return err
	}
	direct, err := newClient(srv.DirectConfig(mgmt.RESTConfig()))
	if err != nil {
		return err
	}
	workClient, err := newClient(work.RESTConfig())
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := seedFleet(ctx, o, viaAggregator, workClient, work); err != nil {
		return err
	}
	fmt.Printf("seeded %d clusters × %d nodes in %s\n", o.clusters, o.nodesPerCluster, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if err := seedPlacements(ctx, o, viaAggregator); err != nil {
		return err
	}
	fmt.Printf("created %d placements through the aggregator in %s\n", o.placements, time.Since(t0).Round(time.Millisecond))
	if err := waitForFleet(ctx, o, direct); err != nil {
		return err
	}

	type result struct {
		name            string
		reviewsPerSec   float64
		p50, p99, mean  time.Duration
		reviewP50, rP99 time.Duration
		// CPU per review of this process (bex-apiserver and the clients)
		// and of the kube-apiserver, over the review phase.
		benchCPU, kubeCPU time.Duration
	}
	var results []result
	for _, target := range []struct {
		name string
		c    client.Client
	}{{"aggregator", viaAggregator}, {"direct", direct}} {
		// Warm up connections and caches.
		if _, err := listLatencies(ctx, target.c, 10); err != nil {
			return err
		}
		lat, err := listLatencies(ctx, target.c, o.lists)
		if err != nil {
			return err
		}
		// Reviews that list every candidate (the default, what an operator
		// asks) and the verdict alone (what the App controller asks).
		for _, listing := range []string{schedulingv1alpha1.CandidatesAll, schedulingv1alpha1.CandidatesNone} {
			name := target.name + ", candidates " + listing
			if _, _, err := reviewThroughput(ctx, target.c, options{reviews: 4 * o.concurrency, concurrency: o.concurrency}, listing); err != nil {
				return err
			}
			stopProfiles, err := startProfiles(ctx, o.profileDir, strings.ToLower(target.name+"-"+listing), kube, target.name == "aggregator")
			if err != nil {
				return err
			}
			benchBefore, kubeBefore := cpuTime(os.Getpid()), cpuTime(kube.PID())
			rps, rlat, err := reviewThroughput(ctx, target.c, o, listing)
			benchCPU, kubeCPU := cpuTime(os.Getpid())-benchBefore, cpuTime(kube.PID())-kubeBefore
			if perr := stopProfiles(); perr != nil && err == nil {
				err = perr
			}
			if err != nil {
				return err
			}
			results = append(results, result{name: name, reviewsPerSec: rps,
				p50: pct(lat, 50), p99: pct(lat, 99), mean: mean(lat), reviewP50: pct(rlat, 50), rP99: pct(rlat, 99),
				benchCPU: benchCPU / time.Duration(o.reviews), kubeCPU: kubeCPU / time.Duration(o.reviews)})
		}
	}

	fmt.Printf("\nbex-apiserver: %d clusters, %d placements, %d-way concurrent reviews, %d sequential lists\n\n", o.clusters, o.placements, o.concurrency, o.lists)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "path, listing\tPlacementReview/s\treview p50\treview p99\tCPU/review bex-apiserver+clients\tCPU/review kube-apiserver\tClusterCapacity list p50\tlist p99\tlist mean\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.name, r.reviewsPerSec, ms(r.reviewP50), ms(r.rP99), ms(r.benchCPU), ms(r.kubeCPU), ms(r.p50), ms(r.p99), ms(r.mean))
	}
	tw.Flush()
	// results: aggregator All, aggregator None, direct All, direct None.
	fmt.Println()
	for i, listing := range []string{schedulingv1alpha1.CandidatesAll, schedulingv1alpha1.CandidatesNone} {
		a, d := results[i], results[2+i]
		fmt.Printf("candidates %s: ratio aggregator/direct: review throughput %.2f×", listing, a.reviewsPerSec/d.reviewsPerSec)
		if i == 0 {
			fmt.Printf(", list p50 latency %.2f×, list mean latency %.2f×", float64(a.p50)/float64(d.p50), float64(a.mean)/float64(d.mean))
		}
		total := a.benchCPU + a.kubeCPU
		fmt.Printf("\n  CPU per review through the aggregator: %s, of which the kube-apiserver %s (%.0f%%); on %d cores that bounds throughput at %.0f/s\n",
			ms(total), ms(a.kubeCPU), 100*float64(a.kubeCPU)/float64(total), runtime.NumCPU(), float64(runtime.NumCPU())/total.Seconds())
	}
	fmt.Printf("load average during the run: %s\n", bench.LoadAverage())
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func newClient(cfg *rest.Config) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // measure the servers, not the client's rate limiter
	c, err := client.New(cfg, client.Options{Scheme: fleettest.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return c, nil
}

func seedFleet(ctx context.Context, o options, mgmt, work client.Client, workCP *controlplane.ControlPlane) error {
	kubeconfig, err := os.ReadFile(workCP.KubeconfigPath())
	if err != nil {
		return err
	}
	return bench.Parallel(o.clusters, o.concurrency, func(i int) error {
		name := fmt.Sprintf("c%03d", i)
		var nodes []fleettest.Node
		for j := range o.nodesPerCluster {
			nodes = append(nodes, fleettest.Node{Name: fmt.Sprintf("%s-w-%d", name, j), CPU: "16", Memory: "64Gi", Pods: 110, Ready: true})
		}
		return fleettest.Seed(ctx, mgmt, work, kubeconfig, fleettest.Cluster{
			Name: name, Namespace: "fleet-" + name, Region: []string{"eu-central", "us-east"}[i%2],
			SpecVersion: "v1.37.2", Versions: []fleettest.Version{{Version: "v1.37.2", Replicas: 3}},
			Pools: []fleettest.Pool{{Name: "workers", Nodes: nodes}},
		})
	})
}

func seedPlacements(ctx context.Context, o options, c client.Client) error {
	for t := range o.tenants {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tenant-%03d", t)}}
		if err := c.Create(ctx, ns); err != nil {
			return fmt.Errorf("creating namespace: %w", err)
		}
	}
	return bench.Parallel(o.placements, 2*o.concurrency, func(i int) error {
		p := &schedulingv1alpha1.Placement{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("tenant-%03d", i%o.tenants), Name: fmt.Sprintf("app-%05d", i)},
			Spec: schedulingv1alpha1.PlacementSpec{
				App: fmt.Sprintf("app-%05d", i), Cluster: fmt.Sprintf("c%03d", i%o.clusters), Pool: "workers", Plan: "starter", Replicas: 1,
				Resources: schedulingv1alpha1.Resources{CPU: resource.MustParse("100m"), Memory: resource.MustParse("128Mi")},
			},
		}
		if err := c.Create(ctx, p); err != nil {
			return fmt.Errorf("creating placement %d: %w", i, err)
		}
		return nil
	})
}

// waitForFleet waits until every cluster is healthy and every placement
// counted.
func waitForFleet(ctx context.Context, o options, c client.Client) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var list schedulingv1alpha1.ClusterCapacityList
		if err := c.List(ctx, &list); err != nil {
			last = err.Error()
			return false, nil
		}
		var accepting int
		var pods int64
		for _, cc := range list.Items {
			if cc.Status.AcceptsPlacements {
				accepting++
			}
			pods += cc.Status.Requested.Pods
		}
		last = fmt.Sprintf("%d clusters, %d accepting, %d placed pods", len(list.Items), accepting, pods)
		return accepting == o.clusters && pods == int64(o.placements), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the fleet (%s): %w", last, err)
	}
	return nil
}

func listLatencies(ctx context.Context, c client.Client, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		var list schedulingv1alpha1.ClusterCapacityList
		t := time.Now()
		if err := c.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("listing clustercapacities: %w", err)
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

func reviewThroughput(ctx context.Context, c client.Client, o options, candidates string) (float64, []time.Duration, error) {
	lat := make([]time.Duration, o.reviews)
	start := time.Now()
	err := bench.Parallel(o.reviews, o.concurrency, func(i int) error {
		r := &schedulingv1alpha1.PlacementReview{Spec: schedulingv1alpha1.PlacementReviewSpec{
			App: "bench", Replicas: int32(1 + i%3),
			Constraints: schedulingv1alpha1.PlacementConstraints{Plan: "standard", Region: []string{"eu-central", "us-east", ""}[i%3]},
			Candidates:  candidates,
		}}
		t := time.Now()
		if err := c.Create(ctx, r); err != nil {
			return fmt.Errorf("creating placementreview: %w", err)
		}
		lat[i] = time.Since(t)
		if !r.Status.Schedulable {
			return fmt.Errorf("review %d unschedulable: %s", i, r.Status.Message)
		}
		return nil
	})
	return float64(o.reviews) / time.Since(start).Seconds(), lat, err
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}
