package placement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"

	"bex.co/bex/apis/scheduling"
	"bex.co/bex/apiserver/scheduler"
	"bex.co/bex/internal/fleetstate"
)

// Index holds every Placement of every namespace in memory, fed by a
// list-and-watch of the storage itself (not of the API, so it needs no
// credentials), and sums what they request. Run it once.
type Index struct {
	informer cache.SharedIndexInformer

	// dirty is set by every event; Requested recomputes the totals only
	// then, so that a read costs a copy of one entry per pool, not a pass
	// over every Placement.
	dirty atomic.Bool
	// changes counts the events: Version.
	changes atomic.Uint64
	// signal tells of each event: Notify.
	signal fleetstate.Signal
	// reservations, when not nil, are told of each Placement's event.
	reservations *scheduler.Reservations
	mu           sync.Mutex
	totals       scheduler.Requested
}

var (
	_ scheduler.PlacementTotals = (*Index)(nil)
	_ scheduler.Versioned       = (*Index)(nil)
	_ scheduler.Notifier        = (*Index)(nil)
)

// NewIndex returns an index over the Placement storage that tells
// reservations (nil: none) of each Placement it counts changed.
func NewIndex(rest *REST, reservations *scheduler.Reservations) (*Index, error) {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			opts, err := internalOptions(&o)
			if err != nil {
				return nil, err
			}
			return rest.List(genericapirequest.WithNamespace(ctx, metav1.NamespaceAll), opts)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			opts, err := internalOptions(&o)
			if err != nil {
				return nil, err
			}
			w, err := rest.Watch(genericapirequest.WithNamespace(ctx, metav1.NamespaceAll), opts)
			if err != nil {
				return nil, err
			}
			// The watch cache wraps objects for serialisation; the index
			// wants the Placement inside.
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if co, ok := e.Object.(runtime.CacheableObject); ok {
					e.Object = co.GetObject()
				}
				return e, true
			}), nil
		},
	}
	i := &Index{informer: cache.NewSharedIndexInformer(lw, &scheduling.Placement{}, 0, cache.Indexers{}), reservations: reservations}
	i.dirty.Store(true)
	if _, err := i.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    i.mark,
		UpdateFunc: func(_, obj any) { i.mark(obj) },
		DeleteFunc: i.mark,
	}); err != nil {
		return nil, fmt.Errorf("watching placements: %w", err)
	}
	return i, nil
}

// mark records an event of obj's Placement. The informer updates its
// store before it calls handlers, so totals read after the flag is set
// and the version moved count the change; only then are the
// reservations told.
func (i *Index) mark(obj any) {
	i.dirty.Store(true)
	v := i.changes.Add(1)
	if i.reservations != nil {
		if key, err := cache.DeletionHandlingObjectToName(obj); err == nil {
			i.reservations.Seen(scheduler.PlacementKey{Namespace: key.Namespace, Name: key.Name}, v)
		}
	}
	i.signal.Broadcast()
}

func internalOptions(o *metav1.ListOptions) (*metainternalversion.ListOptions, error) {
	out := &metainternalversion.ListOptions{}
	if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(o, out, nil); err != nil {
		return nil, fmt.Errorf("converting list options: %w", err)
	}
	return out, nil
}

// Run feeds the index until ctx ends.
func (i *Index) Run(ctx context.Context) { i.informer.RunWithContext(ctx) }

// WaitForSync waits until the first full read is in, or ctx ends.
func (i *Index) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), i.informer.HasSynced)
}

// Version counts the changes to the Placements; ok once the first full
// read is in.
func (i *Index) Version() (uint64, bool) {
	return i.changes.Load(), i.informer.HasSynced()
}

// Notify calls changed after each change to the Placements (the events
// Version counts), until ctx ends.
func (i *Index) Notify(ctx context.Context, changed func()) { i.signal.Notify(ctx, changed) }

// Requested sums replicas × resources of the Placements per cluster and
// pool.
func (i *Index) Requested() (scheduler.Requested, error) {
	if !i.informer.HasSynced() {
		return nil, errors.New("placements not read yet")
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.dirty.Swap(false) || i.totals == nil {
		req := scheduler.Requested{}
		for _, obj := range i.informer.GetStore().List() {
			if p, ok := obj.(*scheduling.Placement); ok {
				req.Add(&p.Spec)
			}
		}
		i.totals = req
	}
	out := make(scheduler.Requested, len(i.totals))
	for k, v := range i.totals {
		out[k] = scheduling.Capacity{CPU: v.CPU.DeepCopy(), Memory: v.Memory.DeepCopy(), Pods: v.Pods}
	}
	return out, nil
}
