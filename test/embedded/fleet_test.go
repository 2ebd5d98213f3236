package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

// TestMakeRunFleet creates a cluster of the local fleet, with a worker,
// through the API of make run's platform, waits until Cluster API reports
// its three control-plane machines healthy and the worker's Node ready,
// pushes an app and finds it placed on the cluster and served through the
// edge from a Pod on the worker, runs a tenant's operations on it (bex env
// set, logs, rollback, a push: tenantOps), plans an upgrade over the cluster, writes
// into it, restarts the platform on the same state directory and finds the
// cluster serving again with what was written, the worker's node agent
// running again and the app served from it; then creates a second cluster
// and cordons the first (bex fleet cordon): the App controller moves the
// app onto the second, served from a Pod on its worker, and it leaves the
// first; deletes the first, then the second, and the app is served by the
// process runtime again, where the same operations show the tenant what
// they showed on the fleet. The first cluster's files are gone, and no
// request to the app failed during the move or either deletion: Cluster
// API drains a worker only once the app moved (controllers/workerhook).
func TestMakeRunFleet(t *testing.T) {
	bin := platformtest.BuildBinaries(t, "bex-embedded", "bex-node")
	state := t.TempDir()
	dbURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	p := platformtest.Start(ctx, t, bin, state, dbURL)
	env := p.WaitEnv(ctx, t)
	op, err := apiclient.New(env["BEX_API"], env["BEX_OPERATOR_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	platformtest.WaitFleetReady(t, p)

	// The two newest pinned versions: the ones make test builds.
	versions := kubebin.KubeVersions()
	version := "v" + versions[len(versions)-2]
	start := time.Now()
	lc := platformtest.CreateLocalCluster(ctx, t, op, apiclient.CreateLocalClusterRequest{Name: "e2e-1", Version: version, ControlPlaneReplicas: 3, WorkerReplicas: 1})
	platformtest.WaitClusterHealthy(t, op, lc.Name, version, 3)
	t.Logf("three %s machines healthy %s after bex fleet create", version, time.Since(start).Round(time.Second))
	mgmt := platformtest.Client(t, env["BEX_KUBECONFIG"])
	workload := platformtest.WorkloadClient(t, mgmt, "e2e-1")
	worker := platformtest.WaitWorker(t, workload, time.Time{})
	t.Logf("its worker %s ready %s after bex fleet create", worker, time.Since(start).Round(time.Second))

	// A new app goes onto the cluster now that it has a worker (the
	// process runtime stands by): its instance is a Pod on the worker,
	// which the edge reaches.
	// The scheduler's view of the fleet follows the worker's Node by
	// watch: once it has it, local stands by.
	platformtest.WaitLocalStandby(t, mgmt, "e2e-1")
	start = time.Now()
	hello := pushNodeApp(t, env, "hello", "hello from the fleet")
	t.Logf("an app pushed and released in %s", time.Since(start).Round(time.Second))
	platformtest.ServedFrom(t, env, mgmt, "hello", "e2e-1", hello.body)
	pods, err := workload.CoreV1().Pods("dev").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != worker || pods.Items[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("the app's Pods on %s: %+v, want one running on %s", "e2e-1", podsOf(pods.Items), worker)
	}

	// The tenant's day-to-day operations on the app where it runs on the
	// fleet: an env change, logs, a rollback, a push; compared at the end
	// with the same on the process runtime.
	start = time.Now()
	onFleet := tenantOps(t, hello, "e2e-1", "the fleet", "hello again from the fleet")
	t.Logf("bex env set, logs, rollback and a push on %s in %s", "e2e-1", time.Since(start).Round(time.Second))
	platformtest.Eventually(t, time.Minute, "the app's Pods on e2e-1 all of v4", func(ctx context.Context) error {
		pods, err := workload.CoreV1().Pods("dev").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Labels["bex.co/release"] != "4" || pods.Items[0].Spec.NodeName != worker {
			return fmt.Errorf("%v", podsOf(pods.Items))
		}
		return nil
	})
	body := hello.body

	// bex upgrade plans over it as over any cluster of the fleet.
	next := "v" + versions[len(versions)-1]
	plan, err := op.PlanUpgrade(ctx, apiclient.UpgradePlanRequest{TargetVersion: next})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Stages) != 1 || len(plan.Stages[0].Clusters) != 1 || plan.Stages[0].Clusters[0].Name != lc.Name || len(plan.Refused) != 0 {
		t.Errorf("a plan to %s = %+v, want %s upgraded", next, plan, lc.Name)
	}

	// Something to find after the restart, in the cluster's own etcd.
	kept := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kept"}, Data: map[string]string{"run": "first"}}
	if _, err := workload.CoreV1().ConfigMaps("default").Create(ctx, kept, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	p.Interrupt(t)
	start = time.Now()
	p = platformtest.Start(ctx, t, bin, state, dbURL)
	env = p.WaitEnv(ctx, t)
	op, err = apiclient.New(env["BEX_API"], env["BEX_OPERATOR_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 5*time.Minute, "the cluster's apiserver serving again with what was written", func(ctx context.Context) error {
		got, err := workload.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Data["run"] != "first" {
			return fmt.Errorf("kept = %v", got.Data)
		}
		return nil
	})
	t.Logf("the cluster served again %s after the restart began", time.Since(start).Round(time.Second))
	platformtest.WaitFleetReady(t, p)
	platformtest.WaitClusterHealthy(t, op, lc.Name, version, 3)
	t.Logf("three machines healthy again %s after the restart began", time.Since(start).Round(time.Second))
	if again := platformtest.WaitWorker(t, workload, start); again != worker {
		t.Errorf("after the restart the worker is %s, was %s", again, worker)
	}
	t.Logf("its worker's node agent renewed its lease %s after the restart began", time.Since(start).Round(time.Second))
	platformtest.ServedFrom(t, env, mgmt, "hello", "e2e-1", body)
	t.Logf("the app served from the cluster again %s after the restart began", time.Since(start).Round(time.Second))

	// A second cluster: cordoning the first moves the app onto it, as the
	// App controller decides (a cordoned cluster takes no placement and
	// gives up its apps, and the process runtime stands by while a cluster
	// of the fleet can run the app): started there, switched at the edge,
	// then removed from the first, with no request failed.
	start = time.Now()
	lc2 := platformtest.CreateLocalCluster(ctx, t, op, apiclient.CreateLocalClusterRequest{Name: "e2e-2", Version: version, ControlPlaneReplicas: 3, WorkerReplicas: 1})
	platformtest.WaitClusterHealthy(t, op, lc2.Name, version, 3)
	workload2 := platformtest.WorkloadClient(t, mgmt, "e2e-2")
	worker2 := platformtest.WaitWorker(t, workload2, time.Time{})
	platformtest.WaitLocalStandby(t, mgmt, "e2e-2")
	t.Logf("a second cluster and its worker %s ready %s after bex fleet create", worker2, time.Since(start).Round(time.Second))

	// deleteCluster deletes the local cluster of lc, named name.
	deleteCluster := func(lc apiclient.LocalCluster, name string) {
		t.Helper()
		start := time.Now()
		requests := keepRequesting(ctx, t, env, "hello", body)
		if _, err := op.DeleteLocalCluster(ctx, name); err != nil {
			t.Fatal(err)
		}
		platformtest.Eventually(t, 5*time.Minute, "cluster "+name+" gone", func(ctx context.Context) error {
			fleet, err := op.ListFleet(ctx)
			if err != nil {
				return err
			}
			for _, c := range fleet {
				if c.Name == lc.Name {
					return fmt.Errorf("%s still listed with %d machines", c.Name, len(c.Machines))
				}
			}
			if _, err := os.Stat(filepath.Join(state, "fleet", "default", name)); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("its files remain: %v", err)
			}
			return nil
		})
		t.Logf("%s deleted in %s", name, time.Since(start).Round(time.Second))
		sent, failed := requests()
		t.Logf("%d requests to the app during the deletion of %s, %d failed", sent, name, len(failed))
		if len(failed) > 0 {
			t.Errorf("%d of %d requests to the app failed during the deletion of %s; the first: %v", len(failed), sent, name, failed[:min(len(failed), 5)])
		}
	}

	start = time.Now()
	requests := keepRequesting(ctx, t, env, "hello", body)
	if _, err := op.CordonCluster(ctx, "default", "e2e-1"); err != nil {
		t.Fatal(err)
	}
	platformtest.ServedFrom(t, env, mgmt, "hello", "e2e-2", body)
	platformtest.Eventually(t, 2*time.Minute, "the app gone from e2e-1", func(ctx context.Context) error {
		deps, err := workload.AppsV1().Deployments("dev").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(deps.Items) > 0 {
			return fmt.Errorf("%d Deployments left, the first %s", len(deps.Items), deps.Items[0].Name)
		}
		return nil
	})
	t.Logf("the app moved off the cordoned e2e-1 in %s", time.Since(start).Round(time.Second))
	sent, failed := requests()
	t.Logf("%d requests to the app during the move off the cordoned e2e-1, %d failed", sent, len(failed))
	if len(failed) > 0 {
		t.Errorf("%d of %d requests to the app failed during the move off the cordoned e2e-1; the first: %v", len(failed), sent, failed[:min(len(failed), 5)])
	}
	pods, err = workload2.CoreV1().Pods("dev").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != worker2 || pods.Items[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("the app's Pods on %s after the move: %+v, want one running on %s", "e2e-2", podsOf(pods.Items), worker2)
	}

	// The cordoned cluster goes with no app left on it; deleting the
	// second, which runs the app, brings it back to the process runtime.
	deleteCluster(lc, "e2e-1")
	platformtest.ServedFrom(t, env, mgmt, "hello", "e2e-2", body)
	deleteCluster(lc2, "e2e-2")
	platformtest.ServedFrom(t, env, mgmt, "hello", "local", body)

	// The same operations on the process runtime: what the tenant sees is
	// the same.
	start = time.Now()
	onLocal := tenantOps(t, hello, "local", "local", "hello again from local")
	t.Logf("bex env set, logs, rollback and a push on %s in %s", "local", time.Since(start).Round(time.Second))
	t.Logf("what the tenant saw on the fleet: %+v", onFleet)
	sameView(t, onFleet, onLocal)
	p.Interrupt(t)
}

// keepRequesting sends a request to the app every 100 ms until the
// returned function is called, which returns how many it sent and the
// failures.
func keepRequesting(ctx context.Context, t *testing.T, env map[string]string, name, body string) func() (int, []string) {
	t.Helper()
	apps := platformtest.AppClient(t, env)
	host := name + "-dev." + strings.Split(env["BEX_DOMAIN"], ":")[0]
	return platformtest.Meanwhile(ctx, 100*time.Millisecond, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		code, got, err := platformtest.GetApp(ctx, apps, host)
		if err != nil || code != http.StatusOK || got != body {
			return fmt.Errorf("%d %q %v", code, got, err)
		}
		return nil
	})
}

// podsOf describes pods for a failure message.
func podsOf(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, fmt.Sprintf("%s on %q %s", p.Name, p.Spec.NodeName, p.Status.Phase))
	}
	return out
}
