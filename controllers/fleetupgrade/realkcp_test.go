package fleetupgrade_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/controllers/localinfra"
	"bex.co/bex/controllers/localinfra/localinfratest"
	"bex.co/bex/internal/kubebin"
	"bex.co/bex/internal/localfleet"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/verify"
	"bex.co/bex/test/platformtest"
)

// slowVerifier runs the real verifier after a delay and records each
// round: a verifier that takes long to pass. While failing is set, each
// round's report also carries a spurious 404 on the first apiserver, as
// MVP gives when a server cannot proxy, and a round begun then skips the
// delay.
type slowVerifier struct {
	delay time.Duration
	inner fleetupgrade.Verifier

	mu      sync.Mutex
	starts  []time.Time
	rounds  []round
	failing bool
	// targets are the last round's.
	targets []verify.Target
	// probed are the names of every round's targets.
	probed map[string]bool
}

// embeddedVerifier is the verifier make run's controllers use: every round
// also lists Namespaces on each apiserver, so a round on servers of one
// version probes too.
var embeddedVerifier = fleetupgrade.RunVerifier{Options: verify.Options{Always: verify.Baseline(), RemoveStaleLeases: true}}

// spurious is the failure a failing round reports.
var spurious = verify.Probe{Resource: schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"},
	Verb: "list", Status: 404, Outcome: verify.Spurious404, Message: "the server could not find the requested resource"}

type round struct {
	start, end time.Time
	passed     bool
}

func (v *slowVerifier) Verify(ctx context.Context, targets []verify.Target) (verify.Report, error) {
	start := time.Now()
	v.mu.Lock()
	v.starts = append(v.starts, start)
	delay := v.delay
	if v.failing {
		delay = 0
	}
	v.mu.Unlock()
	select {
	case <-ctx.Done():
		return verify.Report{}, ctx.Err()
	case <-time.After(delay):
	}
	rep, err := v.inner.Verify(ctx, targets)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.failing && err == nil && len(targets) > 0 {
		p := spurious
		p.APIServer, p.At = targets[0].Name, time.Now()
		rep.Probes = append(rep.Probes, p)
	}
	v.targets = targets
	if v.probed == nil {
		v.probed = map[string]bool{}
	}
	for _, tg := range targets {
		v.probed[tg.Name] = true
	}
	v.rounds = append(v.rounds, round{start: start, end: time.Now(), passed: err == nil && rep.Passed()})
	return rep, err
}

// verified reports whether a round had a target of that name.
func (v *slowVerifier) verified(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.probed[name]
}

// span returns when the first round began and the last one began.
func (v *slowVerifier) span() (first, last time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.starts) == 0 {
		return time.Time{}, time.Time{}
	}
	return v.starts[0], v.starts[len(v.starts)-1]
}

func (v *slowVerifier) setFailing(failing bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.failing = failing
}

// failedRounds counts the rounds that did not pass.
func (v *slowVerifier) failedRounds() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, r := range v.rounds {
		if !r.passed {
			n++
		}
	}
	return n
}

// lastTargets returns the last round's targets.
func (v *slowVerifier) lastTargets() []verify.Target {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.targets)
}

// passedBetween reports whether a round that started at or after from
// passed by to.
func (v *slowVerifier) passedBetween(from, to time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range v.rounds {
		if r.passed && !r.start.Before(from) && !r.end.After(to) {
			return true
		}
	}
	return false
}

// String lists the rounds, begun and ended.
func (v *slowVerifier) String() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var b strings.Builder
	for _, r := range v.rounds {
		fmt.Fprintf(&b, "%s-%s passed=%t; ", r.start.Format("15:04:05.000"), r.end.Format("15:04:05.000"), r.passed)
	}
	return b.String()
}

// startedSince reports whether a round started at or after from.
func (v *slowVerifier) startedSince(from time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.starts {
		if !s.Before(from) {
			return true
		}
	}
	return false
}

// passedAfter reports whether a round that ended after t passed.
func (v *slowVerifier) passedAfter(t time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range v.rounds {
		if r.passed && r.end.After(t) {
			return true
		}
	}
	return false
}

// startFleet starts the management side with the management apiserver at
// version, Cluster API's managers, the local provider and the FleetUpgrade
// controller with verifier v and records in a new database. configure, if
// any, changes the controller before it is set up.
func startFleet(t *testing.T, version string, v fleetupgrade.Verifier, configure ...func(*fleetupgrade.Reconciler)) (*localinfratest.Fleet, *store.Store) {
	t.Helper()
	return startFleetOn(t, localfleet.Options{}, version, v, configure...)
}

// startFleetOn is startFleet on a host with options host (bex-node for
// worker machines).
func startFleetOn(t *testing.T, host localfleet.Options, version string, v fleetupgrade.Verifier, configure ...func(*fleetupgrade.Reconciler)) (*localinfratest.Fleet, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	f := localinfratest.Start(t, localinfratest.Options{Version: version, Host: host, Setup: func(mgr ctrl.Manager) error {
		r := &fleetupgrade.Reconciler{
			Client: mgr.GetClient(), Verifier: v, Records: st, Events: mgr.GetEventRecorder(fleetupgrade.ControllerName),
			Options: fleetupgrade.Options{PollInterval: time.Second, VerifyRetryInterval: 5 * time.Second},
		}
		for _, c := range configure {
			c(r)
		}
		return r.SetupWithManager(mgr)
	}})
	return f, st
}

// watchMachines starts watching the Machines of cluster ns/name and the
// gate's hook on them.
func watchMachines(f *localinfratest.Fleet, ns, name string) *localinfratest.MachineWatch {
	return localinfratest.WatchMachines(f.Client, ns, name, localinfratest.WatchOptions{Hook: fleetupgrade.GateHook})
}

// byName indexes what w saw by Machine name.
func byName(w *localinfratest.MachineWatch) map[string]*localinfratest.MachineLife {
	out := map[string]*localinfratest.MachineLife{}
	for _, ml := range w.Snapshot() {
		out[ml.Name] = &ml
	}
	return out
}

// TestWiringThenManagementClusterLast: a FleetUpgrade selects a workload
// cluster with a worker and the management cluster, both real
// KubeadmControlPlanes of LocalMachines.
//
// The workload cluster's apiservers run without --peer-ca-file (as kubeadm
// makes them): it is refused with PreflightPassed/MVPNotWired naming the
// flag, its value and spec.wireMVP, and nothing is touched. With
// spec.wireMVP the controller writes the flag to its KubeadmControlPlane,
// the real KCP rolls every machine at the same version with it (the local
// provider starts each apiserver with the kubeadm-config's extraArgs), and
// only then is the version bumped. The version rollout, gated by the real
// verifier, passes only when the mixed-version apiservers proxy to each
// other; the worker follows once the control plane runs the target.
//
// The management cluster goes last, and each is verified by its own
// verifier: Verifier is not called once the management cluster's rollout
// began, and every new machine of the management cluster was probed by
// ManagementVerifier, none by Verifier.
func TestWiringThenManagementClusterLast(t *testing.T) {
	t.Parallel() // each on a management cluster and local clusters of its own
	versions := kubebin.KubeVersions()
	from, to := "v"+versions[len(versions)-2], "v"+versions[len(versions)-1]
	work := &slowVerifier{inner: embeddedVerifier}
	mgmt := &slowVerifier{inner: embeddedVerifier}
	bin := platformtest.BuildBinaries(t, "bex-node")
	f, st := startFleetOn(t, localfleet.Options{NodeBinary: filepath.Join(bin, "bex-node")}, to, work,
		func(r *fleetupgrade.Reconciler) { r.ManagementVerifier = mgmt })
	const ns = "default"
	w := localinfra.ClusterOptions{Namespace: ns, Name: "work", Version: from, ControlPlaneReplicas: 3, WorkerReplicas: 1, Labels: map[string]string{"fleet": "both"}}
	m := localinfra.ClusterOptions{Namespace: ns, Name: "management", Version: from, ControlPlaneReplicas: 3,
		Labels: map[string]string{"fleet": "both", plan.ManagementLabel: "true"}}
	m.APIServerExtraArgs = localinfratest.WireMVPArgs(m)
	f.CreateCluster(t, w)
	f.CreateCluster(t, m)
	f.WaitControlPlane(t, ns, w.Name, from, 3, 10*time.Minute)
	f.WaitControlPlane(t, ns, m.Name, from, 3, 5*time.Minute)
	ww := watchMachines(f, ns, w.Name)
	defer ww.Close()
	wm := watchMachines(f, ns, m.Name)
	defer wm.Close()

	fu := newUpgrade("both", to, "both")
	ctx := context.Background()
	if err := f.Client.Create(ctx, fu); err != nil {
		t.Fatal(err)
	}
	got := &fleetv1.FleetUpgrade{}
	platformtest.Eventually(t, 2*time.Minute, "the preflight to refuse the unwired control plane", func(ctx context.Context) error {
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePreflightPassedCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != fleetv1.FleetUpgradeMVPNotWiredReason {
			return fmt.Errorf("PreflightPassed %+v", c)
		}
		for _, want := range []string{ns + "/" + w.Name, "--peer-ca-file", "/etc/kubernetes/pki/ca.crt", "spec.wireMVP: true"} {
			if !strings.Contains(c.Message, want) {
				return fmt.Errorf("PreflightPassed message lacks %q: %s", want, c.Message)
			}
		}
		return nil
	})
	phases := map[string]fleetv1.ClusterUpgradePhase{}
	for _, c := range got.Status.Clusters {
		phases[c.Name] = c.Phase
	}
	if want := map[string]fleetv1.ClusterUpgradePhase{ns + "/" + w.Name: fleetv1.ClusterUpgradePhasePreflight,
		ns + "/" + m.Name: fleetv1.ClusterUpgradePhasePending}; !maps.Equal(phases, want) {
		t.Errorf("clusters %v, want %v", phases, want)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: w.Name + "-control-plane"}, kcp); err != nil {
		t.Fatal(err)
	}
	if kcp.Spec.Version != from || len(kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs) != 0 {
		t.Errorf("the refused control plane changed: %s %v", kcp.Spec.Version, kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs)
	}
	initial := byName(ww)

	updateSpec(t, f.Client, fu, func(spec *fleetv1.FleetUpgradeSpec) { spec.WireMVP = true })
	got = waitSucceeded(t, f.Client, fu, 30*time.Minute)
	f.WaitControlPlane(t, ns, w.Name, to, 3, 5*time.Minute)
	ww.Close()
	wm.Close()
	checkWorkersFollowed(t, f, st, fu, ns, w.Name, from, to)
	checkWired(t, f.Client, st, got, ns, w.Name, from, to, initial, byName(ww))
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePreflightPassedCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("PreflightPassed = %+v", c)
	}

	_, lastWork := work.span()
	firstMgmt, _ := mgmt.span()
	if lastWork.IsZero() || firstMgmt.IsZero() {
		t.Fatalf("Verifier's last round began %v, ManagementVerifier's first %v: want both called", lastWork, firstMgmt)
	}
	if !lastWork.Before(firstMgmt) {
		t.Errorf("Verifier began a round at %s, after ManagementVerifier's first (%s): the management cluster goes last, with its own verifier",
			lastWork.Format("15:04:05.000"), firstMgmt.Format("15:04:05.000"))
	}
	seen := byName(wm)
	n := 0
	for name, mt := range seen {
		if mt.Version != to {
			continue
		}
		n++
		machine := &clusterv1.Machine{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, machine); err != nil {
			t.Fatal(err)
		}
		node := machine.Status.NodeRef.Name
		if !mgmt.verified(node) || work.verified(node) {
			t.Errorf("the management cluster's new machine %s (node %s): probed by ManagementVerifier %t, by Verifier %t",
				name, node, mgmt.verified(node), work.verified(node))
		}
	}
	if n != 3 {
		t.Errorf("%d new machines of the management cluster seen, want 3", n)
	}
}

// TestGateHoldsRealKubeadmControlPlane: the real KubeadmControlPlane rolls
// three local machines to the next version with maxSurge 0 at its own pace
// under a FleetUpgrade whose verifier takes 15 s a round. KCP marks each
// old machine for deletion as soon as its own checks pass, long before the
// verifier could; the gate's deletion hook holds the machine until a
// verification that began after KCP marked it has passed. No Machine goes
// before that, and the Cluster is never paused. An operator who pauses the
// FleetUpgrade while the round that would release a machine runs holds
// that machine, though the round passes. When the verifier finds a
// spurious 404 once KCP marked the second old machine, the gate holds that
// machine through round after failed round and says why (Paused/GateFailed,
// Verified/Spurious404 with the evidence, an Event, a failed verify step
// with its probes in the records); once the verifier turns green the
// rollout goes on to the end: one passed step and one verification per new
// machine, one release per old one, no hook left, the run recorded, and
// every apiserver probed at its Machine's address.
func TestGateHoldsRealKubeadmControlPlane(t *testing.T) {
	t.Parallel() // each on a management cluster and local clusters of its own
	// The two newest pinned versions: the ones make test builds.
	versions := kubebin.KubeVersions()
	from, to := "v"+versions[len(versions)-2], "v"+versions[len(versions)-1]
	v := &slowVerifier{delay: 15 * time.Second, inner: embeddedVerifier}
	f, st := startFleet(t, to, v)
	const ns, name = "default", "gated"
	o := localinfra.ClusterOptions{Namespace: ns, Name: name, Version: from, ControlPlaneReplicas: 3, Labels: map[string]string{"fleet": "gated"}}
	o.APIServerExtraArgs = localinfratest.WireMVPArgs(o)
	f.CreateCluster(t, o)
	f.WaitControlPlane(t, ns, name, from, 3, 10*time.Minute)

	w := watchMachines(f, ns, name)
	defer w.Close()

	fu := newUpgrade("to-next", to, "gated")
	if err := f.Client.Create(context.Background(), fu); err != nil {
		t.Fatal(err)
	}

	// The operator pauses while the round that would release the first
	// machine KCP marks runs: the round passes, and the pause still holds
	// the machine until the FleetUpgrade is resumed.
	// The round that releases it begins within milliseconds of the mark
	// (the Machine's update wakes the controller), before the watcher
	// sees the mark; the DeletionTimestamp has whole seconds, so the
	// round awaited is one begun in the mark's second. Should that one
	// have begun before the mark, the pause lands before the releasing
	// reconcile reads the FleetUpgrade, and the machine is held anyway.
	var first string
	var firstMarked, firstSeen time.Time
	platformtest.Eventually(t, 10*time.Minute, "KubeadmControlPlane to mark an old machine", func(context.Context) error {
		marked := w.Marked(from)
		if len(marked) == 0 {
			return errors.New("no machine marked")
		}
		snap := byName(w)
		first, firstMarked, firstSeen = marked[0], snap[marked[0]].DeletionTimestamp, snap[marked[0]].Marked
		return nil
	})
	platformtest.Eventually(t, time.Minute, "a verifier round begun since the mark", func(context.Context) error {
		if !v.startedSince(firstMarked) {
			return errors.New("none yet")
		}
		return nil
	})
	setPaused(t, f.Client, fu, true)
	pausedAt := time.Now()
	t.Logf("machine %s: marked in %s, seen marked at %s; the operator paused at %s", first, firstMarked.Format("15:04:05"),
		firstSeen.Format("15:04:05.000"), pausedAt.Format("15:04:05.000"))
	platformtest.Eventually(t, 2*time.Minute, "the round under way at the pause to pass and the pause reported", func(ctx context.Context) error {
		if !v.passedAfter(pausedAt) {
			return errors.New("no round passed since the pause")
		}
		got := &fleetv1.FleetUpgrade{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
			return err
		}
		if len(got.Status.Clusters) != 1 || got.Status.Clusters[0].Phase != fleetv1.ClusterUpgradePhasePaused {
			return fmt.Errorf("clusters %+v", got.Status.Clusters)
		}
		return nil
	})
	snap := byName(w)
	released := snap[first].Released
	t.Logf("verifier rounds: %s", v.String())
	if !released.IsZero() {
		t.Errorf("machine %s was released at %s, after the operator paused at %s", first, released.Format(time.StampMilli), pausedAt.Format(time.StampMilli))
	}
	setPaused(t, f.Client, fu, false)

	// The verifier finds a spurious 404 once KCP marked the second old
	// machine: the gate holds it, says why, and runs the verifier again.
	var second string
	platformtest.Eventually(t, 10*time.Minute, "KubeadmControlPlane to mark a second old machine", func(context.Context) error {
		marked := w.Marked(from)
		if len(marked) < 2 {
			return fmt.Errorf("marked: %v", marked)
		}
		if marked[0] != first {
			return fmt.Errorf("marked %v, the first one not %s", marked, first)
		}
		second = marked[1]
		return nil
	})
	v.setFailing(true)
	var failedUID string
	platformtest.Eventually(t, 3*time.Minute, "the gate to fail and say why", func(ctx context.Context) error {
		got := &fleetv1.FleetUpgrade{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
			return err
		}
		paused := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePausedCondition)
		verified := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradeVerifiedCondition)
		if paused == nil || paused.Status != metav1.ConditionTrue || paused.Reason != fleetv1.FleetUpgradeGateFailedReason ||
			verified == nil || verified.Status != metav1.ConditionFalse || verified.Reason != fleetv1.FleetUpgradeSpurious404Reason {
			return fmt.Errorf("Paused %+v, Verified %+v", paused, verified)
		}
		for _, want := range []string{ns + "/" + name, "list resource.k8s.io/v1 devicetaintrules", "404", spurious.Message} {
			if !strings.Contains(verified.Message, want) {
				return fmt.Errorf("Verified message %q lacks %q", verified.Message, want)
			}
		}
		if got.Status.Phase != fleetv1.FleetUpgradePhasePaused || len(got.Status.Clusters) != 1 || got.Status.Clusters[0].Phase != fleetv1.ClusterUpgradePhasePaused {
			return fmt.Errorf("phase %s, clusters %+v", got.Status.Phase, got.Status.Clusters)
		}
		steps := got.Status.Clusters[0].Steps
		if len(steps) == 0 || steps[len(steps)-1].Verdict != fleetv1.StepVerdictFailed {
			return fmt.Errorf("steps %+v, want the last one failed", steps)
		}
		failedUID = string(got.UID)
		return nil
	})
	failed := v.failedRounds()
	platformtest.Eventually(t, 2*time.Minute, "three more failed rounds", func(context.Context) error {
		if n := v.failedRounds() - failed; n < 3 {
			return fmt.Errorf("%d more", n)
		}
		return nil
	})
	held := &clusterv1.Machine{}
	if err := f.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: second}, held); err != nil {
		t.Fatalf("machine %s, held by the failed gate: %v", second, err)
	}
	if held.DeletionTimestamp.IsZero() || held.Annotations[fleetupgrade.GateHook] == "" {
		t.Errorf("machine %s: deleting %t, annotations %v; want it marked and held by the gate's hook", second, !held.DeletionTimestamp.IsZero(), held.Annotations)
	}
	waitEvent(t, f.Client, time.Minute, fu.Name, fleetv1.FleetUpgradeGateFailedReason, "devicetaintrules")
	run := upgradeRun(t, st, failedUID)
	if run.State != store.UpgradePaused {
		t.Errorf("run state %q while the gate fails, want %q", run.State, store.UpgradePaused)
	}
	if !failedVerifyRecorded(t, st, run.ID) {
		t.Errorf("no failed verify step with the spurious 404 among its probes in the records of run %s", run.ID)
	}
	v.setFailing(false)

	waitSucceeded(t, f.Client, fu, 20*time.Minute)
	f.WaitControlPlane(t, ns, name, to, 3, 5*time.Minute)
	w.Close()

	seen, paused := byName(w), w.Paused()
	if paused {
		t.Error("the Cluster was paused: the gate holds machines by their deletion hook")
	}
	old := 0
	for n, mt := range seen {
		if mt.Version != from {
			if !mt.DeletionTimestamp.IsZero() {
				t.Errorf("machine %s of %s was deleted", n, mt.Version)
			}
			continue
		}
		old++
		if mt.DeletionTimestamp.IsZero() || mt.Released.IsZero() || mt.Gone.IsZero() {
			t.Errorf("old machine %s: marked %v, released %v, gone %v", n, mt.DeletionTimestamp, mt.Released, mt.Gone)
			continue
		}
		if !v.passedBetween(mt.DeletionTimestamp.Add(-time.Second), mt.Released) {
			t.Errorf("machine %s was released at %s, with no verification begun after KCP marked it (%s) passed before",
				n, mt.Released.Format(time.StampMilli), mt.DeletionTimestamp.Format(time.StampMilli))
		}
		if held := mt.Released.Sub(mt.DeletionTimestamp); held < v.delay {
			t.Errorf("machine %s held %s, less than one verification (%s)", n, held, v.delay)
		}
		if mt.Gone.Before(mt.Released) {
			t.Errorf("machine %s went before its gate released it", n)
		}
		t.Logf("machine %s: KCP marked it for deletion at %s; the gate held it %s; gone %s after release",
			n, mt.DeletionTimestamp.Format("15:04:05.000"), mt.Released.Sub(mt.DeletionTimestamp).Round(100*time.Millisecond), mt.Gone.Sub(mt.Released).Round(100*time.Millisecond))
	}
	if old != 3 {
		t.Errorf("%d old machines seen, want 3", old)
	}
	if !seen[second].Released.After(seen[first].Released) {
		t.Errorf("machine %s, held by the failed gate, was released at %s, before or with %s", second, seen[second].Released, seen[first].Released)
	}
	checkRecordedRollout(t, f.Client, st, fu, ns, from, to, seen, v.lastTargets())
}

// TestAbortLeavesRealClusterPaused: a FleetUpgrade with a canary cluster
// and a second cluster, of three machines each. Once the real
// KubeadmControlPlane replaced the canary's first machine and marked the
// second, the verifier fails and the gate holds that machine; the operator
// aborts. The FleetUpgrade ends Aborted, the canary's Cluster is paused at
// mixed versions and stays so (KCP deletes and creates nothing more, the
// held machine stays, its apiserver still serving), the second cluster is
// never bumped, and deleting the aborted FleetUpgrade unpauses nothing.
func TestAbortLeavesRealClusterPaused(t *testing.T) {
	t.Parallel() // each on a management cluster and local clusters of its own
	versions := kubebin.KubeVersions()
	from, to := "v"+versions[len(versions)-2], "v"+versions[len(versions)-1]
	v := &slowVerifier{delay: time.Second, inner: embeddedVerifier}
	f, st := startFleet(t, to, v)
	const ns = "default"
	labels := map[string]string{"fleet": "abort"}
	canary := localinfra.ClusterOptions{Namespace: ns, Name: "canary", Version: from, ControlPlaneReplicas: 3, Labels: labels}
	canary.APIServerExtraArgs = localinfratest.WireMVPArgs(canary)
	later := localinfra.ClusterOptions{Namespace: ns, Name: "later", Version: from, ControlPlaneReplicas: 3, Labels: labels}
	later.APIServerExtraArgs = localinfratest.WireMVPArgs(later)
	f.CreateCluster(t, canary)
	f.CreateCluster(t, later)
	f.WaitControlPlane(t, ns, canary.Name, from, 3, 10*time.Minute)
	f.WaitControlPlane(t, ns, later.Name, from, 3, 5*time.Minute)
	w := watchMachines(f, ns, canary.Name)
	defer w.Close()

	fu := newUpgrade("aborted", to, labels["fleet"], func(s *fleetv1.FleetUpgradeSpec) {
		s.CanaryCluster = &fleetv1.ClusterReference{Namespace: ns, Name: canary.Name}
	})
	ctx := context.Background()
	if err := f.Client.Create(ctx, fu); err != nil {
		t.Fatal(err)
	}
	var first, second string
	platformtest.Eventually(t, 10*time.Minute, "KubeadmControlPlane to mark a second old machine", func(context.Context) error {
		marked := w.Marked(from)
		if len(marked) < 2 {
			return fmt.Errorf("marked: %v", marked)
		}
		first, second = marked[0], marked[1]
		return nil
	})
	v.setFailing(true)
	platformtest.Eventually(t, 3*time.Minute, "the gate to fail", func(ctx context.Context) error {
		got := &fleetv1.FleetUpgrade{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePausedCondition); c == nil || c.Reason != fleetv1.FleetUpgradeGateFailedReason {
			return fmt.Errorf("Paused %+v", c)
		}
		return nil
	})

	updateSpec(t, f.Client, fu, func(spec *fleetv1.FleetUpgradeSpec) { spec.Abort = true })
	abortedAt := time.Now()
	got := &fleetv1.FleetUpgrade{}
	platformtest.Eventually(t, 3*time.Minute, "the FleetUpgrade Aborted and observed", func(ctx context.Context) error {
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
			return err
		}
		if got.Status.Phase != fleetv1.FleetUpgradePhaseAborted || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("phase %s, observed generation %d of %d", got.Status.Phase, got.Status.ObservedGeneration, got.Generation)
		}
		return nil
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradeReadyCondition); c == nil || c.Reason != fleetv1.FleetUpgradeAbortedReason {
		t.Errorf("Ready = %+v", c)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePausedCondition); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, ns+"/"+canary.Name) {
		t.Errorf("Paused = %+v", c)
	}
	for _, cs := range got.Status.Clusters {
		if cs.Phase != fleetv1.ClusterUpgradePhaseAborted {
			t.Errorf("cluster %s: phase %s, want %s", cs.Name, cs.Phase, fleetv1.ClusterUpgradePhaseAborted)
		}
	}
	if len(got.Status.Clusters) != 2 {
		t.Errorf("clusters %+v, want the canary and the later one", got.Status.Clusters)
	}
	if run := upgradeRun(t, st, string(got.UID)); run.State != store.UpgradeAborted {
		t.Errorf("run state %q", run.State)
	}

	// Cluster API stops where the abort left it: 20 s on, nothing more
	// went or came, and the held machine's apiserver still serves.
	time.Sleep(20 * time.Second)
	checkStopped := func(when string) {
		t.Helper()
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: later.Name + "-control-plane"}, kcp); err != nil {
			t.Fatal(err)
		}
		if kcp.Spec.Version != from {
			t.Errorf("%s: the cluster after the canary was bumped to %s", when, kcp.Spec.Version)
		}
		c := &clusterv1.Cluster{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: canary.Name}, c); err != nil {
			t.Fatal(err)
		}
		if !ptr.Deref(c.Spec.Paused, false) {
			t.Errorf("%s: the canary's Cluster is not paused", when)
		}
		seen := byName(w)
		var gone, created []string
		for n, mt := range seen {
			if !mt.Gone.IsZero() {
				gone = append(gone, n)
			}
			if mt.Version == to {
				created = append(created, n)
			}
		}
		if !slices.Equal(gone, []string{first}) || len(created) != 1 {
			t.Errorf("%s: machines gone %v, new machines %v; want only %s gone and one new machine", when, gone, created, first)
		}
		held := &clusterv1.Machine{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: second}, held); err != nil {
			t.Errorf("%s: machine %s, held when the operator aborted: %v", when, second, err)
		}
	}
	checkStopped(fmt.Sprintf("%s after the abort", time.Since(abortedAt).Round(time.Second)))
	if _, err := f.WorkloadClient(t, ns, canary.Name).CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the canary's apiservers after the abort: %v", err)
	}

	// Deleting the aborted FleetUpgrade does not take the abort back.
	if err := f.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "the FleetUpgrade gone", func(ctx context.Context) error {
		cur := &fleetv1.FleetUpgrade{}
		if err := f.Client.Get(ctx, client.ObjectKeyFromObject(fu), cur); err == nil {
			return fmt.Errorf("still there, phase %s, finalizers %v", cur.Status.Phase, cur.Finalizers)
		}
		return nil
	})
	time.Sleep(5 * time.Second)
	checkStopped("after the FleetUpgrade's deletion")
}

// checkWired checks that the Succeeded FleetUpgrade fu wired the Mixed
// Version Proxy on cluster ns/name before its bump: the cluster's
// KubeadmControlPlane carries the flag, and its machines seen (initial
// were there before) hold a wiring rollout of three machines at from,
// each made before the first machine at to, recorded as a wiring step
// before the bump.
func checkWired(t *testing.T, c client.Client, st *store.Store, fu *fleetv1.FleetUpgrade, ns, name, from, to string, initial, seen map[string]*localinfratest.MachineLife) {
	t.Helper()
	ctx := context.Background()
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-control-plane"}, kcp); err != nil {
		t.Fatal(err)
	}
	if kcp.Spec.Version != to {
		t.Errorf("KubeadmControlPlane %s/%s runs %s after the upgrade, want %s", ns, name, kcp.Spec.Version, to)
	}
	args := map[string]string{}
	for _, a := range kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs {
		args[a.Name] = ptr.Deref(a.Value, "")
	}
	if args["peer-ca-file"] != "/etc/kubernetes/pki/ca.crt" {
		t.Errorf("extraArgs = %v, want peer-ca-file /etc/kubernetes/pki/ca.crt", args)
	}
	var wired []string
	var firstNew time.Time
	for n, mt := range seen {
		switch {
		case initial[n] != nil:
		case mt.Version == from:
			wired = append(wired, n)
		case firstNew.IsZero() || mt.Created.Before(firstNew):
			firstNew = mt.Created
		}
	}
	if len(wired) != 3 {
		t.Errorf("the wiring rollout made %v, want three machines of %s", wired, from)
	}
	for _, n := range wired {
		if !seen[n].Created.Before(firstNew) {
			t.Errorf("machine %s of the wiring rollout was made at %s, after the first machine of %s (%s)", n, seen[n].Created, to, firstNew)
		}
	}
	steps, err := st.ListUpgradeSteps(ctx, upgradeRun(t, st, string(fu.UID)).ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, s := range steps {
		if s.Cluster == ns+"/"+name && (s.Kind == fleetupgrade.StepKindWireMVP || (s.Kind == fleetupgrade.StepKindBump && !strings.HasPrefix(s.Message, "MachineDeployment "))) {
			kinds = append(kinds, s.Kind)
		}
	}
	if !slices.Equal(kinds, []string{fleetupgrade.StepKindWireMVP, fleetupgrade.StepKindBump}) {
		t.Errorf("recorded %v for %s/%s, want the wiring, then the bump", kinds, ns, name)
	}
}

// checkWorkersFollowed checks that the workers of cluster ns/name run to,
// on new Machines with ready Nodes of that kubelet version, and that the
// FleetUpgrade bumped their MachineDeployment only after every machine of
// the control plane had been verified at to.
func checkWorkersFollowed(t *testing.T, f *localinfratest.Fleet, st *store.Store, fu *fleetv1.FleetUpgrade, ns, name, from, to string) {
	t.Helper()
	ctx := context.Background()
	mdName := name + "-md-0"
	md := &clusterv1.MachineDeployment{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mdName}, md); err != nil {
		t.Fatal(err)
	}
	if md.Spec.Template.Spec.Version != to {
		t.Errorf("MachineDeployment %s runs %s after the upgrade, want %s", mdName, md.Spec.Template.Spec.Version, to)
	}
	workload := f.WorkloadClient(t, ns, name)
	platformtest.Eventually(t, time.Minute, "the worker on "+to+" with a ready Node", func(ctx context.Context) error {
		var machines clusterv1.MachineList
		if err := f.Client.List(ctx, &machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: mdName}); err != nil {
			return err
		}
		if len(machines.Items) != 1 {
			return fmt.Errorf("%d worker Machines, want 1", len(machines.Items))
		}
		m := machines.Items[0]
		if m.Spec.Version != to || !m.Status.NodeRef.IsDefined() {
			return fmt.Errorf("worker Machine %s at %s, nodeRef %v", m.Name, m.Spec.Version, m.Status.NodeRef)
		}
		n, err := workload.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Status.NodeInfo.KubeletVersion != to {
			return fmt.Errorf("Node %s reports kubelet %s, want %s", n.Name, n.Status.NodeInfo.KubeletVersion, to)
		}
		return nil
	})
	got := &fleetv1.FleetUpgrade{}
	if err := f.Client.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
		t.Fatal(err)
	}
	steps, err := st.ListUpgradeSteps(ctx, upgradeRun(t, st, string(got.UID)).ID)
	if err != nil {
		t.Fatal(err)
	}
	var workersBumped, lastMachine time.Time
	for _, s := range steps {
		if s.Cluster != ns+"/"+name {
			continue
		}
		switch {
		case s.Kind == fleetupgrade.StepKindBump && strings.HasPrefix(s.Message, "MachineDeployment "+mdName+":"):
			if s.FromVersion != from || s.ToVersion != to || s.Outcome != store.StepPassed {
				t.Errorf("the workers' bump step: %+v", s)
			}
			workersBumped = s.StartedAt
		case s.Kind == fleetupgrade.StepKindVerify && s.Machine != "" && s.Outcome == store.StepPassed && s.StartedAt.After(lastMachine):
			lastMachine = s.StartedAt
		}
	}
	if workersBumped.IsZero() || lastMachine.IsZero() || !workersBumped.After(lastMachine) {
		t.Errorf("the workers were bumped at %v, the last control-plane machine verified at %v: want the workers after", workersBumped, lastMachine)
	}
}

// waitSucceeded waits until the FleetUpgrade's phase is Succeeded and
// returns it.
func waitSucceeded(t *testing.T, c client.Client, fu *fleetv1.FleetUpgrade, timeout time.Duration) *fleetv1.FleetUpgrade {
	t.Helper()
	got := &fleetv1.FleetUpgrade{}
	platformtest.Eventually(t, timeout, "the FleetUpgrade Succeeded", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
			return err
		}
		if got.Status.Phase != fleetv1.FleetUpgradePhaseSucceeded {
			return fmt.Errorf("phase %s: %v", got.Status.Phase, got.Status.Conditions)
		}
		return nil
	})
	return got
}

// checkRecordedRollout checks what a Succeeded rollout of the three
// machines in seen, in namespace ns, left: the FleetUpgrade's status, the
// records, the new Machines without the gate's hook, and the last round's
// targets.
func checkRecordedRollout(t *testing.T, c client.Client, st *store.Store, fu *fleetv1.FleetUpgrade, ns, from, to string, seen map[string]*localinfratest.MachineLife, targets []verify.Target) {
	t.Helper()
	ctx := context.Background()
	got := &fleetv1.FleetUpgrade{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(fu), got); err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradeReadyCondition); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v", ready)
	}
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
	}
	var oldMachines, newMachines []string
	for n, mt := range seen {
		if mt.Version == from {
			oldMachines = append(oldMachines, n)
		} else {
			newMachines = append(newMachines, n)
		}
	}
	slices.Sort(oldMachines)
	slices.Sort(newMachines)
	if len(got.Status.Clusters) != 1 || got.Status.Clusters[0].Phase != fleetv1.ClusterUpgradePhaseSucceeded {
		t.Fatalf("clusters %+v", got.Status.Clusters)
	}
	var stepMachines []string
	for _, s := range got.Status.Clusters[0].Steps {
		stepMachines = append(stepMachines, s.Machine)
		if s.Verdict != fleetv1.StepVerdictPassed || s.NewVersion != to || s.OldVersion != from {
			t.Errorf("step %+v", s)
		}
	}
	slices.Sort(stepMachines)
	if !slices.Equal(stepMachines, newMachines) {
		t.Errorf("steps cover %v, want the new machines %v", stepMachines, newMachines)
	}

	run := upgradeRun(t, st, string(got.UID))
	if run.State != store.UpgradeSucceeded {
		t.Errorf("run state %q", run.State)
	}
	steps, err := st.ListUpgradeSteps(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]string{}
	for _, s := range steps {
		if s.Kind == fleetupgrade.StepKindVerify && s.Outcome == store.StepPassed && s.Machine != "" {
			probes, err := st.ListProbes(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(probes) == 0 {
				t.Errorf("verify step %s of %s has no probes", s.ID, s.Machine)
			}
		}
		if s.Kind != fleetupgrade.StepKindVerify || s.Outcome == store.StepPassed {
			kinds[s.Kind] = append(kinds[s.Kind], s.Machine)
		}
	}
	verified := slices.Compact(slices.Sorted(slices.Values(slices.DeleteFunc(kinds[fleetupgrade.StepKindVerify], func(m string) bool { return m == "" }))))
	if !slices.Equal(verified, newMachines) {
		t.Errorf("passed verify steps name %v, want each new machine %v", verified, newMachines)
	}
	if n := len(kinds[fleetupgrade.StepKindBump]); n != 1 {
		t.Errorf("%d bump steps, want 1", n)
	}
	if n := len(kinds[fleetupgrade.StepKindMachine]); n != 3 {
		t.Errorf("%d machine steps, want 3", n)
	}
	released := slices.Sorted(slices.Values(kinds[fleetupgrade.StepKindRelease]))
	if !slices.Equal(released, oldMachines) {
		t.Errorf("release steps name %v, want one per old machine %v", released, oldMachines)
	}

	var hosts []string
	for _, n := range newMachines {
		m := &clusterv1.Machine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m.Annotations[fleetupgrade.GateHook]; ok {
			t.Errorf("machine %s keeps the gate's hook after the upgrade", n)
		}
		for _, a := range m.Status.Addresses {
			if a.Type == clusterv1.MachineInternalIP {
				hosts = append(hosts, m.Status.NodeRef.Name+"="+a.Address)
			}
		}
	}
	slices.Sort(hosts)
	var probed []string
	for _, tg := range targets {
		u, err := url.Parse(tg.Config.Host)
		if err != nil {
			t.Fatal(err)
		}
		probed = append(probed, tg.Name+"="+u.Hostname())
		if tg.Config.TLSClientConfig.ServerName != "kubernetes.default.svc" {
			t.Errorf("target %s: server name %q", tg.Name, tg.Config.TLSClientConfig.ServerName)
		}
	}
	slices.Sort(probed)
	if !slices.Equal(probed, hosts) {
		t.Errorf("the last round probed %v, want each new machine's node at its address %v", probed, hosts)
	}
}

// upgradeRun returns the recorded run of the FleetUpgrade with uid.
func upgradeRun(t *testing.T, st *store.Store, uid string) store.UpgradeRun {
	t.Helper()
	runs, err := st.UpgradeRunsByUID(context.Background(), []string{uid})
	if err != nil {
		t.Fatal(err)
	}
	run, ok := runs[uid]
	if !ok {
		t.Fatalf("no upgrade run recorded for %s", uid)
	}
	return run
}

// failedVerifyRecorded reports whether the run has a failed verify step
// whose probes hold the spurious 404.
func failedVerifyRecorded(t *testing.T, st *store.Store, runID string) bool {
	t.Helper()
	steps, err := st.ListUpgradeSteps(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.Kind != fleetupgrade.StepKindVerify || s.Outcome != store.StepFailed {
			continue
		}
		probes, err := st.ListProbes(context.Background(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range probes {
			if p.Status == 404 && p.Outcome == string(verify.Spurious404) {
				return true
			}
		}
	}
	return false
}

// waitEvent waits, up to timeout, for an Event with reason on the
// FleetUpgrade whose note holds note.
func waitEvent(t *testing.T, c client.Client, timeout time.Duration, upgrade, reason, note string) {
	t.Helper()
	platformtest.Eventually(t, timeout, fmt.Sprintf("a %s event on %s with %q", reason, upgrade, note), func(ctx context.Context) error {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs); err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Reason == reason && ev.Regarding.Name == upgrade && strings.Contains(ev.Note, note) {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(evs.Items))
	})
}

// updateSpec changes the FleetUpgrade's spec with change. The controller
// writes the status all along: it reads and writes again on a conflict,
// as the API's abort does.
func updateSpec(t *testing.T, c client.Client, fu *fleetv1.FleetUpgrade, change func(*fleetv1.FleetUpgradeSpec)) {
	t.Helper()
	ctx := context.Background()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &fleetv1.FleetUpgrade{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(fu), cur); err != nil {
			return err
		}
		change(&cur.Spec)
		return c.Update(ctx, cur)
	}); err != nil {
		t.Fatalf("updating FleetUpgrade %s: %v", fu.Name, err)
	}
}

// setPaused sets the FleetUpgrade's spec.paused, as the console's Pause
// and Resume buttons do.
func setPaused(t *testing.T, c client.Client, fu *fleetv1.FleetUpgrade, paused bool) {
	t.Helper()
	cur := &fleetv1.FleetUpgrade{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(fu), cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	cur.Spec.Paused = paused
	if err := c.Patch(context.Background(), cur, client.MergeFrom(base)); err != nil {
		t.Fatalf("setting spec.paused to %t: %v", paused, err)
	}
}
