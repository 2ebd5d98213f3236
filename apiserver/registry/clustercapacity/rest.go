package clustercapacity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apiserver/registry"
)

// Source is what the storage reads (scheduler.View implements it).
//
// Capacities returns every cluster's capacity, sorted by name, as copies
// the caller owns. Version moves whenever what Capacities returns may have
// changed (ok false: it cannot tell, and every read computes again).
// Notify calls changed after each move of Version until ctx ends, returns
// at once, and changed does not block.
type Source interface {
	Capacities(ctx context.Context) ([]scheduling.ClusterCapacity, error)
	Version() (v uint64, ok bool)
	Notify(ctx context.Context, changed func())
}

// Defaults of the storage's bounds.
const (
	// DefaultHistory is how many changes a watch may start behind the
	// newest; from further back it gets 410 Gone (Expired), as from a
	// compacted etcd revision.
	DefaultHistory = 1000
	// DefaultWatchBuffer is how many changes a watcher may fall behind
	// before its watch is ended (its client watches again from the last
	// resourceVersion it got).
	DefaultWatchBuffer = 100
	// DefaultResync is how often the storage computes the capacities again
	// with no change told: a bound for state that changes with the clock
	// alone and a source that does not tell of it.
	DefaultResync = 10 * time.Second
)

// REST serves ClusterCapacity: get, list and watch.
//
// The capacities are computed from the Source, not stored; the storage
// keeps the last computed state of each cluster, a resourceVersion per
// change and the last DefaultHistory changes. Each change of one cluster
// (added, modified, gone) takes the next resourceVersion; a list's is the
// newest. resourceVersions start from the server's start time in
// microseconds, so that those of a restarted server are newer than any
// its predecessor gave and a watch from one of those gets 410 Gone.
type REST struct {
	source Source
	rest.TableConvertor
	history, watchBuffer int
	resync               time.Duration

	mu sync.Mutex
	// computed is set once the state holds a computed fleet; version is
	// the source's Version then (versioned: it could tell).
	computed, versioned bool
	version             uint64
	// rev is the newest resourceVersion given; items each cluster's last
	// state, its ResourceVersion set (shared: never written).
	rev   uint64
	items map[string]*scheduling.ClusterCapacity
	// changes are the newest changes, oldest first; a watch may start from
	// any resourceVersion from floor on.
	changes  []change
	floor    uint64
	watchers map[*watcher]struct{}
}

// change is one cluster's change at rev; prev is its state before (nil
// when it was added).
type change struct {
	rev       uint64
	typ       watch.EventType
	obj, prev *scheduling.ClusterCapacity
}

var (
	_ rest.Getter               = (*REST)(nil)
	_ rest.Lister               = (*REST)(nil)
	_ rest.Watcher              = (*REST)(nil)
	_ rest.Scoper               = (*REST)(nil)
	_ rest.SingularNameProvider = (*REST)(nil)
	_ rest.Storage              = (*REST)(nil)
)

// NewREST returns the ClusterCapacity storage over source. Run follows the
// source's changes for watchers.
func NewREST(source Source) (*REST, error) {
	if source == nil {
		return nil, errors.New("clustercapacity: nil source")
	}
	start := uint64(time.Now().UnixMicro())
	return &REST{
		source: source, TableConvertor: table(),
		history: DefaultHistory, watchBuffer: DefaultWatchBuffer, resync: DefaultResync,
		rev: start, floor: start,
		items: map[string]*scheduling.ClusterCapacity{}, watchers: map[*watcher]struct{}{},
	}, nil
}

func table() registry.Table[*scheduling.ClusterCapacity] {
	return registry.Table[*scheduling.ClusterCapacity]{
		Columns: []metav1.TableColumnDefinition{
			{Name: "Region", Type: "string"},
			{Name: "Versions", Type: "string", Description: "control-plane Kubernetes versions"},
			{Name: "Accepts", Type: "boolean", Description: "takes new placements"},
			{Name: "Reason", Type: "string"},
			{Name: "Pools", Type: "integer"},
			{Name: "CPU", Type: "string", Description: "requested/allocatable"},
			{Name: "Memory", Type: "string", Description: "requested/allocatable"},
			{Name: "Pods", Type: "string", Description: "requested/allocatable"},
		},
		Cells: func(c *scheduling.ClusterCapacity) []any {
			s := &c.Status
			return []any{
				s.Region, strings.Join(s.ControlPlaneVersions, ","), s.AcceptsPlacements, s.Reason, int64(len(s.Pools)),
				s.Requested.CPU.String() + "/" + s.Allocatable.CPU.String(),
				s.Requested.Memory.String() + "/" + s.Allocatable.Memory.String(),
				fmt.Sprintf("%d/%d", s.Requested.Pods, s.Allocatable.Pods),
			}
		},
	}
}

// New returns an empty ClusterCapacity.
func (*REST) New() runtime.Object { return &scheduling.ClusterCapacity{} }

// NewList returns an empty ClusterCapacityList.
func (*REST) NewList() runtime.Object { return &scheduling.ClusterCapacityList{} }

// Destroy releases nothing: Run's context ends the watches.
func (*REST) Destroy() {}

// NamespaceScoped is false: a cluster belongs to no tenant.
func (*REST) NamespaceScoped() bool { return false }

// GetSingularName returns "clustercapacity".
func (*REST) GetSingularName() string { return "clustercapacity" }

// maxPanics is how many panics of a computation Run outlives; past them it
// stops following the source (reads still compute) and ends the watches.
const maxPanics = 5

// Run computes the capacities again after each change the source tells
// of, and every resync period, until ctx ends; then it ends every watch.
func (r *REST) Run(ctx context.Context) {
	defer r.stopWatchers()
	kick := make(chan struct{}, 1)
	r.source.Notify(ctx, func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	t := time.NewTicker(r.resync)
	defer t.Stop()
	log := klog.FromContext(ctx)
	panics := 0
	refresh := func(force bool) {
		defer func() {
			if p := recover(); p != nil {
				panics++
				log.Error(fmt.Errorf("panic: %v", p), "Computing cluster capacities panicked", "panics", panics)
			}
		}()
		if err := r.refresh(ctx, force); err != nil {
			log.V(2).Info("Computing cluster capacities failed", "err", err)
		}
	}
	refresh(false)
	for panics <= maxPanics {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			refresh(false)
		case <-t.C:
			refresh(true)
		}
	}
	log.Error(errors.New("too many panics"), "Cluster capacities no longer followed; watches end")
}

// Get returns one cluster's capacity.
func (r *REST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	if err := r.refresh(ctx, false); err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.items[name]; ok {
		return c.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(scheduling.Resource("clustercapacities"), name)
}

// List returns the capacities matching the label and field (metadata.name)
// selectors, sorted by name, at the newest resourceVersion. A
// resourceVersion newer than the newest is refused as too large; with
// resourceVersionMatch Exact, any but the newest is expired (410). Limit
// is ignored: the whole list comes in one answer.
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	if err := r.refresh(ctx, false); err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	p := predicateOf(options)
	r.mu.Lock()
	defer r.mu.Unlock()
	if options != nil && options.ResourceVersion != "" && options.ResourceVersion != "0" {
		rv, err := parseRV(options.ResourceVersion)
		if err != nil {
			return nil, err
		}
		switch {
		case rv > r.rev:
			return nil, storage.NewTooLargeResourceVersionError(rv, r.rev, 1)
		case options.ResourceVersionMatch == metav1.ResourceVersionMatchExact && rv != r.rev:
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %d is not the newest (%d): clustercapacities keep no old states", rv, r.rev))
		}
	}
	list := &scheduling.ClusterCapacityList{Items: make([]scheduling.ClusterCapacity, 0, len(r.items))}
	for _, name := range sortedNames(r.items) {
		if c := r.items[name]; p.matches(c) {
			list.Items = append(list.Items, *c.DeepCopy())
		}
	}
	list.ResourceVersion = formatRV(r.rev)
	return list, nil
}
