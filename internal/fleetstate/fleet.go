package fleetstate

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Sources of a cluster.
const (
	SourceClusterAPI = "ClusterAPI"
	SourceStatic     = "Static"
)

// Resources is an amount of allocatable resources.
type Resources struct {
	CPU    resource.Quantity
	Memory resource.Quantity
	Pods   int64
}

// Add adds o to r.
func (r *Resources) Add(o Resources) {
	r.CPU.Add(o.CPU)
	r.Memory.Add(o.Memory)
	r.Pods += o.Pods
}

// Cluster is one workload cluster as last observed.
type Cluster struct {
	// Name is unique in the fleet.
	Name string
	// Namespace of the Cluster API Cluster; empty for a static cluster.
	Namespace string
	// Source is SourceClusterAPI or SourceStatic.
	Source string
	// Region is the cluster's region, "" when unknown.
	Region string
	// Plans the cluster hosts; empty means all.
	Plans []string
	// ControlPlaneVersions are the distinct Kubernetes versions the control
	// plane runs, sorted.
	ControlPlaneVersions []string
	// MidUpgrade is true while the control plane rolls out a version or a
	// configuration; UpgradeMessage says what was seen.
	MidUpgrade     bool
	UpgradeMessage string
	// Healthy is false when the Cluster is not Available or its nodes cannot
	// be read; HealthMessage says why.
	Healthy       bool
	HealthMessage string
	// Cordoned is true when the operator stopped new placements.
	Cordoned bool
	// Deleting is true once the Cluster API Cluster has a deletion
	// timestamp: its machines are going away.
	Deleting bool
	// Standby marks a static cluster that takes new placements only while
	// no Cluster API cluster of the fleet can run apps (embedded mode's
	// process runtime, once a fleet exists). The scheduler decides; the
	// source only reports the mark.
	Standby bool
	// Pools are the node pools, sorted by name.
	Pools []Pool
}

// Pool is one node pool of a cluster.
type Pool struct {
	Name       string
	Nodes      int32
	ReadyNodes int32
	// NotReadySince, when Nodes > 0 and ReadyNodes is 0, is the last time
	// one of the pool's nodes left Ready (its Ready condition's
	// lastTransitionTime; a node that never reported one counts from its
	// creation).
	NotReadySince time.Time
	// Allocatable is the sum over ready nodes.
	Allocatable Resources
}

// Source is a view of (part of) the fleet.
//
// Clusters returns every cluster the source knows, sorted by name, as
// copies the caller owns. It is safe for concurrent use, does no network
// round trip per call (sources read from caches), and returns an error only
// when the source cannot answer at all (for example before its caches
// synced), never for one unreachable cluster: that cluster comes back
// unhealthy.
type Source interface {
	Clusters(ctx context.Context) ([]Cluster, error)
}

// Versioned is implemented by a source that can tell when its clusters
// changed: they change only when Version does (and, for state that depends
// on the clock alone, with time). Version only grows; ok is false when the
// source cannot tell.
type Versioned interface {
	Version() (v uint64, ok bool)
}

// Fleet joins sources into one fleet. A name already taken by an earlier
// source is skipped: static clusters, listed first, win over Cluster API
// clusters of the same name.
type Fleet []Source

var (
	_ Source    = Fleet(nil)
	_ Versioned = Fleet(nil)
	_ Notifier  = Fleet(nil)
)

// Clusters returns the clusters of all sources, sorted by name.
func (f Fleet) Clusters(ctx context.Context) ([]Cluster, error) {
	seen := map[string]bool{}
	var out []Cluster
	for _, s := range f {
		cs, err := s.Clusters(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Version is the sum of the sources' versions; ok only when every source
// can tell.
func (f Fleet) Version() (uint64, bool) {
	var sum uint64
	for _, s := range f {
		vs, ok := s.(Versioned)
		if !ok {
			return 0, false
		}
		v, ok := vs.Version()
		if !ok {
			return 0, false
		}
		sum += v
	}
	return sum, true
}

// Notify tells changed of the changes of every source that is a
// Notifier; a source that is not tells of none.
func (f Fleet) Notify(ctx context.Context, changed func()) {
	for _, s := range f {
		if n, ok := s.(Notifier); ok {
			n.Notify(ctx, changed)
		}
	}
}

// Static is a fixed list of clusters, such as embedded mode's "local".
type Static []Cluster

var (
	_ Source    = Static(nil)
	_ Versioned = Static(nil)
	_ Notifier  = Static(nil)
)

// Version is 0: static clusters never change.
func (Static) Version() (uint64, bool) { return 0, true }

// Notify never calls changed: static clusters never change.
func (Static) Notify(context.Context, func()) {}

// Clusters returns copies of the static clusters, sorted by name.
func (s Static) Clusters(context.Context) ([]Cluster, error) {
	out := make([]Cluster, 0, len(s))
	for _, c := range s {
		c.Plans = append([]string(nil), c.Plans...)
		c.ControlPlaneVersions = append([]string(nil), c.ControlPlaneVersions...)
		c.Pools = append([]Pool(nil), c.Pools...)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (c Cluster) String() string { return fmt.Sprintf("%s/%s", c.Namespace, c.Name) }
