package workload_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgeapp "bex.co/bex/cmd/bex-edge/app"
	"bex.co/bex/cmd/internal/workload"
	"bex.co/bex/controllers/scheme"
	capicrds "bex.co/bex/deploy/capi-crds"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/placed"
	"bex.co/bex/internal/runtime/runtimetest"
	"bex.co/bex/internal/store"
	"bex.co/bex/node"
	"bex.co/bex/node/nodetest"
)

// TestFourProcessesOnTwoClusters: a cluster install's four processes with
// --follow-placement, each built as its binary builds it (the git
// receiver's, web's and the controller manager's runtimes from
// workload.Options.NewRuntime, the edge's routing from bex-edge's
// Options.PlacedApps), each with its own connections, sharing only
// Postgres and the clusters, over two Cluster API workload clusters whose
// Pods run: a real apiserver, controller manager and scheduler each, and a
// bex-node running runc containers. The git receiver deploys an app placed
// on w1: it runs on w1's node, the edge sends its hostname's requests to
// w1's Pods, and web, which never deployed it, reads its status and the
// lines it printed on w1 and scales it there. The controller manager moves
// it to w2 while requests go through the edge every 20 to 50 ms: none
// fails; then the edge routes to w2's Pods, web reads the app on w2, w1 has
// no Deployment of it left, and Postgres names w2, where a runtime started
// after the move finds it.
func TestFourProcessesOnTwoClusters(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	began := time.Now()
	w1 := nodetest.Start(t, func(f *nodetest.Fixture, o *node.Options) { o.Keychain = f.Keychain() })
	// Both nodes pull from w1's registry, the platform's one registry.
	w2 := nodetest.Start(t, func(_ *nodetest.Fixture, o *node.Options) { o.Keychain = w1.Keychain() })
	mgmt := cptest.StartBare(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	if _, err := kubeapply.InstallCRDs(ctx, mgmt.RESTConfig(), capicrds.CRDs()); err != nil {
		t.Fatal(err)
	}
	sch := scheme.New()
	if err := clientgoscheme.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	mgmtClient := func() client.Client {
		t.Helper()
		c, err := client.New(mgmt.RESTConfig(), client.Options{Scheme: sch})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	kc := mgmtClient()
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}}
	for name, f := range map[string]*nodetest.Fixture{"w1": w1, "w2": w2} {
		kubeconfig, err := os.ReadFile(f.CP.KubeconfigPath())
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs,
			&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}, Spec: clusterv1.ClusterSpec{
				ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: name},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HetznerCluster", Name: name},
			}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name + "-kubeconfig"}, Data: map[string][]byte{placed.KubeconfigKey: kubeconfig}})
	}
	for _, obj := range objs {
		if err := kc.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	dbURL := pgtest.NewDatabase(t)
	openStore := func() *store.Store {
		t.Helper()
		st, err := store.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	st := openStore() // the test's own look at Postgres
	if _, err := st.CreateTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}

	// Each process: its own store, its own management cluster client, its
	// own runtime, from the options its binary's flags give.
	process := func(name string) *workload.Runtime {
		t.Helper()
		o := &workload.Options{
			WorkloadKubeconfig: mgmt.KubeconfigPath(), FollowPlacement: true, FleetNamespace: "fleet",
			Registry: w1.Registry, WorkDir: t.TempDir(), AppDomain: domain, ReleaseRetention: 3,
			Tenants: workload.TenantOptions{Prepared: true},
		}
		if errs := o.Validate(); len(errs) > 0 {
			t.Fatal(errors.Join(errs...))
		}
		rt, err := o.NewRuntime(ctx, openStore(), mgmtClient(), testr.New(t).WithName(name))
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	git, web, manager := process("git"), process("web"), process("controller-manager")
	eo := edgeapp.NewOptions()
	eo.FollowPlacement, eo.FleetNamespace = true, "fleet"
	routes, err := eo.PlacedApps(ctx, mgmt.RESTConfig(), nil, openStore(), testr.New(t).WithName("edge"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clusters, Postgres and the four processes up in %s", time.Since(began).Round(100*time.Millisecond))

	get := func(path string) (string, error) { return runtimetest.EdgeGet(routes, domain, tenant, shop, path) }
	rel := runtime.Release{
		Tenant: tenant, App: shop, Number: 1, Cluster: "w1", Image: w1.AppImage,
		Env:         map[string]string{runtimetest.EnvVersion: "v1"},
		Processes:   map[string]runtime.Process{runtime.WebProcess: {Replicas: 1}},
		HealthCheck: runtime.HealthCheck{Path: runtimetest.HealthPath, Interval: 200 * time.Millisecond, Timeout: 2 * time.Second},
	}
	deploy := func(rt *workload.Runtime, rel runtime.Release) string {
		t.Helper()
		var out strings.Builder
		start := time.Now()
		if err := rt.Driver.Deploy(ctx, rel, &out); err != nil {
			t.Fatalf("deploying on %s: %v\n%s", rel.Cluster, err, out.String())
		}
		t.Logf("deploy on %s took %s:\n%s", rel.Cluster, time.Since(start).Round(100*time.Millisecond), out.String())
		return out.String()
	}
	// checkOn checks that the app runs on cluster on alone, with want
	// instances: its Pods on on's node, none on off; the edge's upstreams
	// are on's Pod IPs and answer; rt (web's) reads the app's status
	// there, and the line the app printed there in its logs, not gone.
	checkOn := func(rt *workload.Runtime, on, off *nodetest.Fixture, cluster string, want int, line, gone string) {
		t.Helper()
		pods := runningPods(ctx, t, on)
		if len(pods) != want {
			t.Errorf("%s runs Pods %v of the app, want %d", cluster, pods, want)
		}
		if other := runningPods(ctx, t, off); len(other) > 0 {
			t.Errorf("the other cluster runs Pods %v of the app, want none", other)
		}
		// The edge's table follows the EndpointSlices a moment after the
		// deploy returned.
		var ups []string
		onPods := func() bool {
			ups = routes.Upstreams(tenant, shop)
			var hosts []string
			for _, u := range ups {
				host, _, _ := net.SplitHostPort(u)
				hosts = append(hosts, host)
			}
			return sameSet(hosts, slices.Collect(maps.Values(pods)))
		}
		for deadline := time.Now().Add(10 * time.Second); !onPods() && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		if c, _ := routes.Serving(tenant, shop); c != cluster || !onPods() {
			t.Errorf("the edge routes the app to cluster %q, upstreams %v; want %s, its Pods' IPs %v", c, ups, cluster, pods)
		}
		if body, err := get("/"); err != nil || strings.TrimSpace(body) != "v1" {
			t.Errorf("through the edge: %q %v, want v1", body, err)
		}
		status, err := rt.Driver.Status(ctx, tenant, shop)
		if err != nil {
			t.Fatalf("web's status of the app: %v", err)
		}
		var ids []string
		for _, in := range status.Instances {
			ids = append(ids, in.ID)
		}
		if status.Cluster != cluster || status.Release != 1 || !sameSet(ids, slices.Collect(maps.Keys(pods))) {
			t.Errorf("web reads the app on %q, release %d, instances %v; want %s, release 1, %s's Pods %v", status.Cluster, status.Release, ids, cluster, cluster, pods)
		}
		if _, err := get("/log?msg=" + url.QueryEscape(line)); err != nil {
			t.Fatalf("asking the app to print a line: %v", err)
		}
		var text []string
		deadline := time.Now().Add(20 * time.Second)
		for !slices.Contains(text, line) && time.Now().Before(deadline) {
			text = logText(ctx, t, rt)
			if !slices.Contains(text, line) {
				time.Sleep(200 * time.Millisecond)
			}
		}
		if !slices.Contains(text, line) || gone != "" && slices.Contains(text, gone) {
			t.Errorf("web reads the app's log lines %q; want %q (printed on %s) in them and not %q", text, line, cluster, gone)
		}
	}

	// 1. The git receiver deploys the app onto w1; the edge finds it.
	deploy(git, rel)
	waitServed := time.Now()
	for body, err := get("/"); err != nil || strings.TrimSpace(body) != "v1"; body, err = get("/") {
		if time.Since(waitServed) > 20*time.Second {
			t.Fatalf("the edge does not serve the app deployed on w1 after 20s: %q %v", body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the edge served the app %s after the deploy", time.Since(waitServed).Round(10*time.Millisecond))
	checkOn(web, w1, w2, "w1", 1, "printed on w1", "")
	// Web scales it, where it runs.
	rel.Processes = map[string]runtime.Process{runtime.WebProcess: {Replicas: 2}}
	deploy(web, rel)
	checkOn(web, w1, w2, "w1", 2, "printed on w1 again", "")

	// 2. The controller manager moves it to w2, as the App controller's
	// re-placement does, while requests go through the edge.
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20*time.Millisecond + rand.N(30*time.Millisecond)):
			}
			sent.Add(1)
			if body, err := get("/"); err != nil || strings.TrimSpace(body) != "v1" {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("%q %v", body, err))
			}
		}
	}()
	moved := rel
	moved.Cluster = "w2"
	time.Sleep(500 * time.Millisecond)
	out := deploy(manager, moved)
	// The old Pods drain on w1 meanwhile: requests still come.
	time.Sleep(time.Second)
	close(stop)
	<-done
	t.Logf("%d requests through the edge during the move", sent.Load())
	if n := failed.Load(); n > 0 || sent.Load() == 0 {
		t.Errorf("%d of %d requests failed during the move, first: %v", n, sent.Load(), firstErr.Load())
	}
	if !strings.Contains(out, "Moving from cluster w1 to w2") || !strings.Contains(out, "Removed from cluster w1") {
		t.Errorf("the move's output does not say it moved from w1 and removed the app there:\n%s", out)
	}
	checkOn(web, w2, w1, "w2", 2, "printed on w2", "printed on w1")
	deps, err := w1.Admin.AppsV1().Deployments(tenant).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) > 0 {
		t.Errorf("w1 keeps %d Deployments of the tenant after the move (%s), want none", len(deps.Items), deps.Items[0].Name)
	}
	if c, ok, err := st.ServingCluster(ctx, tenant, shop); err != nil || !ok || c != "w2" {
		t.Errorf("Postgres says %q (%v, %v) serves the app, want w2", c, ok, err)
	}

	// 3. A process started after the move (web again, restarted) knows
	// only what Postgres says: the app runs on w2.
	later := process("web-restarted")
	status, err := later.Driver.Status(ctx, tenant, shop)
	if err != nil || status.Cluster != "w2" || len(status.Instances) != 2 {
		t.Errorf("a runtime started after the move reads the app on %q with %d instances (%v), want w2 with 2", status.Cluster, len(status.Instances), err)
	}
	t.Logf("%s for the whole test", time.Since(began).Round(100*time.Millisecond))
}

const (
	shop   = "shop"
	domain = "apps.example.test"
)

// runningPods returns the tenant's Pods f's node runs, not being deleted,
// by name, with their IPs.
func runningPods(ctx context.Context, t *testing.T, f *nodetest.Fixture) map[string]string {
	t.Helper()
	list, err := f.Admin.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		if p.Spec.NodeName == nodetest.NodeName && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			out[p.Name] = p.Status.PodIP
		}
	}
	return out
}

// logText returns the text of the app's last log lines as rt reads them.
func logText(ctx context.Context, t *testing.T, rt *workload.Runtime) []string {
	t.Helper()
	lines, err := rt.Driver.Logs(ctx, tenant, shop, 200, false)
	if err != nil {
		t.Fatalf("web's logs of the app: %v", err)
	}
	var text []string
	for l := range lines {
		text = append(text, l.Text)
	}
	return text
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
