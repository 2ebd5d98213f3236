package fleetupgrade_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	fleetv1 "bex.co/bex/apis/fleet/v1alpha1"
	"bex.co/bex/controllers/fleetupgrade"
	"bex.co/bex/internal/upgrade/plan"
	"bex.co/bex/internal/upgrade/verify"
	"bex.co/bex/test/platformtest"
)

// The management cluster is verified by the ManagementVerifier (which
// probes the platform's own APIs there); a workload cluster by Verifier.
func TestManagementClusterHasItsOwnVerifier(t *testing.T) {
	mgmt := &fakeVerifier{}
	e := startEnv(t, func(r *fleetupgrade.Reconciler) { r.ManagementVerifier = mgmt })
	work := e.createCluster(fixture{ns: "fleet-a", name: "work", version: "v1.36.3", labels: map[string]string{"fleet": "a"}, extraArgs: wired})
	go work.run(e.ctx)
	self := e.createCluster(fixture{ns: "fleet-m", name: "management", version: "v1.36.3",
		labels: map[string]string{"fleet": "a", plan.ManagementLabel: "true"}, extraArgs: wired})
	go self.run(e.ctx)

	if err := e.c.Create(e.ctx, newUpgrade("to-137", "v1.37.2", "a")); err != nil {
		t.Fatal(err)
	}
	// The management cluster goes last: once the workload cluster is done,
	// Verifier must not be called again.
	platformtest.Eventually(t, waitTimeout, "the workload cluster upgraded", func(context.Context) error {
		cs := clusterStatus(e.upgrade("to-137"), "fleet-a/work")
		if cs == nil || cs.Phase != fleetv1.ClusterUpgradePhaseSucceeded {
			return fmt.Errorf("its status: %+v", cs)
		}
		return nil
	})
	workCalls := e.verifier.callCount()
	e.waitPhase("to-137", fleetv1.FleetUpgradePhaseSucceeded)

	if workCalls < 3 {
		t.Errorf("Verifier was called %d times for the workload cluster's 3 machines", workCalls)
	}
	if n := e.verifier.callCount(); n != workCalls {
		t.Errorf("Verifier was called %d more times after the workload cluster was done", n-workCalls)
	}
	if n := mgmt.callCount(); n < 3 {
		t.Errorf("ManagementVerifier was called %d times for the management cluster's 3 machines", n)
	}
	for _, m := range self.createdMachines() {
		if m.version != "v1.37.2" {
			continue
		}
		found := false
		for _, call := range mgmt.calls {
			found = found || slices.ContainsFunc(call, func(tg verify.Target) bool { return tg.Name == m.name })
		}
		if !found {
			t.Errorf("the management cluster's new machine %s was never verified by ManagementVerifier", m.name)
		}
	}
}
