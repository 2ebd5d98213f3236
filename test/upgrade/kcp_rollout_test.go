package upgrade

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/deploy"
	"bex.co/bex/internal/kubeapply"
	"bex.co/bex/internal/mvp"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/pki"
	"bex.co/bex/internal/store"
	"bex.co/bex/internal/upgrade/verify"
	"bex.co/bex/test/platformtest"
)

// TestRealKubeadmControlPlaneRollout is the suite's scenario on the real
// Cluster API KubeadmControlPlane: a local cluster (controllers/localinfra)
// of three control-plane machines at 1.36.3 with MVP wired is upgraded to
// 1.37.2 by a FleetUpgrade, driven by the real FleetUpgrade controller with
// the real verifier, while the tenant's load runs through the cluster's
// load balancer. KubeadmControlPlane replaces the machines at its own pace
// (maxSurge 0); the gate's pre-drain hook holds each one it marks for
// deletion until a verification begun after the mark has passed. It passes
// when the FleetUpgrade succeeds, no Machine left the load balancer or went
// before its gate released it, the Cluster was never paused, the records
// hold a release step per old machine, and the tenant saw no failure. It
// writes out/upgrade-report-kcp.{md,json} and out/upgrade-kcp.svg.
//
// It runs apart from TestMixedVersionSuite, which needs 1.35.4 too.
func TestRealKubeadmControlPlaneRollout(t *testing.T) {
	if os.Getenv(EnvRun) != "1" {
		t.Skipf("the scenario starts Cluster API and a local cluster: run it with make test-upgrade (%s=1)", EnvRun)
	}
	const (
		ns, name = "default", "kcp"
		fleet    = "kcp-suite"
	)
	from, to := "v"+v136, "v"+v137
	sc := &kcpScenario{t: t, ns: ns, name: name, from: from, to: to, begun: time.Now()}
	sc.served = discoverServed(t, v136, v137)
	sc.skew = sc.served.newIn(v136, v137)
	st, err := store.Open(t.Context(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatalf("opening the store: %v", err)
	}
	t.Cleanup(st.Close)
	sc.st = st
	// Written after everything else stopped, before the store closes, also
	// when the scenario fails.
	t.Cleanup(func() {
		sc.finish()
		rep := sc.report()
		rep.Passed = !t.Failed()
		paths, err := rep.write(outDir(t))
		if err != nil {
			t.Errorf("writing the report: %v", err)
			return
		}
		for _, p := range paths {
			fmt.Println("upgrade report:", p)
		}
		t.Logf("\n%s", rep.machineTable())
	})

	sc.verifier = &recordingVerifier{inner: fleetupgrade.RunVerifier{Options: verify.Options{
		CRDs: []verify.CRDProbe{verify.AppProbe(), routeProbe()}, Namespace: verifyNamespace,
	}}}
	f := localinfratest.Start(t, localinfratest.Options{Version: to, Setup: func(mgr ctrl.Manager) error {
		return (&fleetupgrade.Reconciler{
			Client: mgr.GetClient(), Verifier: sc.verifier, Records: st, Events: mgr.GetEventRecorder(fleetupgrade.ControllerName),
			Options: fleetupgrade.Options{PollInterval: time.Second, VerifyRetryInterval: 5 * time.Second},
		}).SetupWithManager(mgr)
	}})
	sc.f = f
	// A failed scenario keeps the cluster's logs (etcd's and every
	// machine's kube-apiserver's, the deleted ones' too), lists the
	// tenant's requests the machines left refused, from their audit logs,
	// and keeps those logs. A run that passed checks that the machines did
	// audit the tenant.
	t.Cleanup(func() {
		logs, err := auditLogs(filepath.Join(f.Dir, "fleet", ns, name, "machines"))
		if err != nil {
			t.Errorf("finding the machines' audit logs: %v", err)
		}
		answered, refused, err := auditFailures(logs)
		if err != nil {
			t.Errorf("reading the machines' audit logs: %v", err)
		}
		if !t.Failed() {
			if answered == 0 {
				t.Error("the machines' audit logs hold none of the tenant's requests: the audit policy did not reach them")
			}
			return
		}
		dst := filepath.Join(outDir(t), "upgrade-logs", "kcp")
		keepLogs(t, filepath.Join(f.Dir, "fleet", ns, name, "logs"), dst)
		const most = 100
		more := ""
		if len(refused) > most {
			refused, more = refused[:most], fmt.Sprintf("\n(and %d more)", len(refused)-most)
		}
		t.Logf("the tenant's requests the machines left refused, of %d they answered (their audit logs):\n%s%s", answered, strings.Join(refused, "\n"), more)
		for machine, p := range logs {
			b, err := os.ReadFile(p)
			if err == nil {
				err = os.WriteFile(filepath.Join(dst, "audit-"+machine+".log"), b, 0o644)
			}
			if err != nil {
				t.Logf("keeping %s's audit log: %v", machine, err)
			}
		}
	})
	o := localinfra.ClusterOptions{Namespace: ns, Name: name, Version: from, ControlPlaneReplicas: 3,
		Labels: map[string]string{"fleet": fleet}}
	// The local provider hands a machine off its load balancer (removed,
	// drained) before it stops its apiserver, as the suite's plane does:
	// no shutdown delay.
	o.APIServerExtraArgs = localinfratest.WireMVPArgs(o)
	files, auditArgs := tenantAudit()
	o.Files, o.APIServerExtraArgs = files, append(o.APIServerExtraArgs, auditArgs...)
	f.CreateCluster(t, o)
	f.WaitControlPlane(t, ns, name, from, 3, 10*time.Minute)
	sc.ready = time.Now()

	ctx := t.Context()
	admin := f.WorkloadConfig(t, ns, name)
	if _, err := kubeapply.InstallCRDs(ctx, admin, deploy.CRDs()); err != nil {
		t.Fatalf("installing the platform CRDs in the workload cluster: %v", err)
	}
	if err := grantTenant(ctx, admin, sc.skew); err != nil {
		t.Fatal(err)
	}
	tenant, err := sc.tenantConfig(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.waitTenantServed(ctx, tenant); err != nil {
		t.Fatal(err)
	}

	sc.watch = localinfratest.WatchMachines(f.Client, ns, name, localinfratest.WatchOptions{Hook: fleetupgrade.GateHook, Host: f.Host})
	t.Cleanup(sc.watch.Close)
	if sc.load, err = startTenantLoadAt(tenant, sc.skew, false); err != nil {
		t.Fatal(err)
	}
	sc.origin = time.Now()
	t.Cleanup(sc.finish)
	t.Logf("cluster %s: 3×%s (MVP wired) ready in %.0f s; tenant lists %v", name, from, sc.ready.Sub(sc.begun).Seconds(), gvrStrings(sc.skew))
	sc.soak(5 * time.Second)

	fu := &fleetv1.FleetUpgrade{
		ObjectMeta: metav1.ObjectMeta{Name: "kcp-to-" + strings.ReplaceAll(strings.TrimPrefix(to, "v"), ".", "-")},
		Spec: fleetv1.FleetUpgradeSpec{
			TargetVersion:   to,
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"fleet": fleet}},
			SoakTime:        &metav1.Duration{},
		},
	}
	if err := f.Client.Create(ctx, fu); err != nil {
		t.Fatal(err)
	}
	sc.fu, sc.created = fu, time.Now()
	platformtest.Eventually(t, 20*time.Minute, "the FleetUpgrade Succeeded", func(ctx context.Context) error {
		got := &fleetv1.FleetUpgrade{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
			return err
		}
		if got.Status.Phase != fleetv1.FleetUpgradePhaseSucceeded {
			return fmt.Errorf("phase %s: %v", got.Status.Phase, got.Status.Conditions)
		}
		sc.setSucceeded(time.Now(), got)
		return nil
	})
	f.WaitControlPlane(t, ns, name, to, 3, 5*time.Minute)
	sc.soak(5 * time.Second)
	sc.finish()
	sc.assert()
}

// kcpScenario is the scenario's cluster, load, watch and verdicts.
type kcpScenario struct {
	t        *testing.T
	ns, name string
	from, to string
	served   servedSets
	skew     []schema.GroupVersionResource
	st       *store.Store
	f        *localinfratest.Fleet
	verifier *recordingVerifier
	watch    *localinfratest.MachineWatch
	load     *tenantLoad
	fu       *fleetv1.FleetUpgrade
	// begun: the test's start; ready: the cluster ran at from; origin:
	// the tenant load's start, the report's zero; created: the
	// FleetUpgrade was created.
	begun, ready, origin, created time.Time

	mu        sync.Mutex
	succeeded time.Time
	fuStatus  fleetv1.FleetUpgradeStatus
	finished  time.Time
}

func (sc *kcpScenario) since(at time.Time) float64 { return at.Sub(sc.origin).Seconds() }

func (sc *kcpScenario) soak(d time.Duration) {
	select {
	case <-time.After(d):
	case <-sc.t.Context().Done():
	}
}

func (sc *kcpScenario) setSucceeded(at time.Time, fu *fleetv1.FleetUpgrade) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.succeeded, sc.fuStatus = at, fu.Status
}

// finish stops the load and the watch, once.
func (sc *kcpScenario) finish() {
	sc.mu.Lock()
	done := !sc.finished.IsZero()
	if !done {
		sc.finished = time.Now()
	}
	sc.mu.Unlock()
	if done {
		return
	}
	if sc.load != nil {
		sc.load.halt()
	}
	if sc.watch != nil {
		sc.watch.Close()
	}
}

// tenantConfig is the tenant's identity at the cluster's load balancer: a
// client certificate the cluster's CA (Cluster API's <cluster>-ca Secret)
// issues for the tenant's user and group.
func (sc *kcpScenario) tenantConfig(ctx context.Context, admin *rest.Config) (*rest.Config, error) {
	s := &corev1.Secret{}
	if err := sc.f.Client.Get(ctx, client.ObjectKey{Namespace: sc.ns, Name: sc.name + "-ca"}, s); err != nil {
		return nil, fmt.Errorf("reading the cluster's CA: %w", err)
	}
	ca, err := pki.ParseKeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("parsing the cluster's CA: %w", err)
	}
	kp, err := ca.Issue(pki.Spec{CommonName: tenantUser, Organization: []string{tenantGroup},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotAfter: time.Now().Add(24 * time.Hour)})
	if err != nil {
		return nil, fmt.Errorf("issuing the tenant's certificate: %w", err)
	}
	key, err := kp.KeyPEM()
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData, CertData: kp.CertPEM(), KeyData: key},
		QPS: 200, Burst: 400}, nil
}

// waitTenantServed polls, as the tenant and on each machine's apiserver
// directly, a list of Apps and Routes until both answer 200: the CRDs and
// the RBAC rules reached every server.
func (sc *kcpScenario) waitTenantServed(ctx context.Context, tenant *rest.Config) error {
	cluster := sc.f.Host.Cluster(sc.ns, sc.name)
	if cluster == nil {
		return fmt.Errorf("the host runs no cluster %s/%s", sc.ns, sc.name)
	}
	machines := func(ctx context.Context) (map[string]string, error) {
		var list clusterv1.MachineList
		if err := sc.f.Client.List(ctx, &list, client.InNamespace(sc.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: sc.name}); err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, m := range list.Items {
			lm := cluster.Machine(m.Spec.InfrastructureRef.Name)
			if lm == nil {
				return nil, fmt.Errorf("machine %s does not run", m.Name)
			}
			out[m.Name] = "https://" + lm.Addr()
		}
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return waitServed(ctx, tenant, machines, mvp.Path(appsGVR, tenantNamespace, ""), mvp.Path(routesGVR, tenantNamespace, ""))
}

// servedAt returns whether a machine of lives in the load balancer at a
// moment ran a version that serves a resource itself.
func (sc *kcpScenario) servedAt(lives []localinfratest.MachineLife) func(schema.GroupVersionResource, time.Time) bool {
	return func(gvr schema.GroupVersionResource, t time.Time) bool {
		for _, m := range lives {
			if m.JoinedLB.IsZero() || t.Before(m.JoinedLB) || (!m.LeftLB.IsZero() && !t.Before(m.LeftLB)) {
				continue
			}
			if _, ok := sc.served[strings.TrimPrefix(m.Version, "v")][gvr]; ok {
				return true
			}
		}
		return false
	}
}

// assert checks what the scenario promises.
func (sc *kcpScenario) assert() {
	t := sc.t
	t.Helper()
	lives := sc.watch.Snapshot()
	if sc.watch.Paused() {
		t.Error("the Cluster was paused: the gate holds machines by their deletion hook")
	}
	old := 0
	for _, m := range lives {
		if m.Version != sc.from {
			if !m.Marked.IsZero() {
				t.Errorf("machine %s of %s was deleted", m.Name, m.Version)
			}
			if m.JoinedLB.IsZero() {
				t.Errorf("new machine %s never joined the load balancer", m.Name)
			}
			continue
		}
		old++
		if m.HookedAt.IsZero() || (!m.Marked.IsZero() && m.HookedAt.After(m.Marked)) {
			t.Errorf("old machine %s: the gate's hook was not on it before KubeadmControlPlane marked it (hooked %v, marked %v)", m.Name, m.HookedAt, m.Marked)
		}
		if m.Marked.IsZero() || m.Released.IsZero() || m.Gone.IsZero() {
			t.Errorf("old machine %s: marked %v, released %v, gone %v", m.Name, m.Marked, m.Released, m.Gone)
			continue
		}
		if !sc.verifier.passedBetween(m.Marked.Add(-time.Second), m.Released) {
			t.Errorf("machine %s was released at %s, with no verification begun after KubeadmControlPlane marked it (%s) passed before",
				m.Name, m.Released.Format(time.StampMilli), m.Marked.Format(time.StampMilli))
		}
		if m.Gone.Before(m.Released) {
			t.Errorf("machine %s went before its gate released it", m.Name)
		}
		if !m.LeftLB.IsZero() && m.LeftLB.Before(m.Released) {
			t.Errorf("machine %s left the load balancer at %s, before its gate released it at %s", m.Name,
				m.LeftLB.Format(time.StampMilli), m.Released.Format(time.StampMilli))
		}
	}
	if old != 3 {
		t.Errorf("%d old machines seen, want 3", old)
	}
	rep := sc.report()
	if rep.Tenant.Failures > 0 {
		t.Errorf("%d of %d tenant requests failed (%v); first: %s", rep.Tenant.Failures, rep.Tenant.Requests, rep.Tenant.FailuresByStatus,
			strings.Join(rep.Tenant.FirstFailures, "\n  "))
	}
	releases := map[string]bool{}
	for _, s := range rep.Records {
		if s.Kind == fleetupgrade.StepKindRelease {
			releases[s.Machine] = true
		}
	}
	for _, m := range lives {
		if m.Version == sc.from && !releases[m.Name] {
			t.Errorf("the records hold no %s step for machine %s (steps: %d)", fleetupgrade.StepKindRelease, m.Name, len(rep.Records))
		}
	}
	t.Logf("tenant: %d requests, %d failed, %d retried by client-go's own retries; FleetUpgrade succeeded %.0f s after it was created",
		rep.Tenant.Requests, rep.Tenant.Failures, rep.Tenant.Retried, rep.RolloutSeconds)
}

// recordingVerifier runs the real verifier and keeps each round.
type recordingVerifier struct {
	inner fleetupgrade.Verifier

	mu     sync.Mutex
	rounds []verifierRound
}

var _ fleetupgrade.Verifier = (*recordingVerifier)(nil)

// verifierRound is one round the FleetUpgrade controller ran.
type verifierRound struct {
	Start, End time.Time
	Targets    []string
	Passed     bool
	Probes     int
	Failed     []string
	Findings   []string
	Err        string
}

// Verify implements fleetupgrade.Verifier.
func (v *recordingVerifier) Verify(ctx context.Context, targets []verify.Target) (verify.Report, error) {
	r := verifierRound{Start: time.Now()}
	for _, tg := range targets {
		r.Targets = append(r.Targets, tg.Name)
	}
	rep, err := v.inner.Verify(ctx, targets)
	r.End, r.Passed, r.Probes = time.Now(), err == nil && rep.Passed(), len(rep.Probes)
	if err != nil {
		r.Err = err.Error()
	}
	for _, p := range rep.Failures() {
		r.Failed = append(r.Failed, fmt.Sprintf("%s %s %s %s (%d)", p.APIServer, p.Outcome, p.Verb, verify.GVRString(p.Resource), p.Status))
	}
	for _, f := range rep.Findings {
		r.Findings = append(r.Findings, f.Reason)
	}
	v.mu.Lock()
	v.rounds = append(v.rounds, r)
	v.mu.Unlock()
	return rep, err
}

// passedBetween reports whether a round that started at or after from
// passed by to.
func (v *recordingVerifier) passedBetween(from, to time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.ContainsFunc(v.rounds, func(r verifierRound) bool {
		return r.Passed && !r.Start.Before(from) && !r.End.After(to)
	})
}

func (v *recordingVerifier) snapshot() []verifierRound {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.rounds)
}
