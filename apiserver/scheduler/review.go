package scheduler

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/v1alpha1"
)

// PlanResources returns the CPU and memory of one replica of a plan, and
// false for an unknown plan.
func PlanResources(plan string) (scheduling.Resources, bool) {
	switch plan {
	case "starter":
		return scheduling.Resources{CPU: resource.MustParse("250m"), Memory: resource.MustParse("512Mi")}, true
	case "standard":
		return scheduling.Resources{CPU: resource.MustParse("1"), Memory: resource.MustParse("2Gi")}, true
	case "pro":
		return scheduling.Resources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")}, true
	}
	return scheduling.Resources{}, false
}

// ResolveResources returns the per-replica resources of a review: the ones
// asked, with zero CPU or memory taken from the plan.
func ResolveResources(spec *scheduling.PlacementReviewSpec) scheduling.Resources {
	res := scheduling.Resources{CPU: spec.Resources.CPU.DeepCopy(), Memory: spec.Resources.Memory.DeepCopy()}
	plan, ok := PlanResources(spec.Constraints.Plan)
	if !ok {
		return res
	}
	if res.CPU.IsZero() {
		res.CPU = plan.CPU
	}
	if res.Memory.IsZero() {
		res.Memory = plan.Memory
	}
	return res
}

// Review answers a PlacementReview over the fleet's capacities with the
// given strategy (v1alpha1.StrategyBinPack or StrategySpread).
func Review(caps []scheduling.ClusterCapacity, spec *scheduling.PlacementReviewSpec, strategy string) scheduling.PlacementReviewStatus {
	res := ResolveResources(spec)
	need := times(res, spec.Replicas)
	st := scheduling.PlacementReviewStatus{Strategy: strategy, Resources: res}
	con := spec.Constraints
	best := -1
	for _, cc := range caps {
		s := &cc.Status
		reject := func(reason, msg string) {
			st.Candidates = append(st.Candidates, scheduling.Candidate{Cluster: cc.Name, Reason: reason, Message: msg})
		}
		switch {
		case con.Region != "" && s.Region != con.Region:
			reject(v1alpha1.ReasonRegionMismatch, fmt.Sprintf("cluster is in region %q, the app wants %q", s.Region, con.Region))
			continue
		case con.Plan != "" && len(s.Plans) > 0 && !slices.Contains(s.Plans, con.Plan):
			reject(v1alpha1.ReasonPlanNotOffered, fmt.Sprintf("cluster hosts plans %s, not %s", strings.Join(s.Plans, ", "), con.Plan))
			continue
		case !s.AcceptsPlacements:
			reject(s.Reason, s.Message)
			continue
		}
		for _, p := range s.Pools {
			c := scheduling.Candidate{Cluster: cc.Name, Pool: p.Name}
			if con.Pool != "" && p.Name != con.Pool {
				c.Reason, c.Message = v1alpha1.ReasonPoolMismatch, fmt.Sprintf("the app wants pool %q", con.Pool)
				st.Candidates = append(st.Candidates, c)
				continue
			}
			if reason, msg := fits(p, need); reason != "" {
				c.Reason, c.Message = reason, msg
				st.Candidates = append(st.Candidates, c)
				continue
			}
			c.Feasible = true
			c.Score = score(p, need, strategy)
			c.Message = fmt.Sprintf("fits: after placing, %s", usage(p, need))
			st.Candidates = append(st.Candidates, c)
			// Strictly greater: of equal scores the first (by name) wins.
			if best < 0 || c.Score > st.Candidates[best].Score {
				best = len(st.Candidates) - 1
			}
		}
	}
	if best < 0 {
		st.Message = unschedulableMessage(st.Candidates)
		return st
	}
	chosen := &st.Candidates[best]
	chosen.Reason = v1alpha1.ReasonChosen
	st.Schedulable, st.Cluster, st.Pool, st.Score = true, chosen.Cluster, chosen.Pool, chosen.Score
	for i := range st.Candidates {
		c := &st.Candidates[i]
		if !c.Feasible || i == best {
			continue
		}
		c.Reason = v1alpha1.ReasonLowerScore
		if c.Score == chosen.Score {
			c.Message = fmt.Sprintf("score %d ties with %s/%s, which comes first by name; %s", c.Score, chosen.Cluster, chosen.Pool, c.Message)
		} else {
			c.Message = fmt.Sprintf("score %d < %d of %s/%s; %s", c.Score, chosen.Score, chosen.Cluster, chosen.Pool, c.Message)
		}
	}
	st.Message = fmt.Sprintf("placed %d × (cpu %s, memory %s) on %s/%s, score %d (%s)",
		spec.Replicas, res.CPU.String(), res.Memory.String(), chosen.Cluster, chosen.Pool, chosen.Score, strategy)
	return st
}

// fits returns "" when need fits into the pool's free room, else the reason
// of the first shortage and a message listing every shortage.
func fits(p scheduling.PoolCapacity, need scheduling.Capacity) (string, string) {
	var reason string
	var msgs []string
	short := func(r, what string, want, free string) {
		if reason == "" {
			reason = r
		}
		msgs = append(msgs, fmt.Sprintf("%s: needs %s, %s free", what, want, free))
	}
	if p.ReadyNodes == 0 {
		return v1alpha1.ReasonNoPools, "pool has no ready node"
	}
	freeCPU := p.Allocatable.CPU.MilliValue() - p.Requested.CPU.MilliValue()
	if need.CPU.MilliValue() > freeCPU {
		short(v1alpha1.ReasonInsufficientCPU, "cpu", need.CPU.String(), resource.NewMilliQuantity(freeCPU, resource.DecimalSI).String())
	}
	freeMem := p.Allocatable.Memory.Value() - p.Requested.Memory.Value()
	if need.Memory.Value() > freeMem {
		short(v1alpha1.ReasonInsufficientMemory, "memory", need.Memory.String(), resource.NewQuantity(freeMem, resource.BinarySI).String())
	}
	freePods := p.Allocatable.Pods - p.Requested.Pods
	if need.Pods > freePods {
		short(v1alpha1.ReasonInsufficientPods, "pods", fmt.Sprint(need.Pods), fmt.Sprint(freePods))
	}
	return reason, strings.Join(msgs, "; ")
}

// utilisation returns the pool's CPU and memory utilisation after placing
// need, each in [0,1].
func utilisation(p scheduling.PoolCapacity, need scheduling.Capacity) (cpu, mem float64) {
	ratio := func(used, alloc int64) float64 {
		if alloc <= 0 {
			return 1
		}
		return math.Min(1, float64(used)/float64(alloc))
	}
	cpu = ratio(p.Requested.CPU.MilliValue()+need.CPU.MilliValue(), p.Allocatable.CPU.MilliValue())
	mem = ratio(p.Requested.Memory.Value()+need.Memory.Value(), p.Allocatable.Memory.Value())
	return cpu, mem
}

// score is 0–100: BinPack favours the pool left fullest, Spread the one left
// emptiest, by the mean of CPU and memory utilisation after placing.
func score(p scheduling.PoolCapacity, need scheduling.Capacity, strategy string) int32 {
	cpu, mem := utilisation(p, need)
	u := (cpu + mem) / 2
	if strategy == v1alpha1.StrategySpread {
		u = 1 - u
	}
	return int32(math.Round(100 * u))
}

func usage(p scheduling.PoolCapacity, need scheduling.Capacity) string {
	cpu, mem := utilisation(p, need)
	return fmt.Sprintf("cpu %.0f%%, memory %.0f%% used", 100*cpu, 100*mem)
}

func unschedulableMessage(cands []scheduling.Candidate) string {
	if len(cands) == 0 {
		return "unschedulable: the fleet has no cluster"
	}
	var parts []string
	for _, c := range cands {
		where := c.Cluster
		if c.Pool != "" {
			where += "/" + c.Pool
		}
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", where, c.Reason, c.Message))
	}
	return "unschedulable: " + strings.Join(parts, "; ")
}
