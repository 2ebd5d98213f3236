package workload_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/cmd/internal/workload"
	"bex.co/bex/controllers/scheme"
	capicrds "bex.co/bex/deploy/capi-crds"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/kube"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const tenant = "acme"

// TestRuntimeFollowsPlacement: with --follow-placement a cluster install's
// runtime deploys each app on the cluster its release names: a Cluster API
// cluster of the management cluster, through its <cluster>-kubeconfig
// Secret (its tenant namespace prepared there, though the workload
// cluster's are only checked), or --workload-cluster, the
// --workload-kubeconfig one; another process's runtime reads an app where
// the shared record says it runs. Without the flag, an app placed on the
// Cluster API cluster still lands on --workload-kubeconfig's.
func TestRuntimeFollowsPlacement(t *testing.T) {
	mgmt, w1 := cptest.StartBare(t), cptest.StartBare(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, err := kubeapply.InstallCRDs(ctx, mgmt.RESTConfig(), capicrds.CRDs()); err != nil {
		t.Fatal(err)
	}
	sch := scheme.New()
	if err := clientgoscheme.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(mgmt.RESTConfig(), client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	w1c, err := client.New(w1.RESTConfig(), client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := os.ReadFile(w1.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "w1"}, Spec: clusterv1.ClusterSpec{
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "w1"},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HetznerCluster", Name: "w1"},
		}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "w1-kubeconfig"}, Data: map[string][]byte{"value": kubeconfig}},
	} {
		if err := kc.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.Open(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.CreateTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	options := func(follow bool) *workload.Options {
		o := &workload.Options{
			WorkloadKubeconfig: mgmt.KubeconfigPath(), FollowPlacement: follow,
			Registry: "127.0.0.1:5000", WorkDir: t.TempDir(), AppDomain: "apps.example.test", ReleaseRetention: 3,
			Tenants: workload.TenantOptions{Prepared: true},
		}
		if follow {
			o.WorkloadCluster, o.FleetNamespace = "main", "fleet"
		}
		if errs := o.Validate(); len(errs) > 0 {
			t.Fatal(errors.Join(errs...))
		}
		return o
	}
	newRuntime := func(o *workload.Options) *workload.Runtime {
		rt, err := o.NewRuntime(ctx, st, kc, testr.New(t))
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	git, web := newRuntime(options(true)), newRuntime(options(true))
	// The workload cluster's tenant namespace, as the controller manager
	// prepares it (the runtimes above only check it).
	if err := git.Workload.PrepareNamespace(ctx, tenant); err != nil {
		t.Fatal(err)
	}

	// Where a deploy starts an app: no Pod ever runs here (no controller
	// manager), so each deploy is seen starting, then given up.
	landsOn := func(rt *workload.Runtime, app, cluster string) (onMgmt, onW1 bool) {
		t.Helper()
		rel := runtime.Release{
			Tenant: tenant, App: app, Number: 1, Cluster: cluster, Image: "127.0.0.1:5000/acme/" + app + ":1",
			Processes: map[string]runtime.Process{runtime.WebProcess: {Replicas: 1, Command: "./app"}},
		}
		dctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		var out platformtest.SyncBuffer
		go func() { done <- rt.Driver.Deploy(dctx, rel, &out) }()
		defer func() { stop(); <-done }()
		key := client.ObjectKey{Namespace: tenant, Name: app + "-web"}
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			var dep appsv1.Deployment
			onMgmt = kc.Get(ctx, key, &dep) == nil
			onW1 = w1c.Get(ctx, key, &dep) == nil
			if onMgmt || onW1 {
				return onMgmt, onW1
			}
			select {
			case err := <-done:
				done <- err // for the deferred wait
				t.Fatalf("deploying %s on %s: %v\n%s", app, cluster, err, out.String())
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatalf("no Deployment of %s on either cluster after 30s; the deploy says:\n%s", app, out.String())
		return false, false
	}
	if onMgmt, onW1 := landsOn(git, "shop", "w1"); onMgmt || !onW1 {
		t.Errorf("an app placed on w1 starts on the management cluster %v, on w1 %v; want w1 only", onMgmt, onW1)
	}
	var ns corev1.Namespace
	if err := w1c.Get(ctx, client.ObjectKey{Name: tenant}, &ns); err != nil || ns.Labels[kube.LabelTenant] != tenant {
		t.Errorf("tenant namespace on w1: %v %v, want one prepared for the tenant", ns.Labels, err)
	}
	if onMgmt, onW1 := landsOn(git, "blog", "main"); !onMgmt || onW1 {
		t.Errorf("an app placed on main starts on the management cluster %v, on w1 %v; want main only", onMgmt, onW1)
	}

	// An app the shared record says w1 serves: web's runtime, which never
	// deployed it, reads it there.
	if err := st.SetServingCluster(ctx, tenant, "shop", "w1"); err != nil {
		t.Fatal(err)
	}
	if _, err := web.Driver.Status(ctx, tenant, "shop"); err == nil || !errors.Is(err, runtime.ErrNotFound) {
		// Nothing runs it after the given-up deploy: not found, on w1.
		t.Fatalf("status of shop: %v, want not found", err)
	}
	if st, _ := web.Driver.Status(ctx, tenant, "shop"); st.Cluster != "w1" {
		t.Errorf("web reads shop on cluster %q, want w1", st.Cluster)
	}

	// Without --follow-placement, one cluster for every app.
	single := newRuntime(options(false))
	if onMgmt, onW1 := landsOn(single, "docs", "w1"); !onMgmt || onW1 {
		t.Errorf("without --follow-placement an app placed on w1 starts on the management cluster %v, on w1 %v; want the management cluster", onMgmt, onW1)
	}
}

// TestFlags: --workload-cluster and --fleet-namespace without
// --follow-placement are refused, saying why.
func TestFlags(t *testing.T) {
	o := &workload.Options{Registry: "127.0.0.1:5000", WorkDir: "/tmp", AppDomain: "apps.example.test", ReleaseRetention: 3, WorkloadCluster: "main", FleetNamespace: "fleet",
		RuntimeKubeconfigs: "bex-system/bex-runtime-kubeconfigs"}
	errs := o.Validate()
	if len(errs) != 3 || errs[0].Error() != "--workload-cluster needs --follow-placement: without it every app runs on --workload-kubeconfig's cluster" ||
		errs[1].Error() != "--fleet-namespace needs --follow-placement: without it no Cluster API cluster is read" ||
		errs[2].Error() != "--runtime-kubeconfigs-secret needs --follow-placement: without it no Cluster API cluster is read" {
		t.Fatalf("errors: %v", errs)
	}
	o.FollowPlacement = true
	if errs := o.Validate(); len(errs) != 0 {
		t.Fatalf("errors with --follow-placement: %v", errs)
	}
	for _, bad := range []string{"bex-runtime-kubeconfigs", "bex-system/", "/name", "Bex/name", "ns/a/b"} {
		o.RuntimeKubeconfigs = bad
		if errs := o.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "want NAMESPACE/NAME of a Secret") {
			t.Errorf("--runtime-kubeconfigs-secret %q: %v", bad, errs)
		}
	}
}
