package dashboard_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/upgrade/preflight"
	"bex.co/bex/internal/upgrade/verify"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard"
)

// TestOperatorConsole: an operator sees the fleet with its machines'
// versions and MVP wired, watches a running fleet upgrade's timeline grow
// in the open page, and pauses it from the page; a tenant is refused the
// console.
//
// The upgrade is the real FleetUpgrade controller with the real verifier
// and Postgres records. The workload cluster's three control-plane
// machines all point at the test's real apiserver, and a small simulator
// plays KubeadmControlPlane's maxSurge-0 rollout (no machine is built).
func TestOperatorConsole(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := apitest.Start(t, cp)
	sim := newCluster(t, ctx, e.Kube, cp, "fleet", "prod", "v1.36.3")
	startController(t, ctx, cp, e)
	// The first machine is replaced while the page is open; the second
	// waits until the operator has paused, so that the pause lands in a
	// running rollout however slow the machine is.
	sim.hold(1)
	go sim.run(ctx)

	key := make([]byte, 32)
	rand.Read(key)
	d, err := dashboard.New(dashboard.Options{API: e.URL, CookieKey: key, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(d.Handler())
	t.Cleanup(web.Close)
	b := newBrowser(t)

	if st := b.signIn(web.URL, e.OperatorToken); st != 200 || b.location() != web.URL+"/console" {
		t.Fatalf("an operator signing in: status %d at %s, want the console", st, b.location())
	}
	row := b.text(`tr[data-cluster="fleet/prod"]`)
	for _, want := range []string{"v1.36.3 · 3 replicas · maxSurge 0", "prod-cp-1 v1.36.3", "prod-cp-3 v1.36.3", "wired"} {
		if !strings.Contains(row, want) {
			t.Errorf("the fleet row lacks %q: %q", want, row)
		}
	}

	op, err := apiclient.New(e.URL, e.OperatorToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.CreateUpgrade(ctx, apiclient.CreateUpgradeRequest{Name: "to-137", TargetVersion: "v1.37.2"}); err != nil {
		t.Fatal(err)
	}
	b.open(web.URL + "/console")
	if st := b.clickAndLoad("opening the upgrade", `a[href="/console/upgrades/to-137"]`); st != 200 {
		t.Fatalf("the upgrade page: status %d", st)
	}
	eval[bool](b, "window.__sameDocument = true")
	countJS := `document.querySelectorAll("#timeline rect.probe").length`
	segJS := `Array.from(document.querySelectorAll("#timeline rect.segment title")).map(t => t.textContent).join("|")`
	first := eval[int](b, countJS)
	// The controller replaces a machine, verifies all three apiservers,
	// and so on: the open page shows more rounds and the new version.
	b.waitFor("the timeline to show a new version and more verifier rounds", fmt.Sprintf(
		`%s > %d && %s.includes("v1.37.2")`, countJS, first, segJS), 4*time.Minute)
	if !eval[bool](b, "window.__sameDocument === true") {
		t.Fatal("the page was reloaded: the timeline did not update in place")
	}
	if outcomes := eval[string](b, `Array.from(document.querySelectorAll("#timeline rect.probe")).map(r => r.getAttribute("class")).join(" ")`); !strings.Contains(outcomes, "probe-ServedLocally") {
		t.Errorf("probe marks = %q, want ServedLocally ones", outcomes)
	}

	if st := b.clickAndLoad("pausing", "#pause"); st != 200 {
		t.Fatalf("pausing: status %d", st)
	}
	fu := &fleetv1.FleetUpgrade{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Name: "to-137"}, fu); err != nil {
		t.Fatal(err)
	}
	if !fu.Spec.Paused {
		t.Fatal("the Pause button did not pause the FleetUpgrade")
	}
	sim.release()
	if b.text("#held") == "" || eval[int](b, `document.querySelectorAll("#resume").length`) != 1 {
		t.Errorf("the page after pausing: %q", b.text("main"))
	}
	b.waitFor("the controller to report the pause", `document.querySelector("#phase").innerText === "Paused"`, 2*time.Minute)
	b.screenshot("console-upgrade-paused")
	// Each replacement machine's join is one step in the records and on
	// the page.
	if machines := eval[[]string](b, `Array.from(document.querySelectorAll("#steps tr")).map(r => r.cells[2].innerText).filter(s => s.startsWith("machine "))`); len(machines) == 0 || len(machines) != len(slices.Compact(slices.Sorted(slices.Values(machines)))) {
		t.Errorf("machine steps on the page = %q, want each machine once", machines)
	}

	// The audit log shows the operator's pause.
	b.open(web.URL + "/console/audit?action=upgrade.pause")
	if got := b.text("#audit"); !strings.Contains(got, "to-137") {
		t.Errorf("the audit log lacks the pause: %q", got)
	}
	b.screenshot("console-audit")

	// A tenant gets 403 on every console page.
	_, tenantToken := e.TenantToken(t, "curious")
	b.signOut()
	b.signIn(web.URL, tenantToken)
	for _, path := range []string{"/console", "/console/upgrades/to-137", "/console/audit"} {
		if st := b.open(web.URL + path); st != 403 {
			t.Errorf("a tenant opening %s: status %d, want 403", path, st)
		}
	}
}

// startController runs the FleetUpgrade controller with the real verifier
// and the store's records.
func startController(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, e *apitest.Env) {
	t.Helper()
	mgr, err := ctrl.NewManager(cp.RESTConfig(), ctrl.Options{
		Scheme: controllers.NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bex-verify"}}); err != nil {
		t.Fatal(err)
	}
	r := &fleetupgrade.Reconciler{
		Client:   mgr.GetClient(),
		Verifier: fleetupgrade.RunVerifier{Options: verify.Options{CRDs: []verify.CRDProbe{verify.AppProbe()}, Namespace: "bex-verify"}},
		Records:  e.Store,
		Events:   mgr.GetEventRecorder(fleetupgrade.ControllerName),
		Options:  fleetupgrade.Options{PollInterval: time.Second, VerifyRetryInterval: time.Second},
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mctx) }()
	t.Cleanup(func() { stop(); <-done })
}

// simCluster is a workload cluster whose control plane the test plays:
// while the Cluster is not paused and a machine runs another version than
// the KubeadmControlPlane, it deletes the oldest such machine and creates
// its replacement, which joins at once; it waits settle after a join, as
// KCP waits for the new machine to be healthy. After holdAfter
// replacements (0: never) it starts no other until release, so that a test
// can act while the rollout is certainly under way.
type simCluster struct {
	t        *testing.T
	c        client.Client
	ns, name string
	// address is every machine's InternalIP: the test apiserver's.
	address string
	settle  time.Duration

	mu         sync.Mutex
	next       int
	lastJoined time.Time
	replaced   int
	holdAfter  int
	released   bool
}

// hold makes the simulator start no replacement after the n-th until
// release.
func (s *simCluster) hold(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdAfter = n
}

// release lets the simulator go on replacing machines.
func (s *simCluster) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = true
}

// newCluster creates the Cluster, a KubeadmControlPlane of three at ver
// with MVP wired and maxSurge 0, its kubeconfig Secret (the admin
// credentials of cp) and three joined Machines addressed at cp.
func newCluster(t *testing.T, ctx context.Context, c client.Client, cp *controlplane.ControlPlane, ns, name, ver string) *simCluster {
	t.Helper()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	host, port := splitHostPort(t, cp.Endpoint())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef:      clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: name},
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: host, Port: port},
		},
	}
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To[int32](3),
			Version:  ver,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HCloudMachineTemplate", Name: name},
			}},
			Rollout: controlplanev1.KubeadmControlPlaneRolloutSpec{Strategy: controlplanev1.KubeadmControlPlaneRolloutStrategy{
				Type:          controlplanev1.RollingUpdateStrategyType,
				RollingUpdate: controlplanev1.KubeadmControlPlaneRolloutStrategyRollingUpdate{MaxSurge: ptr.To(intstr.FromInt32(0))},
			}},
		},
	}
	kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs = preflight.WireMVPPatch(kcp, ver, true)
	kubeconfig, err := os.ReadFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig"}, Data: map[string][]byte{"value": kubeconfig}}
	for _, obj := range []client.Object{cluster, kcp, secret} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
	s := &simCluster{t: t, c: c, ns: ns, name: name, address: host, settle: 1500 * time.Millisecond}
	for range 3 {
		if err := s.createMachine(ctx, ver); err != nil {
			t.Fatal(err)
		}
	}
	s.lastJoined = time.Time{}
	if err := s.updateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *simCluster) createMachine(ctx context.Context, ver string) error {
	s.mu.Lock()
	s.next++
	name := fmt.Sprintf("%s-cp-%d", s.name, s.next)
	s.mu.Unlock()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name, Labels: map[string]string{
			clusterv1.MachineControlPlaneLabel: "", clusterv1.MachineControlPlaneNameLabel: s.name, clusterv1.ClusterNameLabel: s.name}},
		Spec: clusterv1.MachineSpec{
			ClusterName: s.name, Version: ver, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "HCloudMachine", Name: name},
		},
	}
	if err := s.c.Create(ctx, m); err != nil {
		return err
	}
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: name}
	m.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineHostName, Address: name}, {Type: clusterv1.MachineInternalIP, Address: s.address}}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: controlplanev1.KubeadmControlPlaneMachineAPIServerPodHealthyCondition, Status: metav1.ConditionTrue, Reason: "PodHealthy"})
	if err := s.c.Status().Update(ctx, m); err != nil {
		return err
	}
	s.mu.Lock()
	s.lastJoined = time.Now()
	s.mu.Unlock()
	return nil
}

func (s *simCluster) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := s.step(ctx); err != nil && ctx.Err() == nil {
			s.t.Logf("control-plane simulator: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *simCluster) step(ctx context.Context) error {
	cluster := &clusterv1.Cluster{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.name}, cluster); err != nil {
		return err
	}
	if ptr.Deref(cluster.Spec.Paused, false) {
		return s.updateStatus(ctx)
	}
	kcp, machines, err := s.observe(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	settled := time.Since(s.lastJoined) >= s.settle
	held := s.holdAfter > 0 && s.replaced >= s.holdAfter && !s.released
	s.mu.Unlock()
	i := slices.IndexFunc(machines, func(m clusterv1.Machine) bool { return m.Spec.Version != kcp.Spec.Version })
	if i >= 0 && len(machines) == 3 && settled && !held {
		if err := s.c.Delete(ctx, &machines[i]); err != nil {
			return err
		}
		if err := s.createMachine(ctx, kcp.Spec.Version); err != nil {
			return err
		}
		s.mu.Lock()
		s.replaced++
		s.mu.Unlock()
	}
	return s.updateStatus(ctx)
}

func (s *simCluster) observe(ctx context.Context) (*controlplanev1.KubeadmControlPlane, []clusterv1.Machine, error) {
	return platformtest.ControlPlane(ctx, s.c, s.ns, s.name)
}

func (s *simCluster) updateStatus(ctx context.Context) error {
	return platformtest.WriteControlPlaneStatus(ctx, s.c, s.ns, s.name)
}

func splitHostPort(t *testing.T, endpoint string) (string, int32) {
	t.Helper()
	var host string
	var port int32
	rest := strings.TrimPrefix(endpoint, "https://")
	i := strings.LastIndex(rest, ":")
	if i < 0 {
		t.Fatalf("endpoint %q has no port", endpoint)
	}
	host = rest[:i]
	if _, err := fmt.Sscan(rest[i+1:], &port); err != nil {
		t.Fatalf("endpoint %q: %v", endpoint, err)
	}
	return host, port
}
