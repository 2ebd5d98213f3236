package fleetupgrade_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/internal/hetzner"
	"bex.co/bex/internal/hetzner/hcloudfake"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

// newHcloud starts a fake Hetzner API with the location the fixtures use.
func newHcloud(t *testing.T) *hcloudfake.Fake {
	t.Helper()
	f := hcloudfake.New(hcloudfake.Options{})
	t.Cleanup(f.Close)
	f.AddLocation("fsn1", "eu-central")
	return f
}

// withHandoff turns the hand-off on against the fake, as production wires
// it (HetznerLoadBalancers), with no drain and short retries.
func withHandoff(f *hcloudfake.Fake) func(*fleetupgrade.Reconciler) {
	return func(r *fleetupgrade.Reconciler) {
		r.LoadBalancers = fleetupgrade.HetznerLoadBalancers(f.Client(), hetzner.HandoffOptions{DrainPeriod: -1, PollInterval: 10 * time.Millisecond})
		r.Options.HandoffRetryInterval = 100 * time.Millisecond
		r.Options.HandoffMaxRetryInterval = 400 * time.Millisecond
	}
}

func eventOf(events []hcloudfake.Event, kind hcloudfake.EventKind, server int64) (hcloudfake.Event, bool) {
	for _, e := range events {
		if e.Kind == kind && e.ServerID == server {
			return e, true
		}
	}
	return hcloudfake.Event{}, false
}

// checkHandoffOrder checks the fake's event log: each old machine's server
// left the load balancer before it was deleted (and was no target when it
// was), and each new one joined it before the next old one left.
func checkHandoffOrder(t *testing.T, sim *kcpSim, f *hcloudfake.Fake, old, fresh []string) {
	t.Helper()
	events := f.Events()
	removed := map[string]hcloudfake.Event{}
	for _, name := range old {
		id := sim.serverID(name)
		rm, ok1 := eventOf(events, hcloudfake.EventTargetRemoved, id)
		del, ok2 := eventOf(events, hcloudfake.EventServerDeleted, id)
		if !ok1 || !ok2 {
			t.Errorf("server %s (%d): removed from the load balancer %t, deleted %t; events %+v", name, id, ok1, ok2, events)
			continue
		}
		if rm.Seq >= del.Seq {
			t.Errorf("server %s: deleted at #%d, removed from the load balancer at #%d: it must leave first", name, del.Seq, rm.Seq)
		}
		if del.Detail != "not a load balancer target" {
			t.Errorf("server %s deleted while %s", name, del.Detail)
		}
		removed[name] = rm
	}
	for i, name := range fresh {
		add, ok := eventOf(events, hcloudfake.EventTargetAdded, sim.serverID(name))
		if !ok {
			t.Errorf("server %s never joined the load balancer; events %+v", name, events)
			continue
		}
		if i+1 < len(old) {
			if next, ok := removed[old[i+1]]; ok && add.Seq >= next.Seq {
				t.Errorf("server %s joined at #%d, after %s left at #%d: the rollout went on before the new server was in", name, add.Seq, old[i+1], next.Seq)
			}
		}
	}
}

func (e *env) hookedMachines(ns, kcp string) []string {
	e.t.Helper()
	var list clusterv1.MachineList
	if err := e.c.List(e.ctx, &list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: kcp}); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, m := range list.Items {
		if _, ok := m.Annotations[fleetupgrade.HandoffHook]; ok {
			out = append(out, m.Name)
		}
	}
	return out
}

// TestLoadBalancerHandoff: a three-machine version bump with the Hetzner
// hand-off. Every control-plane Machine carries the pre-drain hook, so
// Cluster API (the simulator) deletes no server before the controller took
// it out of the load balancer; every new server joins the load balancer
// before the next old one leaves; each hand-off is recorded; the hooks are
// gone once the cluster is upgraded.
func TestLoadBalancerHandoff(t *testing.T) {
	hc := newHcloud(t)
	e := startEnv(t, withHandoff(hc))
	sim := e.createCluster(fixture{ns: "fleet-h", name: "hotel", version: "v1.36.3", labels: map[string]string{"fleet": "h"}, extraArgs: wired,
		hcloud: hc, loadBalancer: "hotel-kube-api"})
	go sim.run(e.ctx)

	if err := e.c.Create(e.ctx, newUpgrade("handoff", "v1.37.2", "h")); err != nil {
		t.Fatal(err)
	}
	got := e.waitPhase("handoff", fleetv1.FleetUpgradePhaseSucceeded)

	old, fresh := []string{"cp-1", "cp-2", "cp-3"}, []string{"cp-4", "cp-5", "cp-6"}
	if d := sim.deletedMachines(); !slices.Equal(d, old) {
		t.Errorf("deleted = %v", d)
	}
	checkHandoffOrder(t, sim, hc, old, fresh)
	want := []int64{sim.serverID("cp-4"), sim.serverID("cp-5"), sim.serverID("cp-6")}
	if targets := hc.Targets(sim.loadBalancer); !slices.Equal(targets, want) {
		t.Errorf("load balancer targets = %v, want the new servers %v", targets, want)
	}
	if h := e.hookedMachines("fleet-h", "hotel"); len(h) != 0 {
		t.Errorf("machines %v still carry %s after the upgrade", h, fleetupgrade.HandoffHook)
	}
	var handoffs []string
	for _, st := range e.records.stepsOf(fleetupgrade.StepKindLBHandoff) {
		if st.Outcome != store.StepPassed || st.Cluster != "fleet-h/hotel" {
			t.Errorf("hand-off step %+v", st)
		}
		handoffs = append(handoffs, st.Machine)
	}
	slices.Sort(handoffs)
	if !slices.Equal(handoffs, []string{"cp-1", "cp-2", "cp-3", "cp-4", "cp-5", "cp-6"}) {
		t.Errorf("hand-off steps for %v, want one per old and new machine", handoffs)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePausedCondition); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Paused = %+v", c)
	}
}

// TestLoadBalancerHandoffFailureHoldsTheMachine: the Hetzner API refuses
// to remove the first old server from the load balancer. The Machine
// Cluster API is deleting keeps the hook and its server (still a target),
// no replacement is created, the FleetUpgrade is Paused with the API's
// error (condition, Event, a failed hand-off step), and the removal is
// retried. Once the API accepts it, the rollout goes on to the end with
// every server leaving before its deletion.
func TestLoadBalancerHandoffFailureHoldsTheMachine(t *testing.T) {
	hc := newHcloud(t)
	e := startEnv(t, withHandoff(hc))
	sim := e.createCluster(fixture{ns: "fleet-i", name: "india", version: "v1.36.3", labels: map[string]string{"fleet": "i"}, extraArgs: wired,
		hcloud: hc, loadBalancer: "india-kube-api"})
	removeTarget := "/load_balancers/" + strconv.FormatInt(sim.loadBalancer, 10) + "/actions/remove_target"
	hc.FailAlways(http.MethodPost, removeTarget, http.StatusForbidden, string(hcloud.ErrorCodeForbidden), "insufficient permissions for this request")
	go sim.run(e.ctx)

	if err := e.c.Create(e.ctx, newUpgrade("refused", "v1.37.2", "i")); err != nil {
		t.Fatal(err)
	}
	got := e.waitCondition("refused", fleetv1.FleetUpgradePausedCondition, metav1.ConditionTrue, fleetv1.FleetUpgradeLoadBalancerHandoffFailedReason)
	paused := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePausedCondition)
	for _, want := range []string{"fleet-i/india", "cp-1", "india-kube-api", "insufficient permissions for this request", fleetupgrade.HandoffHook} {
		if !strings.Contains(paused.Message, want) {
			t.Errorf("Paused message %q lacks %q", paused.Message, want)
		}
	}
	if got.Status.Phase != fleetv1.FleetUpgradePhasePaused {
		t.Errorf("phase %s", got.Status.Phase)
	}

	// The removal is retried, and refused each time; meanwhile the
	// machine stays.
	platformtest.Eventually(t, waitTimeout, "three refused removals", func(context.Context) error {
		n := 0
		for _, r := range hc.Requests() {
			if r == http.MethodPost+" "+removeTarget {
				n++
			}
		}
		if n < 3 {
			return fmt.Errorf("%d removals", n)
		}
		return nil
	})
	m := &clusterv1.Machine{}
	e.get(m, "fleet-i", "cp-1")
	if m.DeletionTimestamp.IsZero() || m.Annotations[fleetupgrade.HandoffHook] != "refused" {
		t.Errorf("cp-1: deletionTimestamp %v, annotations %v; want being deleted and held by the hook", m.DeletionTimestamp, m.Annotations)
	}
	id := sim.serverID("cp-1")
	if !hc.ServerExists(id) || !slices.Contains(hc.Targets(sim.loadBalancer), id) {
		t.Errorf("server cp-1: exists %t, targets %v; want it kept in the load balancer", hc.ServerExists(id), hc.Targets(sim.loadBalancer))
	}
	if ms := e.machines("fleet-i", "india"); !mapsEqual(ms, map[string]string{"cp-1": "v1.36.3", "cp-2": "v1.36.3", "cp-3": "v1.36.3"}) {
		t.Errorf("machines = %v", ms)
	}
	var failed []store.UpgradeStep
	for _, st := range e.records.stepsOf(fleetupgrade.StepKindLBHandoff) {
		if st.Outcome == store.StepFailed {
			failed = append(failed, st)
		}
	}
	if len(failed) != 1 || failed[0].Machine != "cp-1" || !strings.Contains(failed[0].Message, "insufficient permissions") {
		t.Errorf("failed hand-off steps = %+v, want one for cp-1 with the API's error", failed)
	}
	waitEvent(t, e.c, waitTimeout, "refused", fleetv1.FleetUpgradeLoadBalancerHandoffFailedReason, "insufficient permissions")

	// The API accepts the removal: the rollout goes on to the end.
	hc.ClearFailures()
	got = e.waitPhase("refused", fleetv1.FleetUpgradePhaseSucceeded)
	checkHandoffOrder(t, sim, hc, []string{"cp-1", "cp-2", "cp-3"}, []string{"cp-4", "cp-5", "cp-6"})
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1.FleetUpgradePausedCondition); c.Status != metav1.ConditionFalse {
		t.Errorf("Paused = %+v", c)
	}
	if h := e.hookedMachines("fleet-i", "india"); len(h) != 0 {
		t.Errorf("machines %v still carry the hook", h)
	}
}
