package app_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/cmd/bex-controller-manager/app"
	"bex.co/bex/cmd/internal/cmdtest"
	capicrds "bex.co/bex/deploy/capi-crds"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/test/platformtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestCommandLine: an unknown flag and a bad value are refused with exit
// code 2 and a message naming the flag.
func TestCommandLine(t *testing.T) {
	bin := cmdtest.Build(t, "bex-controller-manager")
	out, code := cmdtest.Run(t, bin, nil, "--leader-election")
	if code != 2 || !strings.Contains(out, "unknown flag: --leader-election") {
		t.Errorf("unknown flag: exit %d, output:\n%s", code, out)
	}
	out, code = cmdtest.Run(t, bin, []string{"BEX_DATABASE_URL=postgres://x@127.0.0.1:1/x"},
		"--registry", "127.0.0.1:5000", "--app-domain", "apps.example.test", "--edge-address", "edge.example.test")
	if code != 2 || !strings.Contains(out, `--edge-address "edge.example.test" is not an IP address`) {
		t.Errorf("bad --edge-address: exit %d, output:\n%s", code, out)
	}
}

// holder returns the leader election Lease's holder, and an error while
// there is none.
func holder(ctx context.Context, cs kubernetes.Interface, ns string) (string, error) {
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, app.DefaultLeaderElectionID, metav1.GetOptions{})
	switch {
	case err != nil:
		return "", err
	case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "":
		return "", errors.New("the Lease has no holder")
	}
	return *l.Spec.HolderIdentity, nil
}

// reconciled waits until the App controller has written the App's status
// for its generation, with its finalizer on.
func reconciled(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	platformtest.Eventually(t, 3*time.Minute, "App "+name+" to be reconciled", func(ctx context.Context) error {
		var app platformv1alpha1.App
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &app); err != nil {
			return err
		}
		switch {
		case app.Status.ObservedGeneration != app.Generation:
			return fmt.Errorf("status observed generation %d, the App is at %d", app.Status.ObservedGeneration, app.Generation)
		case len(app.Status.Conditions) == 0:
			return errors.New("no conditions in its status")
		case !controllerutil.ContainsFinalizer(&app, platformv1alpha1.AppFinalizer):
			return fmt.Errorf("finalizers %v, without %s", app.Finalizers, platformv1alpha1.AppFinalizer)
		}
		return nil
	})
}

// TestLeaderElection runs two bex-controller-managers against a real
// kube-apiserver (with Cluster API's CRDs, so FleetUpgrades run too) and
// Postgres. The first takes the Lease under its identity (host name and a
// UID) and reconciles an App; the second serves its probes but waits; when
// the first is interrupted it gives the Lease up and the second takes it
// and reconciles the next App.
func TestLeaderElection(t *testing.T) {
	bin := cmdtest.Build(t, "bex-controller-manager")
	cp := cptest.Start(t)
	// Binaries built and the control plane up, the test itself is quick.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := kubeapply.InstallCRDs(ctx, cp.RESTConfig(), capicrds.CRDs()); err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.NewDatabase(t)
	kube := platformtest.Client(t, cp.KubeconfigPath())
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"bex-system", "acme"} {
		if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	start := func() (*cmdtest.Proc, string, string) {
		addrs := cmdtest.Addrs(t, 2)
		health, metrics := addrs[0], addrs[1]
		p := cmdtest.Start(t, bin, []string{"DATABASE_URL=", "BEX_DATABASE_URL=" + dbURL},
			"--kubeconfig", cp.KubeconfigPath(), "--workload-kubeconfig", cp.KubeconfigPath(),
			"--leader-elect", "--leader-election-namespace", "bex-system",
			"--health-probe-bind-address", health, "--metrics-bind-address", metrics,
			"--schedule=false", "--work-dir", t.TempDir(), "--registry", "127.0.0.1:5000",
			"--app-domain", "apps.example.test", "--edge-address", "203.0.113.7")
		p.WaitOK(t, 3*time.Minute, "http://"+health+"/readyz")
		return p, health, metrics
	}

	first, _, metrics := start()
	var firstID string
	platformtest.Eventually(t, 3*time.Minute, "the first manager to hold the Lease", func(ctx context.Context) (err error) {
		firstID, err = holder(ctx, cs, "bex-system")
		return err
	})
	host, _ := os.Hostname()
	if !strings.HasPrefix(firstID, host+"_") {
		t.Errorf("Lease holder %q, want the manager's identity %s_<uid>", firstID, host)
	}
	if err := kube.Create(ctx, &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "one"}}); err != nil {
		t.Fatal(err)
	}
	reconciled(t, kube, "acme", "one")
	if code, body, err := cmdtest.Get(ctx, "http://"+metrics+"/metrics", ""); err != nil || code != 200 ||
		!strings.Contains(body, `controller_runtime_reconcile_total{controller="app"`) {
		t.Errorf("GET /metrics: %d %v, no reconcile count of the app controller", code, err)
	}
	// The leader reads the workload cluster's instances for the runtime's
	// metrics, without a failed read; a replica that waits reports none, or
	// each replica would count the same restarts.
	const restarts = `bex_runtime_restarts_total{driver="kube"} 0`
	if code, body, err := cmdtest.Get(ctx, "http://"+metrics+"/metrics", ""); err != nil || code != 200 ||
		!strings.Contains(body, restarts) || !strings.Contains(body, `bex_runtime_instances{driver="kube",state="Running"} 0`) ||
		!strings.Contains(body, `bex_runtime_read_errors_total{driver="kube"} 0`) {
		t.Errorf("GET /metrics of the leader: %d %v, without the runtime's metrics (%s)", code, err, restarts)
	}

	_, _, secondMetrics := start()
	if h, err := holder(ctx, cs, "bex-system"); h != firstID {
		t.Fatalf("Lease holder %q (%v) after the second manager started, want the first's %q", h, err, firstID)
	}
	if code, body, err := cmdtest.Get(ctx, "http://"+secondMetrics+"/metrics", ""); err != nil || code != 200 ||
		strings.Contains(body, "bex_runtime_instances{") {
		t.Errorf("GET /metrics of the replica that waits: %d %v; want it served, without bex_runtime_instances", code, err)
	}
	first.Stop(t)
	var secondID string
	platformtest.Eventually(t, 3*time.Minute, "the second manager to take the Lease", func(ctx context.Context) (err error) {
		if secondID, err = holder(ctx, cs, "bex-system"); err == nil && secondID == firstID {
			err = fmt.Errorf("the first manager %s still holds it", firstID)
		}
		return err
	})
	if !strings.HasPrefix(secondID, host+"_") {
		t.Errorf("Lease holder %q, want the second manager's identity", secondID)
	}
	if err := kube.Create(ctx, &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "two"}}); err != nil {
		t.Fatal(err)
	}
	reconciled(t, kube, "acme", "two")
}
