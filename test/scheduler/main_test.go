package scheduler

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/apiserver/local"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/test/scheduler/fleettest"
)

// suite is what TestMain starts once for every test: the management control
// plane, the workload control plane holding every workload node, and
// bex-apiserver registered with the management plane.
type suite struct {
	mgmt, work *controlplane.ControlPlane
	srv        *local.Server
	// admin is a client of the management plane's endpoint: requests to
	// scheduling.bex.co go through its aggregator.
	admin  client.Client
	work8s client.Client
}

var env suite

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler suite:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctrllog.SetLogger(klog.NewKlogr())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startCtx, cancelStart := context.WithTimeout(ctx, 40*time.Minute)
	defer cancelStart()
	mgmt, err := controlplane.Start(startCtx, controlplane.Options{Log: os.Stderr})
	if err != nil {
		return 1, fmt.Errorf("starting management control plane: %w", err)
	}
	defer mgmt.Stop()
	work, err := controlplane.Start(startCtx, controlplane.Options{Log: os.Stderr, APIServers: []controlplane.APIServerSpec{{NoMVP: true}}})
	if err != nil {
		return 1, fmt.Errorf("starting workload control plane: %w", err)
	}
	defer work.Stop()
	dir, err := os.MkdirTemp("", "bex-apiserver-test-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	srv, err := local.Start(ctx, local.Options{ControlPlane: mgmt, Dir: dir})
	if err != nil {
		return 1, fmt.Errorf("starting bex-apiserver: %w", err)
	}
	defer srv.Stop()
	env = suite{mgmt: mgmt, work: work, srv: srv}
	if env.admin, err = newClient(mgmt.RESTConfig()); err != nil {
		return 1, err
	}
	if env.work8s, err = newClient(work.RESTConfig()); err != nil {
		return 1, err
	}
	if err := seed(startCtx); err != nil {
		return 1, fmt.Errorf("seeding the fleet: %w", err)
	}
	return m.Run(), nil
}

func newClient(cfg *rest.Config) (client.Client, error) {
	c, err := client.New(cfg, client.Options{Scheme: fleettest.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return c, nil
}

// fleet is the seeded fleet; the static cluster "local" (cpu=4,
// memory=8Gi, pods=110, on standby) comes from local.DefaultLocalCluster.
func fleet() []fleettest.Cluster {
	v := func(s string, n int32) fleettest.Version { return fleettest.Version{Version: s, Replicas: n} }
	node := func(name, cpu, mem string, pods int64, ready bool) fleettest.Node {
		return fleettest.Node{Name: name, CPU: cpu, Memory: mem, Pods: pods, Ready: ready}
	}
	return []fleettest.Cluster{{
		Name: "alpha", Namespace: "fleet-alpha", Region: "eu-central",
		SpecVersion: "v1.37.2", Versions: []fleettest.Version{v("v1.37.2", 3)},
		Pools: []fleettest.Pool{
			{Name: "big", Nodes: []fleettest.Node{node("alpha-b-1", "16", "64Gi", 250, true), node("alpha-b-2", "16", "64Gi", 250, false)}},
			{Name: "workers", Nodes: []fleettest.Node{node("alpha-w-1", "4", "16Gi", 110, true), node("alpha-w-2", "4", "16Gi", 110, true)}},
		},
	}, {
		// Mid-upgrade: two control-plane versions.
		Name: "beta", Namespace: "fleet-beta", Region: "eu-central",
		SpecVersion: "v1.37.2", Versions: []fleettest.Version{v("v1.36.3", 2), v("v1.37.2", 1)},
		Pools: []fleettest.Pool{{Name: "workers", Nodes: []fleettest.Node{node("beta-w-1", "32", "128Gi", 110, true)}}},
	}, {
		Name: "delta", Namespace: "fleet-delta", Region: "eu-central", Unavailable: true,
		SpecVersion: "v1.37.2", Versions: []fleettest.Version{v("v1.37.2", 3)},
		Pools: []fleettest.Pool{{Name: "workers", Nodes: []fleettest.Node{node("delta-w-1", "8", "32Gi", 110, true)}}},
	}, {
		Name: "gamma", Namespace: "fleet-gamma", Region: "us-east", Plans: "pro",
		SpecVersion: "v1.37.2", Versions: []fleettest.Version{v("v1.37.2", 3)},
		Pools: []fleettest.Pool{{Name: "workers", Nodes: []fleettest.Node{node("gamma-w-1", "2", "4Gi", 110, true)}}},
	}}
}

// placements are the seeded Placements.
func placements() []*schedulingv1alpha1.Placement {
	p := func(ns, name, cluster, pool string, replicas int32, cpu, mem string) *schedulingv1alpha1.Placement {
		return &schedulingv1alpha1.Placement{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: schedulingv1alpha1.PlacementSpec{App: name, Cluster: cluster, Pool: pool, Replicas: replicas,
				Resources: schedulingv1alpha1.Resources{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem)}},
		}
	}
	return []*schedulingv1alpha1.Placement{
		p("tenant-a", "web", "alpha", "workers", 2, "500m", "1Gi"),
		p("tenant-a", "api", "alpha", "big", 1, "2", "4Gi"),
		p("tenant-b", "site", "local", "default", 1, "250m", "512Mi"),
	}
}

func seed(ctx context.Context) error {
	kubeconfig, err := os.ReadFile(env.work.KubeconfigPath())
	if err != nil {
		return err
	}
	for _, c := range fleet() {
		if err := fleettest.Seed(ctx, env.admin, env.work8s, kubeconfig, c); err != nil {
			return err
		}
	}
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		if err := env.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("creating namespace: %w", err)
		}
	}
	for _, p := range placements() {
		if err := env.admin.Create(ctx, p); err != nil {
			return fmt.Errorf("creating placement %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}
