package fleetupgrade_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers/fleetupgrade"
)

// TestUpgradeMetrics: an upgrade of a three-machine cluster counts its
// reconcile phases, a passed verification per machine replaced (and the
// one before the version bump), and the verifier's probes by outcome, in
// the registry the Reconciler was given. The kubeconfig Secret each
// verification reads is read uncached: the manager lists and watches no
// Secret.
func TestUpgradeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := startEnv(t, func(r *fleetupgrade.Reconciler) { r.Metrics = reg })
	sim := e.createCluster(fixture{ns: "fleet-m", name: "mike", version: "v1.36.3", labels: map[string]string{"fleet": "m"}, extraArgs: wired})
	go sim.run(e.ctx)
	if err := e.c.Create(e.ctx, newUpgrade("metered", "v1.37.2", "m")); err != nil {
		t.Fatal(err)
	}
	e.waitPhase("metered", fleetv1.FleetUpgradePhaseSucceeded)

	steps, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, f := range steps {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			counts[key] = m.GetCounter().GetValue()
		}
	}
	for _, key := range []string{
		"bex_fleetupgrade_steps_total outcome=continue step=plan",
		"bex_fleetupgrade_steps_total outcome=passed step=verify",
		"bex_verifier_probes_total outcome=Proxied",
	} {
		if counts[key] < 1 {
			t.Errorf("%s = %v, want at least 1; all: %v", key, counts[key], counts)
		}
	}
	if n := counts["bex_fleetupgrade_steps_total outcome=passed step=verify"]; n < 3 {
		t.Errorf("%v passed verifications, want one per machine replaced at least (3)", n)
	}
	// Each verification read the cluster's kubeconfig Secret, uncached.
	if reqs := e.secretLists.Requests(); len(reqs) > 0 {
		t.Errorf("the manager listed or watched Secrets with their data (a full Secret cache): %s", strings.Join(reqs, "; "))
	}
}
