package platformtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/web/api/apiclient"
)

// LockBlocks takes the machine-wide lock on picking the local fleet's
// address blocks, waiting for another test process that holds it. A block
// is free until the cluster's load balancer listens in it, so two test
// processes that create a cluster at the same moment would otherwise pick
// the same one.
func LockBlocks(t testing.TB) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "bex-localfleet-blocks.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("locking the address blocks: %v", err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
}

// CreateLocalCluster creates a cluster of the platform's local fleet
// through op (an operator's client), as bex fleet create does, and
// returns once its load balancer listens, holding LockBlocks meanwhile.
func CreateLocalCluster(ctx context.Context, t testing.TB, op *apiclient.Client, req apiclient.CreateLocalClusterRequest) apiclient.LocalCluster {
	t.Helper()
	unlock := LockBlocks(t)
	defer unlock()
	lc, err := op.CreateLocalCluster(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 2*time.Minute, "the load balancer of "+lc.Name+" to listen on "+lc.Endpoint, func(ctx context.Context) error {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", lc.Endpoint)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	return lc
}

// WaitFleetReady waits until the platform says its local fleet is ready.
func WaitFleetReady(t testing.TB, p *Platform) {
	t.Helper()
	Eventually(t, 10*time.Minute, "the local fleet ready", func(context.Context) error {
		out := p.Output()
		if strings.Contains(out, "bex: local fleet ready") {
			return nil
		}
		if strings.Contains(out, "the local fleet did not start") {
			t.Fatalf("the local fleet did not start:\n%s", out)
		}
		return errors.New("make run has not printed \"local fleet ready\"")
	})
}

// WaitClusterHealthy waits until the fleet lists the cluster name with n
// control-plane machines, all healthy at version and none being deleted.
func WaitClusterHealthy(t testing.TB, op *apiclient.Client, name, version string, n int) {
	t.Helper()
	Eventually(t, 10*time.Minute, fmt.Sprintf("%s with %d healthy machines", name, n), func(ctx context.Context) error {
		fleet, err := op.ListFleet(ctx)
		if err != nil {
			return err
		}
		for _, c := range fleet {
			if c.Name != name {
				continue
			}
			healthy := 0
			for _, m := range c.Machines {
				if m.Healthy && m.Version == version && !m.Deleting {
					healthy++
				}
			}
			if healthy != n || len(c.Machines) != n {
				return fmt.Errorf("%d machines, %d healthy at %s: %+v", len(c.Machines), healthy, version, c.Machines)
			}
			return nil
		}
		return fmt.Errorf("%s not listed", name)
	})
}

// WaitWorker waits until the cluster has one worker Node, ready, whose
// node agent renewed its Lease after since, and returns its name.
func WaitWorker(t testing.TB, workload kubernetes.Interface, since time.Time) string {
	t.Helper()
	return WaitWorkers(t, workload, since, 1)[0]
}

// WaitWorkers waits until the cluster has n worker Nodes, each ready and
// with a Lease its node agent renewed after since, and returns their
// names.
func WaitWorkers(t testing.TB, workload kubernetes.Interface, since time.Time, n int) []string {
	t.Helper()
	var names []string
	Eventually(t, 5*time.Minute, fmt.Sprintf("%d ready worker Nodes", n), func(ctx context.Context) error {
		nodes, err := workload.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!node-role.kubernetes.io/control-plane"})
		if err != nil {
			return err
		}
		if len(nodes.Items) != n {
			return fmt.Errorf("%d worker Nodes", len(nodes.Items))
		}
		names = names[:0]
		for _, n := range nodes.Items {
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}
			if !ready {
				return fmt.Errorf("worker Node %s is not ready", n.Name)
			}
			lease, err := workload.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(since) {
				return fmt.Errorf("worker %s's lease last renewed %v", n.Name, lease.Spec.RenewTime)
			}
			names = append(names, n.Name)
		}
		return nil
	})
	return names
}

// WorkloadClient returns a client of a local cluster (namespace default)
// from Cluster API's <cluster>-kubeconfig Secret.
func WorkloadClient(t testing.TB, mgmt client.Client, name string) kubernetes.Interface {
	t.Helper()
	s := &corev1.Secret{}
	if err := mgmt.Get(context.Background(), client.ObjectKey{Namespace: apiclient.LocalClusterNamespace, Name: name + "-kubeconfig"}, s); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// WaitLocalStandby waits until the scheduler's view of the fleet has the
// platform's process runtime, the static cluster local, on standby because
// of cluster (which has a ready worker): new apps go to the fleet.
func WaitLocalStandby(t testing.TB, mgmt client.Client, cluster string) {
	t.Helper()
	Eventually(t, 2*time.Minute, "the local cluster on standby", func(ctx context.Context) error {
		cc := &schedulingv1alpha1.ClusterCapacity{}
		if err := mgmt.Get(ctx, client.ObjectKey{Name: "local"}, cc); err != nil {
			return err
		}
		if cc.Status.Reason != schedulingv1alpha1.ReasonStandby || !strings.Contains(cc.Status.Message, cluster) {
			return fmt.Errorf("local: %s: %s", cc.Status.Reason, cc.Status.Message)
		}
		return nil
	})
}

// ServedFrom waits until the dev tenant's app runs on cluster (the App's
// status.cluster, the runtime's ledger) and answers body through the edge.
func ServedFrom(t testing.TB, env map[string]string, mgmt client.Client, name, cluster, body string) {
	t.Helper()
	apps := AppClient(t, env)
	host := name + "-dev." + strings.Split(env["BEX_DOMAIN"], ":")[0]
	Eventually(t, 5*time.Minute, fmt.Sprintf("%s served from cluster %s", name, cluster), func(ctx context.Context) error {
		app := &platformv1alpha1.App{}
		if err := mgmt.Get(ctx, client.ObjectKey{Namespace: "dev", Name: name}, app); err != nil {
			return err
		}
		if app.Status.Cluster != cluster {
			return fmt.Errorf("placed on %q", app.Status.Cluster)
		}
		if err := HasCondition(app.Status.Conditions, platformv1alpha1.AppReadyCondition, metav1.ConditionTrue, ""); err != nil {
			return err
		}
		code, got, err := GetApp(ctx, apps, host)
		if err != nil || code != http.StatusOK || got != body {
			return fmt.Errorf("GET https://%s/ = %d %q %v", host, code, got, err)
		}
		return nil
	})
}
