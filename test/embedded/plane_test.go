package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

const takenOver = "bex: the control plane is Cluster API's"

// TestManagedControlPlane runs make run with --managed-control-plane:
// once Cluster API's managers run, the cluster default/management (three
// LocalMachines that take the platform's plane over) serves the plane and
// its first kube-apiserver stops; the platform works on (a tenant's app is
// created), the cluster is the fleet's management cluster and cannot be
// deleted; after a restart on the same state directory the machines serve
// the plane again, its first kube-apiserver stops again, and the app is
// still there.
func TestManagedControlPlane(t *testing.T) {
	bin := platformtest.BuildBinaries(t, "bex-embedded", "bex-node")
	state := t.TempDir()
	dbURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	p := platformtest.Start(ctx, t, bin, state, dbURL, "--managed-control-plane")
	env := p.WaitEnv(ctx, t)
	start := time.Now()
	waitTakeover(t, p)
	t.Logf("the machines took the plane over %s after the platform was ready", time.Since(start).Round(time.Second))
	machines := checkPlaneServed(t, env["BEX_KUBECONFIG"])

	api, err := apiclient.New(env["BEX_API"], env["BEX_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateApp(ctx, apiclient.CreateAppRequest{Name: "site"}); err != nil {
		t.Fatalf("creating an app on the plane's machines: %v", err)
	}
	op, err := apiclient.New(env["BEX_API"], env["BEX_OPERATOR_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.DeleteLocalCluster(ctx, "management"); err == nil || !strings.Contains(err.Error(), "serves the platform's own control plane") {
		t.Errorf("deleting the cluster that serves the plane: %v, want a refusal", err)
	}

	// A restart: the first kube-apiserver serves until the machines do.
	p.Interrupt(t)
	p = platformtest.Start(ctx, t, bin, state, dbURL, "--managed-control-plane")
	env = p.WaitEnv(ctx, t)
	start = time.Now()
	waitTakeover(t, p)
	t.Logf("after a restart, the machines served the plane again %s after the platform was ready", time.Since(start).Round(time.Second))
	if again := checkPlaneServed(t, env["BEX_KUBECONFIG"]); !slices.Equal(again, machines) {
		t.Errorf("after the restart the plane is served by %v, before by %v: want the same machines", again, machines)
	}
	if _, err := api.GetApp(ctx, "site"); err != nil {
		t.Errorf("the app created before the restart: %v", err)
	}
}

// waitTakeover waits until the platform says the machines serve its plane.
func waitTakeover(t *testing.T, p *platformtest.Platform) {
	t.Helper()
	platformtest.Eventually(t, 12*time.Minute, "the machines to take the plane over", func(context.Context) error {
		out := p.Output()
		if strings.Contains(out, takenOver) {
			return nil
		}
		if i := strings.Index(out, "Cluster API did not take the control plane over"); i >= 0 {
			t.Fatalf("the takeover failed:\n%s", out[i:])
		}
		return errors.New("make run has not said the plane is Cluster API's")
	})
}

// checkPlaneServed checks that the cluster default/management is the
// fleet's management cluster, that it takes the plane over with three
// ready LocalMachines, and that their kube-apiservers are the plane's
// only ones (its identity leases); it returns the machines' names.
func checkPlaneServed(t *testing.T, kubeconfig string) []string {
	t.Helper()
	ctx := context.Background()
	mgmt := platformtest.Client(t, kubeconfig)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := &clusterv1.Cluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: "default", Name: "management"}, cl); err != nil {
		t.Fatal(err)
	}
	if cl.Labels[plan.ManagementLabel] != "true" {
		t.Errorf("cluster management's labels %v: want it marked the management cluster", cl.Labels)
	}
	lc := &infrav1.LocalCluster{}
	if err := mgmt.Get(ctx, client.ObjectKey{Namespace: "default", Name: "management"}, lc); err != nil {
		t.Fatal(err)
	}
	if lc.Spec.Plane != "management" {
		t.Errorf("LocalCluster management takes over plane %q, want management", lc.Spec.Plane)
	}
	var names []string
	platformtest.Eventually(t, 2*time.Minute, "three ready LocalMachines whose kube-apiservers alone serve the plane", func(ctx context.Context) error {
		var lms infrav1.LocalMachineList
		if err := mgmt.List(ctx, &lms, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: "management"}); err != nil {
			return err
		}
		names = nil
		for _, lm := range lms.Items {
			if err := platformtest.HasCondition(lm.Status.Conditions, infrav1.ReadyCondition, "True", ""); err != nil {
				return fmt.Errorf("LocalMachine %s: %w", lm.Name, err)
			}
			names = append(names, lm.Name)
		}
		leases, err := kube.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver"})
		if err != nil {
			return err
		}
		var hosts []string
		for _, l := range leases.Items {
			hosts = append(hosts, l.Labels["kubernetes.io/hostname"])
		}
		slices.Sort(names)
		slices.Sort(hosts)
		if len(names) != 3 || !slices.Equal(hosts, names) {
			return fmt.Errorf("LocalMachines %v, kube-apiservers %v", names, hosts)
		}
		return nil
	})
	return names
}
