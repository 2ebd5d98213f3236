package verify_test

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/upgrade/verify"
)

var apps = schema.GroupVersionResource{Group: "platform.bex.co", Version: "v1alpha1", Resource: "apps"}

// runUntil runs the verifier until done accepts its report or the deadline
// passes, and returns the last report.
func runUntil(t *testing.T, timeout time.Duration, targets []verify.Target, opts verify.Options, done func(verify.Report) bool) verify.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	for {
		rep, err := verify.Run(ctx, targets, opts)
		if err != nil {
			t.Fatal(err)
		}
		if done(rep) {
			return rep
		}
		select {
		case <-ctx.Done():
			t.Logf("last report: failures %+v, findings %+v", rep.Failures(), rep.Findings)
			return rep
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func targetsOf(cp *controlplane.ControlPlane, names ...string) []verify.Target {
	var out []verify.Target
	for _, n := range names {
		out = append(out, verify.Target{Name: n, Config: cp.APIServer(n).RESTConfig()})
	}
	return out
}

// TestVerdicts runs the verifier on a 1.36.3 and a 1.37.2 apiserver on one
// etcd: with MVP wired every skew probe is proxied, the 1.36.3 server's
// merged discovery lists what it proxies and its rerouted counter rises, and
// the verdict passes; without it the 1.36.3 server gives spurious 404s for
// exactly the resources only 1.37.2 serves, its merged discovery lacks them
// (a finding), nothing is rerouted, and the verdict fails. Both ways each
// server creates, reads, lists and deletes an App itself, and no identity
// lease is stale.
func TestVerdicts(t *testing.T) {
	for _, wired := range []bool{true, false} {
		name := map[bool]string{true: "wired", false: "not wired"}[wired]
		t.Run(name, func(t *testing.T) {
			cp := cptest.Start(t,
				controlplane.APIServerSpec{Name: "old", Version: "1.36.3", NoMVP: !wired},
				controlplane.APIServerSpec{Name: "new", Version: "1.37.2", NoMVP: !wired},
			)
			targets := targetsOf(cp, "old", "new")
			opts := verify.Options{CRDs: []verify.CRDProbe{verify.AppProbe()}, Namespace: "default"}
			// Right after a peer starts, its discovery is not synced yet:
			// a wired plane passes within seconds.
			rep := runUntil(t, time.Minute, targets, opts, func(r verify.Report) bool { return r.Passed() || !wired })

			oldSkew := rep.SkewSets["old"]
			if len(oldSkew) == 0 {
				t.Fatal("no skew set for the 1.36.3 server: 1.37.2 serves nothing it lacks?")
			}
			t.Logf("skew set of the 1.36.3 server: %v", oldSkew)
			if len(rep.SkewSets["new"]) != 0 {
				t.Fatalf("1.37.2 lacks resources 1.36.3 serves: %v", rep.SkewSets["new"])
			}
			counts := map[verify.Outcome]int{}
			crdVerbs := map[string][]string{}
			for _, p := range rep.Probes {
				counts[p.Outcome]++
				if p.Resource == apps {
					crdVerbs[p.APIServer] = append(crdVerbs[p.APIServer], p.Verb)
					if p.Outcome != verify.ServedLocally {
						t.Errorf("%s %s on %s: %s (%d) %s, want ServedLocally", p.Verb, p.Resource, p.APIServer, p.Outcome, p.Status, p.Message)
					}
				}
				if p.Resource != apps && p.APIServer != "old" {
					t.Errorf("skew probe on %s: %+v", p.APIServer, p)
				}
			}
			for _, s := range []string{"old", "new"} {
				if want := []string{"create", "get", "list", "delete"}; !slices.Equal(crdVerbs[s], want) {
					t.Errorf("App probes on %s: %v, want %v", s, crdVerbs[s], want)
				}
			}
			left, err := dynamic.NewForConfigOrDie(cp.RESTConfig()).Resource(apps).Namespace("default").List(t.Context(), metav1.ListOptions{LabelSelector: verify.ProbeLabel})
			if err != nil || len(left.Items) != 0 {
				t.Errorf("probe Apps left behind: %v (%v)", left, err)
			}
			if len(rep.Leases) != 2 {
				t.Errorf("identity leases: %+v, want one for each server", rep.Leases)
			}
			for _, l := range rep.Leases {
				if l.Stale || l.Target == "" {
					t.Errorf("lease %+v: want the live lease of a target", l)
				}
			}
			diff := discovery(t, rep, "old")
			metrics := metricsOf(t, rep, "old")
			t.Logf("old: proxies %v, missing %v, metric deltas %+v", diff.Proxies, diff.Missing, metrics)

			if wired {
				if !rep.Passed() || counts[verify.Proxied] != len(oldSkew) {
					t.Fatalf("wired: %d of %d skew probes proxied, failures %+v, findings %+v", counts[verify.Proxied], len(oldSkew), rep.Failures(), rep.Findings)
				}
				for _, gvr := range oldSkew {
					if !slices.Contains(diff.Proxies, gvr) {
						t.Errorf("wired: merged discovery of old does not list %v as proxied", gvr)
					}
				}
				if metrics.Rerouted < float64(len(oldSkew)) || metrics.PeerProxyErrors != 0 {
					t.Errorf("wired: metric deltas on old %+v, want at least %d rerouted and no proxy error", metrics, len(oldSkew))
				}
				return
			}
			if rep.Passed() || counts[verify.Spurious404] != len(oldSkew) {
				t.Fatalf("not wired: %d spurious 404s for a skew set of %d, want all; probes %+v", counts[verify.Spurious404], len(oldSkew), rep.Probes)
			}
			if len(diff.Proxies) != 0 || len(diff.Missing) < len(oldSkew) {
				t.Errorf("not wired: old proxies %v and misses %v, want nothing and at least the skew set", diff.Proxies, diff.Missing)
			}
			if len(rep.Findings) != 1 || rep.Findings[0].APIServer != "old" || rep.Findings[0].Reason != verify.ReasonMergedDiscoveryIncomplete {
				t.Errorf("not wired: findings %+v, want MergedDiscoveryIncomplete on old", rep.Findings)
			}
			if metrics.Rerouted != 0 {
				t.Errorf("not wired: rerouted delta %v on old", metrics.Rerouted)
			}
		})
	}
}

func discovery(t *testing.T, rep verify.Report, server string) verify.DiscoveryDiff {
	t.Helper()
	for _, d := range rep.Discovery {
		if d.APIServer == server {
			return d
		}
	}
	t.Fatalf("no discovery comparison for %s", server)
	return verify.DiscoveryDiff{}
}

func metricsOf(t *testing.T, rep verify.Report, server string) verify.MetricDelta {
	t.Helper()
	for _, m := range rep.Metrics {
		if m.APIServer == server {
			if m.Error != "" {
				t.Fatalf("metrics of %s: %s", server, m.Error)
			}
			return m
		}
	}
	t.Fatalf("no metric deltas for %s", server)
	return verify.MetricDelta{}
}

// TestBaselineOnOneVersion: on a plane of one version the skew sets are
// empty, so a round without Always probes nothing; with Baseline it lists
// Namespaces on each server, served by the server itself.
func TestBaselineOnOneVersion(t *testing.T) {
	cp := cptest.Start(t,
		controlplane.APIServerSpec{Name: "a", Version: "1.37.2"},
		controlplane.APIServerSpec{Name: "b", Version: "1.37.2"},
	)
	targets := targetsOf(cp, "a", "b")
	rep := runUntil(t, time.Minute, targets, verify.Options{}, func(r verify.Report) bool { return r.Passed() })
	if len(rep.Probes) != 0 || !rep.Passed() {
		t.Fatalf("without Always: probes %+v, findings %+v; want none and a pass", rep.Probes, rep.Findings)
	}
	rep = runUntil(t, time.Minute, targets, verify.Options{Always: verify.Baseline()}, func(r verify.Report) bool { return r.Passed() })
	servers := map[string]bool{}
	for _, p := range rep.Probes {
		if p.Resource != verify.Baseline()[0] || p.Verb != "list" || p.Outcome != verify.ServedLocally {
			t.Errorf("probe %+v: want a list of namespaces served locally", p)
		}
		servers[p.APIServer] = true
	}
	if !rep.Passed() || len(rep.Probes) != 2 || !servers["a"] || !servers["b"] {
		t.Errorf("with Baseline: probes %+v, findings %+v; want one list on each server and a pass", rep.Probes, rep.Findings)
	}
}
