package scheduler

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/internal/fleetstate"
)

// PoolKey names a pool of a cluster.
type PoolKey struct {
	Cluster string
	Pool    string
}

// Requested is what the Placements request, per pool. A Placement adds
// replicas × its per-replica resources, and replicas pods.
type Requested map[PoolKey]scheduling.Capacity

// Add adds one placement's request.
func (r Requested) Add(p *scheduling.PlacementSpec) {
	k := PoolKey{Cluster: p.Cluster, Pool: p.Pool}
	c := r[k]
	addCapacity(&c, times(p.Resources, p.Replicas))
	r[k] = c
}

// times returns n replicas of res as a Capacity.
func times(res scheduling.Resources, n int32) scheduling.Capacity {
	c := scheduling.Capacity{Pods: int64(n)}
	c.CPU.SetMilli(res.CPU.MilliValue() * int64(n))
	c.CPU.Format = "DecimalSI"
	c.Memory.Set(res.Memory.Value() * int64(n))
	c.Memory.Format = "BinarySI"
	return c
}

func addCapacity(dst *scheduling.Capacity, src scheduling.Capacity) {
	dst.CPU.Add(src.CPU)
	dst.Memory.Add(src.Memory)
	dst.Pods += src.Pods
}

func fromFleet(r fleetstate.Resources) scheduling.Capacity {
	return scheduling.Capacity{CPU: r.CPU.DeepCopy(), Memory: r.Memory.DeepCopy(), Pods: r.Pods}
}

// zeroCapacity returns a Capacity of nothing, formatted like the figures it
// is compared with.
func zeroCapacity() scheduling.Capacity {
	c := scheduling.Capacity{}
	c.CPU.Format, c.Memory.Format = "DecimalSI", "BinarySI"
	return c
}

// Capacities returns the ClusterCapacity of each cluster, in the fleet's
// order (by name). The cluster's Requested sums every Placement naming the
// cluster, its pools' only those naming the pool.
func Capacities(clusters []fleetstate.Cluster, req Requested) []scheduling.ClusterCapacity {
	byCluster := map[string]scheduling.Capacity{}
	for k, c := range req {
		t, ok := byCluster[k.Cluster]
		if !ok {
			t = zeroCapacity()
		}
		addCapacity(&t, c)
		byCluster[k.Cluster] = t
	}
	running := runningClusters(clusters)
	out := make([]scheduling.ClusterCapacity, 0, len(clusters))
	for _, c := range clusters {
		cc := scheduling.ClusterCapacity{
			ObjectMeta: metav1.ObjectMeta{Name: c.Name},
			Status: scheduling.ClusterCapacityStatus{
				Source:               c.Source,
				ClusterNamespace:     c.Namespace,
				Region:               c.Region,
				Plans:                c.Plans,
				ControlPlaneVersions: c.ControlPlaneVersions,
				MidUpgrade:           c.MidUpgrade,
				Healthy:              c.Healthy,
				Cordoned:             c.Cordoned,
				Deleting:             c.Deleting,
				Standby:              c.Standby,
				Allocatable:          zeroCapacity(),
				Requested:            zeroCapacity(),
			},
		}
		if c.Region != "" {
			cc.Labels = map[string]string{v1alpha1.RegionLabel: c.Region}
		}
		if r, ok := byCluster[c.Name]; ok {
			cc.Status.Requested = r
		}
		ready := false
		for _, p := range c.Pools {
			pc := scheduling.PoolCapacity{
				Name:        p.Name,
				Nodes:       p.Nodes,
				ReadyNodes:  p.ReadyNodes,
				Allocatable: zeroCapacity(),
				Requested:   zeroCapacity(),
			}
			if p.ReadyNodes == 0 && p.Nodes > 0 && !p.NotReadySince.IsZero() {
				pc.NotReadySince = &metav1.Time{Time: p.NotReadySince}
			}
			addCapacity(&pc.Allocatable, fromFleet(p.Allocatable))
			if r, ok := req[PoolKey{Cluster: c.Name, Pool: p.Name}]; ok {
				addCapacity(&pc.Requested, r)
			}
			addCapacity(&cc.Status.Allocatable, pc.Allocatable)
			ready = ready || p.ReadyNodes > 0
			cc.Status.Pools = append(cc.Status.Pools, pc)
		}
		sort.Slice(cc.Status.Pools, func(i, j int) bool { return cc.Status.Pools[i].Name < cc.Status.Pools[j].Name })
		setAcceptance(&cc.Status, c, ready, running)
		out = append(out, cc)
	}
	return out
}

// runsApps reports whether c is a Cluster API cluster that can run apps: it
// has a pool with a ready node and is not being deleted. While one does,
// standby clusters take no new placements.
func runsApps(c fleetstate.Cluster) bool {
	if c.Source != fleetstate.SourceClusterAPI || c.Deleting {
		return false
	}
	for _, p := range c.Pools {
		if p.ReadyNodes > 0 {
			return true
		}
	}
	return false
}

// runningClusters returns the names of the clusters that run apps, in the
// fleet's order.
func runningClusters(clusters []fleetstate.Cluster) []string {
	var out []string
	for _, c := range clusters {
		if runsApps(c) {
			out = append(out, c.Name)
		}
	}
	return out
}

// maxNamed is how many clusters a standby message names.
const maxNamed = 5

// standbyMessage says which clusters keep a standby cluster from taking
// new placements.
func standbyMessage(running []string) string {
	names := strings.Join(running, ", ")
	if len(running) > maxNamed {
		names = fmt.Sprintf("%s and %d more", strings.Join(running[:maxNamed], ", "), len(running)-maxNamed)
	}
	return "standby: new apps go to the Cluster API clusters while one can run them (a pool with a ready node, not being deleted): " + names
}

// setAcceptance decides whether the cluster takes new placements and says
// why not, first reason first: deletion, health, upgrade, cordon, pools,
// standby. running names the Cluster API clusters that run apps.
func setAcceptance(s *scheduling.ClusterCapacityStatus, c fleetstate.Cluster, ready bool, running []string) {
	switch {
	case c.Deleting:
		s.Reason, s.Message = v1alpha1.ReasonDeleting, fmt.Sprintf("Cluster %s/%s is being deleted", c.Namespace, c.Name)
	case !c.Healthy:
		s.Reason, s.Message = v1alpha1.ReasonUnhealthy, c.HealthMessage
	case c.MidUpgrade:
		s.Reason, s.Message = v1alpha1.ReasonMidUpgrade, c.UpgradeMessage
	case c.Cordoned:
		s.Reason, s.Message = v1alpha1.ReasonCordoned, fmt.Sprintf("annotation %s=true", v1alpha1.CordonedAnnotation)
	case !ready:
		s.Reason, s.Message = v1alpha1.ReasonNoPools, "no node pool has a ready node"
	case c.Standby && len(running) > 0:
		s.Reason, s.Message = v1alpha1.ReasonStandby, standbyMessage(running)
	case c.Standby:
		s.AcceptsPlacements, s.Reason = true, v1alpha1.ReasonAccepting
		s.Message = "standby, and no Cluster API cluster can run apps (a pool with a ready node, not being deleted): takes new apps"
	default:
		s.AcceptsPlacements, s.Reason = true, v1alpha1.ReasonAccepting
	}
}
