package clustercapacity

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apiserver/scheduler"
	"bex.co/bex/internal/fleetstate"
)

// placedFleet is a Source of 100 clusters with 10,000 Placements, the
// capacities computed at each read as the view computes them after a
// change; place adds one Placement.
type placedFleet struct {
	clusters []fleetstate.Cluster
	req      scheduler.Requested
	version  uint64
}

func (f *placedFleet) Capacities(context.Context) ([]scheduling.ClusterCapacity, error) {
	return scheduler.Capacities(f.clusters, f.req), nil
}
func (f *placedFleet) Version() (uint64, bool)        { return f.version, true }
func (f *placedFleet) Notify(context.Context, func()) {}
func (f *placedFleet) place(cluster string) {
	f.req.Add(&scheduling.PlacementSpec{Cluster: cluster, Pool: "workers", Replicas: 1,
		Resources: scheduling.Resources{CPU: resource.MustParse("100m"), Memory: resource.MustParse("128Mi")}})
	f.version++
}

func newPlacedFleet() *placedFleet {
	f := &placedFleet{req: scheduler.Requested{}}
	for i := range 100 {
		name := fmt.Sprintf("c%03d", i)
		p := fleetstate.Pool{Name: "workers", Nodes: 3, ReadyNodes: 3, Allocatable: fleetstate.Resources{
			CPU: resource.MustParse("48"), Memory: resource.MustParse("192Gi"), Pods: 330}}
		f.clusters = append(f.clusters, fleetstate.Cluster{Name: name, Source: fleetstate.SourceClusterAPI, Region: "eu", Healthy: true, Pools: []fleetstate.Pool{p}})
		for range 100 {
			f.place(name)
		}
	}
	return f
}

// BenchmarkChange100Clusters is what one Placement written costs the
// storage with 100 clusters and 10,000 Placements and one watcher: the
// capacities computed again, compared with the last, one MODIFIED event
// recorded and handed to the watcher.
func BenchmarkChange100Clusters(b *testing.B) {
	f := newPlacedFleet()
	r, err := NewREST(f)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	w, err := r.Watch(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for range w.ResultChan() {
		}
	}()
	i := 0
	for b.Loop() {
		f.place(fmt.Sprintf("c%03d", i%100))
		i++
		if err := r.refresh(ctx, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetUnchanged is a Get with no change since the last: the read
// the App controller makes per reconcile.
func BenchmarkGetUnchanged(b *testing.B) {
	r, err := NewREST(newPlacedFleet())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := r.Get(ctx, "c042", nil); err != nil {
			b.Fatal(err)
		}
	}
}
