package dashboard_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/upgrade/verify"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard"
)

// TestOperatorConsole: an operator sees the fleet with its machines'
// versions and MVP wired, watches a running fleet upgrade's timeline grow
// in the open page, and pauses it from the page; a tenant is refused the
// console.
//
// The fleet is a local cluster of three machines on the real Cluster API
// managers (controllers/localinfra/localinfratest), rolled by the real
// KubeadmControlPlane; the upgrade is the real FleetUpgrade controller
// with the real verifier and Postgres records.
func TestOperatorConsole(t *testing.T) {
	// The two newest pinned versions: the ones make test builds.
	versions := kubebin.KubeVersions()
	from, to := "v"+versions[len(versions)-2], "v"+versions[len(versions)-1]
	f := localinfratest.Start(t, localinfratest.Options{Version: to})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := apitest.StartWith(t, f.Mgmt, apitest.Options{ClusterAPIRunning: true})
	const ns, name = "default", "prod"
	o := localinfra.ClusterOptions{Namespace: ns, Name: name, Version: from, ControlPlaneReplicas: 3}
	o.APIServerExtraArgs = localinfratest.WireMVPArgs(o)
	f.CreateCluster(t, o)
	f.WaitControlPlane(t, ns, name, from, 3, 10*time.Minute)
	startController(t, ctx, f.Mgmt, e)

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
	row := `tr[data-cluster="default/prod"]`
	for _, want := range []string{from + " · 3 replicas · maxSurge 0", "wired"} {
		if got := b.text(row); !strings.Contains(got, want) {
			t.Errorf("the fleet row lacks %q: %q", want, got)
		}
	}
	chips := eval[[]string](b, `Array.from(document.querySelectorAll('`+row+` .chip:not(.unhealthy)')).map(c => c.innerText)`)
	if len(chips) != 3 {
		t.Errorf("the fleet row's healthy machines = %q, want the three of %s", chips, from)
	}
	for _, c := range chips {
		if !strings.HasPrefix(c, name+"-") || !strings.HasSuffix(c, " "+from) {
			t.Errorf("machine %q on the fleet row, want one of %s at %s", c, name, from)
		}
	}

	op, err := apiclient.New(e.URL, e.OperatorToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.CreateUpgrade(ctx, apiclient.CreateUpgradeRequest{Name: "to-137", TargetVersion: to}); err != nil {
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
	// KubeadmControlPlane replaces a machine, the controller verifies
	// all three apiservers, and so on: the open page shows more rounds
	// and the new version. Each replacement takes a machine's start and a
	// verifier round, so the pause below lands in a running rollout.
	b.waitFor("the timeline to show a new version and more verifier rounds", fmt.Sprintf(
		`%s > %d && %s.includes(%q)`, countJS, first, segJS, to), 8*time.Minute)
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
	// What bex-embedded verifies on a workload cluster.
	r := &fleetupgrade.Reconciler{
		Client:   mgr.GetClient(),
		Verifier: fleetupgrade.RunVerifier{Options: verify.Options{Always: verify.Baseline(), RemoveStaleLeases: true}},
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
