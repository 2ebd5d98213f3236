package scheduler

import (
	"fmt"
	"math"
	"slices"
	"strconv"
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
// given strategy (v1alpha1.StrategyBinPack or StrategySpread). With
// spec.Candidates None the status lists no candidates; its message is the
// same.
func Review(caps []scheduling.ClusterCapacity, spec *scheduling.PlacementReviewSpec, strategy string) scheduling.PlacementReviewStatus {
	return review(caps, nil, spec, strategy)
}

// review is Review with held added to what the pools it names request:
// the room reservations hold for Placements being written.
func review(caps []scheduling.ClusterCapacity, held map[PoolKey]room, spec *scheduling.PlacementReviewSpec, strategy string) scheduling.PlacementReviewStatus {
	res := ResolveResources(spec)
	need := times(res, spec.Replicas)
	st := scheduling.PlacementReviewStatus{Strategy: strategy, Resources: res}
	con := spec.Constraints
	best := -1
	var used []usedAfter
	// heldShort: a pool was too small only with the room held.
	heldShort := false
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
			if h, ok := held[PoolKey{Cluster: cc.Name, Pool: p.Name}]; ok {
				withH := withHeld(p, h)
				if reason, _ := fits(withH, need); reason != "" {
					if reason, _ := fits(p, need); reason == "" {
						heldShort = true
					}
				}
				p = withH
			}
			if reason, msg := fits(p, need); reason != "" {
				c.Reason, c.Message = reason, msg
				st.Candidates = append(st.Candidates, c)
				continue
			}
			cpu, mem := utilisation(p, need)
			c.Feasible = true
			c.Score = scoreOf(cpu, mem, strategy)
			st.Candidates = append(st.Candidates, c)
			// The message waits for the choice, which it names.
			used = append(used, usedAfter{index: len(st.Candidates) - 1, cpu: cpu, mem: mem})
			// Strictly greater: of equal scores the first (by name) wins.
			if best < 0 || c.Score > st.Candidates[best].Score {
				best = len(st.Candidates) - 1
			}
		}
	}
	if best < 0 {
		st.Message = unschedulableMessage(st.Candidates)
		if heldShort {
			st.Message += " (counting the room held for Placements being written, for at most " + ReservationTTL.String() + ")"
		}
		if spec.Candidates == v1alpha1.CandidatesNone {
			st.Candidates = nil
		}
		return st
	}
	chosen := &st.Candidates[best]
	chosen.Reason = v1alpha1.ReasonChosen
	st.Schedulable, st.Cluster, st.Pool, st.Score = true, chosen.Cluster, chosen.Pool, chosen.Score
	st.Message = fmt.Sprintf("placed %d × (cpu %s, memory %s) on %s/%s, score %d (%s)",
		spec.Replicas, res.CPU.String(), res.Memory.String(), chosen.Cluster, chosen.Pool, chosen.Score, strategy)
	if spec.Candidates == v1alpha1.CandidatesNone {
		st.Candidates = nil
		return st
	}
	// One buffer for every feasible candidate's message: a review over a
	// fleet of hundreds of pools formats hundreds of them.
	var buf []byte
	for _, u := range used {
		c := &st.Candidates[u.index]
		buf = buf[:0]
		if u.index != best {
			c.Reason = v1alpha1.ReasonLowerScore
			buf = append(buf, "score "...)
			buf = strconv.AppendInt(buf, int64(c.Score), 10)
			if c.Score == chosen.Score {
				buf = append(buf, " ties with "...)
				buf = appendWhere(buf, chosen)
				buf = append(buf, ", which comes first by name; "...)
			} else {
				buf = append(buf, " < "...)
				buf = strconv.AppendInt(buf, int64(chosen.Score), 10)
				buf = append(buf, " of "...)
				buf = appendWhere(buf, chosen)
				buf = append(buf, "; "...)
			}
		}
		buf = append(buf, "fits: after placing, "...)
		buf = appendUsage(buf, u.cpu, u.mem)
		c.Message = string(buf)
	}
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

// usedAfter is a feasible candidate's utilisation after placing: its
// message is written once the choice is known.
type usedAfter struct {
	index    int
	cpu, mem float64
}

// scoreOf is 0–100: BinPack favours the pool left fullest, Spread the one
// left emptiest, by the mean of CPU and memory utilisation after placing.
func scoreOf(cpu, mem float64, strategy string) int32 {
	u := (cpu + mem) / 2
	if strategy == v1alpha1.StrategySpread {
		u = 1 - u
	}
	return int32(math.Round(100 * u))
}

// appendUsage appends "cpu 40%, memory 25% used".
func appendUsage(buf []byte, cpu, mem float64) []byte {
	buf = append(buf, "cpu "...)
	buf = strconv.AppendFloat(buf, 100*cpu, 'f', 0, 64)
	buf = append(buf, "%, memory "...)
	buf = strconv.AppendFloat(buf, 100*mem, 'f', 0, 64)
	return append(buf, "% used"...)
}

// appendWhere appends "cluster/pool".
func appendWhere(buf []byte, c *scheduling.Candidate) []byte {
	buf = append(buf, c.Cluster...)
	buf = append(buf, '/')
	return append(buf, c.Pool...)
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
