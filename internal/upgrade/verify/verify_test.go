package verify_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/upgrade/verify"
)

var apps = schema.GroupVersionResource{Group: "platform.bex.co", Version: "v1alpha1", Resource: "apps"}

// TestVerdicts runs the verifier on a 1.36.3 and a 1.37.2 apiserver on one
// etcd: with MVP wired every skew probe is proxied and the verdict passes;
// without it the 1.36.3 server gives spurious 404s for exactly the
// resources only 1.37.2 serves, and the verdict fails.
func TestVerdicts(t *testing.T) {
	for _, wired := range []bool{true, false} {
		name := map[bool]string{true: "wired", false: "not wired"}[wired]
		t.Run(name, func(t *testing.T) {
			cp := cptest.Start(t,
				controlplane.APIServerSpec{Name: "old", Version: "1.36.3", NoMVP: !wired},
				controlplane.APIServerSpec{Name: "new", Version: "1.37.2", NoMVP: !wired},
			)
			targets := []verify.Target{
				{Name: "old", Config: cp.APIServer("old").RESTConfig()},
				{Name: "new", Config: cp.APIServer("new").RESTConfig()},
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var rep verify.Report
			var err error
			for {
				// Right after a peer starts, its discovery is not synced
				// yet: a wired plane passes within seconds.
				rep, err = verify.Run(ctx, targets, verify.Options{Always: []schema.GroupVersionResource{apps}})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Passed() || !wired {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("wired plane never passed: %+v", rep.Failures())
				case <-time.After(250 * time.Millisecond):
				}
			}
			oldSkew := rep.SkewSets["old"]
			if len(oldSkew) == 0 {
				t.Fatal("no skew set for the 1.36.3 server: 1.37.2 serves nothing it lacks?")
			}
			if len(rep.SkewSets["new"]) != 0 {
				t.Fatalf("1.37.2 lacks resources 1.36.3 serves: %v", rep.SkewSets["new"])
			}
			counts := map[verify.Outcome]int{}
			for _, p := range rep.Probes {
				counts[p.Outcome]++
				if p.Resource == apps && p.Outcome != verify.ServedLocally {
					t.Errorf("%s on %s: %s (%d), want ServedLocally", p.Resource, p.APIServer, p.Outcome, p.Status)
				}
				if p.Resource != apps && p.APIServer != "old" {
					t.Errorf("skew probe on %s: %+v", p.APIServer, p)
				}
			}
			if wired {
				if !rep.Passed() || counts[verify.Proxied] != len(oldSkew) {
					t.Fatalf("wired: %d of %d skew probes proxied, failures %+v", counts[verify.Proxied], len(oldSkew), rep.Failures())
				}
				return
			}
			if rep.Passed() || counts[verify.Spurious404] != len(oldSkew) {
				t.Fatalf("not wired: %d spurious 404s for a skew set of %d, want all; probes %+v", counts[verify.Spurious404], len(oldSkew), rep.Probes)
			}
		})
	}
}
