package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/internal/fleetstate"
)

func pool(name, cpu, mem string, pods int64) fleetstate.Pool {
	return fleetstate.Pool{Name: name, Nodes: 1, ReadyNodes: 1, Allocatable: fleetstate.Resources{
		CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem), Pods: pods}}
}

func testFleet() []fleetstate.Cluster {
	return []fleetstate.Cluster{
		{Name: "a", Region: "eu", Healthy: true, Pools: []fleetstate.Pool{pool("small", "2", "4Gi", 10), pool("large", "8", "16Gi", 10)}},
		{Name: "b", Region: "eu", Healthy: true, MidUpgrade: true, UpgradeMessage: "two versions", Pools: []fleetstate.Pool{pool("p", "64", "256Gi", 100)}},
		{Name: "c", Region: "us", Healthy: true, Plans: []string{"pro"}, Pools: []fleetstate.Pool{pool("p", "8", "16Gi", 10)}},
		{Name: "d", Region: "eu", Healthy: false, HealthMessage: "down", Pools: []fleetstate.Pool{pool("p", "8", "16Gi", 10)}},
		{Name: "e", Region: "eu", Healthy: true, Cordoned: true, Pools: []fleetstate.Pool{pool("p", "8", "16Gi", 10)}},
		{Name: "f", Region: "eu", Healthy: true},
	}
}

func spec(replicas int32, cpu, mem string, c scheduling.PlacementConstraints) *scheduling.PlacementReviewSpec {
	return &scheduling.PlacementReviewSpec{Replicas: replicas, Constraints: c,
		Resources: scheduling.Resources{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem)}}
}

func verdicts(st scheduling.PlacementReviewStatus) []string {
	var out []string
	for _, c := range st.Candidates {
		w := c.Cluster
		if c.Pool != "" {
			w += "/" + c.Pool
		}
		out = append(out, w+"="+c.Reason)
	}
	return out
}

func TestCapacitiesAcceptance(t *testing.T) {
	req := Requested{}
	req.Add(&scheduling.PlacementSpec{Cluster: "a", Pool: "small", Replicas: 3, Resources: scheduling.Resources{CPU: resource.MustParse("250m"), Memory: resource.MustParse("256Mi")}})
	req.Add(&scheduling.PlacementSpec{Cluster: "a", Pool: "gone", Replicas: 1, Resources: scheduling.Resources{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}})
	caps := Capacities(testFleet(), req)
	var got []string
	for _, c := range caps {
		got = append(got, c.Name+"="+c.Status.Reason)
	}
	want := []string{"a=Accepting", "b=MidUpgrade", "c=Accepting", "d=Unhealthy", "e=Cordoned", "f=NoPools"}
	if !slices.Equal(got, want) {
		t.Fatalf("reasons: got %v, want %v", got, want)
	}
	small := caps[0].Status.Pools[1] // sorted: large, small
	if small.Name != "small" || small.Requested.CPU.MilliValue() != 750 || small.Requested.Memory.Value() != 768<<20 || small.Requested.Pods != 3 {
		t.Fatalf("small requested: %+v", small.Requested)
	}
	// The cluster counts placements on pools it no longer has.
	if r := caps[0].Status.Requested; r.CPU.MilliValue() != 1750 || r.Pods != 4 {
		t.Fatalf("a requested: %+v", r)
	}
	if a := caps[0].Status.Allocatable; a.CPU.MilliValue() != 10000 || a.Pods != 20 {
		t.Fatalf("a allocatable: %+v", a)
	}
}

func TestReview(t *testing.T) {
	caps := Capacities(testFleet(), Requested{})
	tests := []struct {
		name      string
		spec      *scheduling.PlacementReviewSpec
		strategy  string
		chosen    string
		verdicts  []string
		inMessage string
	}{{
		name: "bin-pack fills the smaller pool", spec: spec(1, "1", "1Gi", scheduling.PlacementConstraints{}), strategy: v1alpha1.StrategyBinPack,
		chosen:   "a/small",
		verdicts: []string{"a/large=LowerScore", "a/small=Chosen", "b=MidUpgrade", "c/p=LowerScore", "d=Unhealthy", "e=Cordoned", "f=NoPools"},
	}, {
		name: "spread takes the emptiest; c/p ties with a/large and loses by name", spec: spec(1, "1", "1Gi", scheduling.PlacementConstraints{}), strategy: v1alpha1.StrategySpread,
		chosen:   "a/large",
		verdicts: []string{"a/large=Chosen", "a/small=LowerScore", "b=MidUpgrade", "c/p=LowerScore", "d=Unhealthy", "e=Cordoned", "f=NoPools"},
	}, {
		name: "region, pool and plan", spec: spec(1, "1", "1Gi", scheduling.PlacementConstraints{Region: "eu", Pool: "large", Plan: "starter"}), strategy: v1alpha1.StrategyBinPack,
		chosen:   "a/large",
		verdicts: []string{"a/large=Chosen", "a/small=PoolMismatch", "b=MidUpgrade", "c=RegionMismatch", "d=Unhealthy", "e=Cordoned", "f=NoPools"},
	}, {
		name: "plan not offered", spec: spec(1, "1", "1Gi", scheduling.PlacementConstraints{Region: "us", Plan: "starter"}), strategy: v1alpha1.StrategyBinPack,
		verdicts: []string{"a=RegionMismatch", "b=RegionMismatch", "c=PlanNotOffered", "d=RegionMismatch", "e=RegionMismatch", "f=RegionMismatch"},
	}, {
		name: "too big everywhere, each shortage named", spec: spec(3, "3", "8Gi", scheduling.PlacementConstraints{}), strategy: v1alpha1.StrategyBinPack,
		verdicts:  []string{"a/large=InsufficientCPU", "a/small=InsufficientCPU", "b=MidUpgrade", "c/p=InsufficientCPU", "d=Unhealthy", "e=Cordoned", "f=NoPools"},
		inMessage: "a/large: InsufficientCPU (cpu: needs 9, 8 free; memory: needs 24Gi, 16Gi free)",
	}, {
		name: "pods run out", spec: spec(11, "10m", "1Mi", scheduling.PlacementConstraints{Pool: "small"}), strategy: v1alpha1.StrategyBinPack,
		verdicts: []string{"a/large=PoolMismatch", "a/small=InsufficientPods", "b=MidUpgrade", "c/p=PoolMismatch", "d=Unhealthy", "e=Cordoned", "f=NoPools"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Review(caps, tt.spec, tt.strategy)
			got := ""
			if st.Schedulable {
				got = st.Cluster + "/" + st.Pool
			}
			if got != tt.chosen {
				t.Errorf("chosen: got %q, want %q (%s)", got, tt.chosen, st.Message)
			}
			if v := verdicts(st); !slices.Equal(v, tt.verdicts) {
				t.Errorf("verdicts:\n got %v\nwant %v", v, tt.verdicts)
			}
			if tt.inMessage != "" && !strings.Contains(st.Message, tt.inMessage) {
				t.Errorf("message %q lacks %q", st.Message, tt.inMessage)
			}
		})
	}
}

func TestReviewTakesPlanSizes(t *testing.T) {
	st := Review(Capacities(testFleet(), Requested{}), &scheduling.PlacementReviewSpec{Replicas: 1, Constraints: scheduling.PlacementConstraints{Plan: "standard"}}, v1alpha1.StrategyBinPack)
	if st.Resources.CPU.Cmp(resource.MustParse("1")) != 0 || st.Resources.Memory.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Fatalf("standard plan resources: %+v", st.Resources)
	}
}

func TestStandbyAndDeleting(t *testing.T) {
	local := fleetstate.Cluster{Name: "local", Source: fleetstate.SourceStatic, Region: "local", Healthy: true, Standby: true,
		Pools: []fleetstate.Pool{pool("default", "4", "8Gi", 110)}}
	capi := func(name string, mod func(*fleetstate.Cluster)) fleetstate.Cluster {
		c := fleetstate.Cluster{Name: name, Namespace: "fleet", Source: fleetstate.SourceClusterAPI, Healthy: true,
			Pools: []fleetstate.Pool{pool("workers", "8", "16Gi", 110)}}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	deleting := func(c *fleetstate.Cluster) { c.Deleting = true }
	notReady := func(c *fleetstate.Cluster) { c.Pools[0].ReadyNodes, c.Pools[0].Allocatable = 0, fleetstate.Resources{} }
	cordoned := func(c *fleetstate.Cluster) { c.Cordoned = true }
	unhealthy := func(c *fleetstate.Cluster) { c.Healthy, c.HealthMessage = false, "Cluster is not Available" }
	for _, tc := range []struct {
		name string
		// fleet is sorted by name, as sources return it.
		fleet []fleetstate.Cluster
		// reasons are each cluster's ClusterCapacity reason, in order.
		reasons []string
		// chosen is where a starter app goes ("" = unschedulable).
		chosen string
		// localMessage is in local's message.
		localMessage string
	}{{
		name: "no Cluster API cluster: local takes apps", fleet: []fleetstate.Cluster{local},
		reasons: []string{"local=Accepting"}, chosen: "local/default", localMessage: "no Cluster API cluster can run apps",
	}, {
		name: "a Cluster API cluster runs apps: local stands by", fleet: []fleetstate.Cluster{capi("alpha", nil), local},
		reasons: []string{"alpha=Accepting", "local=Standby"}, chosen: "alpha/workers", localMessage: "not being deleted): alpha",
	}, {
		name: "every Cluster API cluster is named", fleet: []fleetstate.Cluster{capi("alpha", nil), capi("beta", deleting), capi("gamma", nil), local},
		reasons: []string{"alpha=Accepting", "beta=Deleting", "gamma=Accepting", "local=Standby"}, chosen: "alpha/workers", localMessage: "not being deleted): alpha, gamma",
	}, {
		name: "the only Cluster API cluster is being deleted: local takes apps", fleet: []fleetstate.Cluster{capi("alpha", deleting), local},
		reasons: []string{"alpha=Deleting", "local=Accepting"}, chosen: "local/default",
	}, {
		name: "deleting comes before unhealthy", fleet: []fleetstate.Cluster{capi("alpha", func(c *fleetstate.Cluster) { deleting(c); unhealthy(c) }), local},
		reasons: []string{"alpha=Deleting", "local=Accepting"}, chosen: "local/default",
	}, {
		name: "no ready node in the Cluster API cluster: local takes apps", fleet: []fleetstate.Cluster{capi("alpha", notReady), local},
		reasons: []string{"alpha=NoPools", "local=Accepting"}, chosen: "local/default",
	}, {
		// A cordoned or unhealthy cluster still runs its apps: the fleet
		// exists, and new apps wait rather than land on the standby.
		name: "cordoned Cluster API cluster: local still stands by", fleet: []fleetstate.Cluster{capi("alpha", cordoned), local},
		reasons: []string{"alpha=Cordoned", "local=Standby"}, chosen: "",
	}, {
		name: "unhealthy Cluster API cluster with ready nodes: local still stands by", fleet: []fleetstate.Cluster{capi("alpha", unhealthy), local},
		reasons: []string{"alpha=Unhealthy", "local=Standby"}, chosen: "",
	}, {
		// BinPack: the smaller local is the fuller after placing.
		name:    "a static cluster not on standby takes apps beside the fleet",
		fleet:   []fleetstate.Cluster{capi("alpha", nil), func() fleetstate.Cluster { c := local; c.Standby = false; return c }()},
		reasons: []string{"alpha=Accepting", "local=Accepting"}, chosen: "local/default",
	}, {
		name:    "more than five clusters: the first five named",
		fleet:   []fleetstate.Cluster{capi("c1", nil), capi("c2", nil), capi("c3", nil), capi("c4", nil), capi("c5", nil), capi("c6", nil), capi("c7", nil), local},
		reasons: []string{"c1=Accepting", "c2=Accepting", "c3=Accepting", "c4=Accepting", "c5=Accepting", "c6=Accepting", "c7=Accepting", "local=Standby"},
		chosen:  "c1/workers", localMessage: "not being deleted): c1, c2, c3, c4, c5 and 2 more",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			caps := Capacities(tc.fleet, Requested{})
			var got []string
			for i, c := range caps {
				got = append(got, c.Name+"="+c.Status.Reason)
				f := tc.fleet[i]
				if s := c.Status; s.Standby != f.Standby || s.Deleting != f.Deleting || s.Cordoned != f.Cordoned || s.AcceptsPlacements != (s.Reason == v1alpha1.ReasonAccepting) {
					t.Errorf("%s: status %+v does not reflect %+v", c.Name, s, f)
				}
				if c.Name == "local" && !strings.Contains(c.Status.Message, tc.localMessage) {
					t.Errorf("local's message %q lacks %q", c.Status.Message, tc.localMessage)
				}
			}
			if !slices.Equal(got, tc.reasons) {
				t.Fatalf("reasons: got %v, want %v", got, tc.reasons)
			}
			st := Review(caps, spec(1, "0", "0", scheduling.PlacementConstraints{Plan: "starter"}), v1alpha1.StrategyBinPack)
			chosen := ""
			if st.Schedulable {
				chosen = st.Cluster + "/" + st.Pool
			}
			if chosen != tc.chosen {
				t.Fatalf("a starter app: placed on %q, want %q (%s)", chosen, tc.chosen, st.Message)
			}
		})
	}
}

// TestCapacityNotReadySince: a pool with nodes and none Ready says since
// when (the App controller moves apps off it past a grace); a pool with a
// ready node, or with no node at all, says nothing.
func TestCapacityNotReadySince(t *testing.T) {
	since := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	down := pool("down", "4", "8Gi", 110)
	down.ReadyNodes, down.Allocatable, down.NotReadySince = 0, fleetstate.Resources{}, since
	up := pool("up", "4", "8Gi", 110)
	up.NotReadySince = since // stale: a node is ready
	empty := fleetstate.Pool{Name: "empty", NotReadySince: since}
	cc := Capacities([]fleetstate.Cluster{{Name: "alpha", Namespace: "fleet", Source: fleetstate.SourceClusterAPI, Healthy: true,
		Pools: []fleetstate.Pool{down, empty, up}}}, Requested{})
	got := map[string]*metav1.Time{}
	for _, p := range cc[0].Status.Pools {
		got[p.Name] = p.NotReadySince
	}
	if got["down"] == nil || !got["down"].Time.Equal(since) {
		t.Errorf("down: notReadySince %v, want %v", got["down"], since)
	}
	if got["up"] != nil || got["empty"] != nil {
		t.Errorf("up: %v, empty: %v; want neither set", got["up"], got["empty"])
	}
}

// TestCandidateMessages checks the figures each feasible candidate's
// message gives: the chosen one's use after placing, a tie lost by name,
// and a lower score.
func TestCandidateMessages(t *testing.T) {
	fleet := []fleetstate.Cluster{
		{Name: "a", Healthy: true, Pools: []fleetstate.Pool{pool("p", "4", "8Gi", 10)}},
		{Name: "b", Healthy: true, Pools: []fleetstate.Pool{pool("p", "4", "8Gi", 10)}},
		{Name: "c", Healthy: true, Pools: []fleetstate.Pool{pool("p", "8", "16Gi", 10)}},
	}
	st := Review(Capacities(fleet, Requested{}), spec(1, "1", "2Gi", scheduling.PlacementConstraints{}), v1alpha1.StrategyBinPack)
	want := []string{
		"a/p Chosen: fits: after placing, cpu 25%, memory 25% used",
		"b/p LowerScore: score 25 ties with a/p, which comes first by name; fits: after placing, cpu 25%, memory 25% used",
		"c/p LowerScore: score 13 < 25 of a/p; fits: after placing, cpu 12%, memory 12% used",
	}
	var got []string
	for _, c := range st.Candidates {
		got = append(got, c.Cluster+"/"+c.Pool+" "+c.Reason+": "+c.Message)
	}
	if !slices.Equal(got, want) {
		t.Errorf("candidates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReviewWithoutCandidates: the verdict and message are those of a
// review that lists its candidates, placed or not.
func TestReviewWithoutCandidates(t *testing.T) {
	caps := Capacities(testFleet(), Requested{})
	for _, s := range []*scheduling.PlacementReviewSpec{
		spec(1, "1", "1Gi", scheduling.PlacementConstraints{}),
		spec(1, "100", "1Gi", scheduling.PlacementConstraints{}),
	} {
		all := Review(caps, s, v1alpha1.StrategyBinPack)
		s.Candidates = v1alpha1.CandidatesNone
		none := Review(caps, s, v1alpha1.StrategyBinPack)
		if len(all.Candidates) == 0 || len(none.Candidates) != 0 {
			t.Errorf("candidates: All listed %d, None %d", len(all.Candidates), len(none.Candidates))
		}
		all.Candidates = nil
		if fmt.Sprint(all) != fmt.Sprint(none) {
			t.Errorf("the verdict differs without candidates:\n%+v\n%+v", all, none)
		}
	}
}
