package verify_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/mvp"
	"bex.co/bex/internal/upgrade/verify"
	"bex.co/bex/test/platformtest"
)

// TestStaleLeaseAfterSIGKILL kills the only 1.37.2 apiserver of a plane with
// two 1.36.3 ones, all wired: the survivors answer 503 for what only it
// served, for as long as its identity lease stays. The verifier finds the
// trap (Honest503 on the survivors, the lease stale); run with
// RemoveStaleLeases it deletes the lease, the 503s stop (404: nobody serves
// the resource now) and the next round passes. The test log says how long
// the 503s lasted. The plane keeps the dead server's lease
// (KeepDeadLeases), as on machines where nobody saw the loss; by default it
// removes the lease itself.
func TestStaleLeaseAfterSIGKILL(t *testing.T) {
	cp := cptest.StartWith(t, controlplane.Options{KeepDeadLeases: true, APIServers: []controlplane.APIServerSpec{
		{Name: "old-a", Version: "1.36.3"},
		{Name: "old-b", Version: "1.36.3"},
		{Name: "new", Version: "1.37.2"},
	}})
	const staleAfter = 20 * time.Second
	opts := verify.Options{StaleLeaseAfter: staleAfter}
	rep := runUntil(t, time.Minute, targetsOf(cp, "old-a", "old-b", "new"), opts, verify.Report.Passed)
	if !rep.Passed() {
		t.Fatal("the plane never passed before the kill")
	}
	skew := rep.SkewSets["old-a"]
	if len(skew) == 0 {
		t.Fatal("old-a has no skew set: 1.37.2 serves nothing 1.36.3 lacks?")
	}
	gvr := skew[0]
	survivor := cp.APIServer("old-a").RESTConfig()

	if err := cp.KillAPIServer("new"); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	survivors := targetsOf(cp, "old-a", "old-b")

	// Until the lease counts as stale, every probe of gvr is a 503, and the
	// verifier says so and names the lease.
	first503 := waitStatus(t, survivor, gvr, http.StatusServiceUnavailable, 30*time.Second)
	t.Logf("first 503 on old-a for %v %.1fs after the SIGKILL", verify.GVRString(gvr), first503.Sub(killed).Seconds())
	rep = runUntil(t, 90*time.Second, survivors, opts, func(r verify.Report) bool { return staleLease(r) != nil })
	lease := staleLease(rep)
	if lease == nil || lease.Hostname != "new" || lease.Removed {
		t.Fatalf("leases after the kill: %+v, want the lease of new, stale and kept", rep.Leases)
	}
	if rep.Passed() {
		t.Fatal("the verdict passed with a stale lease")
	}
	honest := 0
	for _, p := range rep.Failures() {
		if p.Outcome != verify.Honest503 {
			t.Errorf("failure %+v, want only Honest503", p)
		}
		honest++
	}
	if honest < 2 {
		t.Errorf("%d Honest503 probes, want one at least on each survivor; skew sets %v, discovery %+v", honest, rep.SkewSets, rep.Discovery)
	}
	t.Logf("round with the stale lease kept: %d Honest503 probes, lease %s unrenewed %v, metric deltas %+v",
		honest, lease.Name, lease.Unrenewed.Duration.Round(time.Second), rep.Metrics)
	if status(t, survivor, gvr) != http.StatusServiceUnavailable {
		t.Fatal("the 503s stopped before the lease was removed")
	}
	beforeRemoval := time.Since(killed)

	opts.RemoveStaleLeases = true
	removing := time.Now()
	rep = runUntil(t, time.Minute, survivors, opts, func(r verify.Report) bool { return len(r.Leases) > 0 })
	if l := staleLease(rep); l == nil || !l.Removed {
		t.Fatalf("leases with RemoveStaleLeases: %+v, want the lease of new removed", rep.Leases)
	}
	outcomes := map[verify.Outcome]int{}
	for _, p := range rep.Probes {
		outcomes[p.Outcome]++
	}
	t.Logf("the removing round took %.1fs; its probes: %v", time.Since(removing).Seconds(), outcomes)
	stopped := waitStatus(t, survivor, gvr, http.StatusNotFound, time.Minute)
	t.Logf("503s on old-a: still there %.1fs after the SIGKILL, when the removing round started; 404 at most %.1fs after that (%.1fs after the SIGKILL)",
		beforeRemoval.Seconds(), stopped.Sub(removing).Seconds(), stopped.Sub(killed).Seconds())

	opts.RemoveStaleLeases = false
	rep = runUntil(t, time.Minute, survivors, opts, verify.Report.Passed)
	if !rep.Passed() {
		t.Fatalf("after the removal: failures %+v, findings %+v", rep.Failures(), rep.Findings)
	}
	if len(rep.Leases) != 2 {
		t.Errorf("leases after the removal: %+v, want the survivors' two", rep.Leases)
	}
}

func staleLease(r verify.Report) *verify.Lease {
	for i, l := range r.Leases {
		if l.Stale {
			return &r.Leases[i]
		}
	}
	return nil
}

// waitStatus polls a list of gvr until it answers want, and returns when.
func waitStatus(t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource, want int, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	platformtest.Eventually(t, timeout, fmt.Sprintf("list %v to answer %d", gvr, want), func(context.Context) error {
		if got := status(t, cfg, gvr); got != want {
			return fmt.Errorf("status %d", got)
		}
		at = time.Now()
		return nil
	})
	return at
}

func status(t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource) int {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+mvp.ListPath(gvr)+"?limit=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("list %v: %v", gvr, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
