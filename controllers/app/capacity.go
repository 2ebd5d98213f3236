package app

import (
	"context"
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	schedulingv1alpha1 "bex.co/bex/apis/scheduling/v1alpha1"
	"bex.co/bex/internal/fleetstate"
)

// unplacedIndex indexes Apps by the status of their Placed condition, when
// it is False: the Apps no cluster could take.
const unplacedIndex = "status.conditions.placed"

func unplacedOf(obj client.Object) []string {
	c := meta.FindStatusCondition(obj.(*platformv1alpha1.App).Status.Conditions, platformv1alpha1.AppPlacedCondition)
	if c != nil && c.Status == metav1.ConditionFalse {
		return []string{string(metav1.ConditionFalse)}
	}
	return nil
}

// capacityWatch follows the fleet's ClusterCapacities (scheduling.bex.co,
// served by bex-apiserver) with an informer of its own, so that an App's
// placement is looked at again when its cluster changes rather than on a
// timer. It never holds the controller's start: while the scheduling API
// cannot be watched (not registered yet, bex-apiserver down or too old to
// serve watch), the informer retries and watching reports false.
type capacityWatch struct {
	// live is true while the informer's last list or watch request
	// succeeded.
	live     atomic.Bool
	informer toolscache.SharedIndexInformer
	synced   func() bool
}

// watching reports whether the ClusterCapacities are followed now: the
// informer synced and its watch is up. A nil watch follows nothing.
func (w *capacityWatch) watching() bool {
	return w != nil && w.live.Load() && w.synced()
}

// newCapacityWatch returns a watch of the ClusterCapacities through c;
// start runs it.
func newCapacityWatch(c client.WithWatch) *capacityWatch {
	w := &capacityWatch{}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := &schedulingv1alpha1.ClusterCapacityList{}
			err := c.List(ctx, list, &client.ListOptions{Raw: &o})
			if err != nil {
				w.live.Store(false)
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := c.Watch(ctx, &schedulingv1alpha1.ClusterCapacityList{}, &client.ListOptions{Raw: &o})
			w.live.Store(err == nil)
			return wi, err
		},
	}
	w.informer = toolscache.NewSharedIndexInformer(lw, &schedulingv1alpha1.ClusterCapacity{}, 0, toolscache.Indexers{})
	w.synced = w.informer.HasSynced
	return w
}

// start runs the informer until ctx ends; its events put into q the Apps
// they concern (capacityConcerns): those whose status.cluster is the
// cluster (clusterIndex), those placed nowhere (unplacedIndex). It returns
// at once.
func (w *capacityWatch) start(ctx context.Context, r *Reconciler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	log := logf.FromContext(ctx).WithValues("watch", "clustercapacities")
	if err := w.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		w.live.Store(false)
		log.V(1).Info("Watching cluster capacities failed; placements are looked at every resync meanwhile", "err", err)
	}); err != nil {
		return fmt.Errorf("setting the capacity watch's error handler: %w", err)
	}
	if _, err := w.informer.AddEventHandler(capacityEvents{enqueue: func(cluster string, placed, unplaced bool) {
		r.enqueueConcerned(ctx, q, cluster, placed, unplaced)
	}}); err != nil {
		return fmt.Errorf("handling capacity events: %w", err)
	}
	go w.informer.RunWithContext(ctx)
	return nil
}

// enqueueConcerned puts into q the Apps placed on cluster (placed) and
// those placed nowhere (unplaced).
func (r *Reconciler) enqueueConcerned(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], cluster string, placed, unplaced bool) {
	add := func(field, value string) {
		var apps platformv1alpha1.AppList
		if err := r.Client.List(ctx, &apps, client.MatchingFields{field: value}); err != nil {
			logf.FromContext(ctx).Error(err, "Listing apps for a capacity change", "cluster", cluster, "index", field)
			return
		}
		for _, a := range apps.Items {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Name}})
		}
	}
	if placed {
		add(clusterIndex, cluster)
	}
	if unplaced {
		add(unplacedIndex, string(metav1.ConditionFalse))
	}
}

// capacityEvents turns the informer's events into the Apps they concern.
// The adds of the informer's first list concern no App: every App is
// reconciled when the controller starts.
type capacityEvents struct {
	enqueue func(cluster string, placed, unplaced bool)
}

func (e capacityEvents) OnAdd(obj any, initial bool) {
	if c, ok := obj.(*schedulingv1alpha1.ClusterCapacity); ok && !initial {
		placed, unplaced := capacityConcerns(nil, c)
		e.enqueue(c.Name, placed, unplaced)
	}
}

func (e capacityEvents) OnUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*schedulingv1alpha1.ClusterCapacity)
	cur, ok2 := newObj.(*schedulingv1alpha1.ClusterCapacity)
	if !ok1 || !ok2 {
		return
	}
	if placed, unplaced := capacityConcerns(old, cur); placed || unplaced {
		e.enqueue(cur.Name, placed, unplaced)
	}
}

func (e capacityEvents) OnDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if c, ok := obj.(*schedulingv1alpha1.ClusterCapacity); ok {
		placed, unplaced := capacityConcerns(c, nil)
		e.enqueue(c.Name, placed, unplaced)
	}
}

// capacityConcerns says whom a cluster's change of capacity from old to
// cur (nil: none) concerns: the Apps placed on it (placed) when what
// leaveReason reads of it changed — it came or went, its flags, health or
// pools, or whether a pool is over-committed (and, while one is, what it
// requests) — and the Apps placed nowhere (unplaced) when it may take one
// now where it could not before: it came, started accepting placements,
// or a pool of it has more room. A change of what its pools request that
// keeps them within their room concerns nobody: with 10,000 Apps every
// Placement written changes a cluster.
func capacityConcerns(old, cur *schedulingv1alpha1.ClusterCapacity) (placed, unplaced bool) {
	switch {
	case old == nil && cur == nil:
		return false, false
	case old == nil:
		return true, true
	case cur == nil:
		return true, false
	}
	return !equality.Semantic.DeepEqual(stayKeyOf(old), stayKeyOf(cur)), roomGrew(old, cur)
}

// stayKey is what leaveReason reads of a cluster's capacity for an App
// that asks for no more than its Placement records.
type stayKey struct {
	Static, Deleting, Cordoned, MidUpgrade, Healthy bool
	Pools                                           []poolStayKey
}

type poolStayKey struct {
	Name          string
	Ready         bool
	NotReadySince *metav1.Time
	Allocatable   schedulingv1alpha1.Capacity
	// Requested is what the pool's Placements request while they exceed
	// its allocatable (nil otherwise): each App that leaves changes it,
	// and the rest look again.
	Requested *schedulingv1alpha1.Capacity
}

func stayKeyOf(cc *schedulingv1alpha1.ClusterCapacity) stayKey {
	s := &cc.Status
	k := stayKey{Static: s.Source == fleetstate.SourceStatic, Deleting: s.Deleting, Cordoned: s.Cordoned, MidUpgrade: s.MidUpgrade, Healthy: s.Healthy}
	for _, p := range s.Pools {
		pk := poolStayKey{Name: p.Name, Ready: p.ReadyNodes > 0, NotReadySince: p.NotReadySince, Allocatable: p.Allocatable}
		if overCommitted(p, size{}, size{}) != "" {
			pk.Requested = &p.Requested
		}
		k.Pools = append(k.Pools, pk)
	}
	return k
}

// roomGrew reports whether cur may take an App that old could not: it
// accepts placements, and did not, or hosts other plans or regions now, or
// one of its pools is new or has more free CPU, memory or pods.
func roomGrew(old, cur *schedulingv1alpha1.ClusterCapacity) bool {
	o, c := &old.Status, &cur.Status
	switch {
	case !c.AcceptsPlacements:
		return false
	case !o.AcceptsPlacements, o.Region != c.Region, !equality.Semantic.DeepEqual(o.Plans, c.Plans):
		return true
	}
	before := map[string]schedulingv1alpha1.PoolCapacity{}
	for _, p := range o.Pools {
		before[p.Name] = p
	}
	for _, p := range c.Pools {
		b, ok := before[p.Name]
		if !ok {
			return true
		}
		if p.Allocatable.CPU.MilliValue()-p.Requested.CPU.MilliValue() > b.Allocatable.CPU.MilliValue()-b.Requested.CPU.MilliValue() ||
			p.Allocatable.Memory.Value()-p.Requested.Memory.Value() > b.Allocatable.Memory.Value()-b.Requested.Memory.Value() ||
			p.Allocatable.Pods-p.Requested.Pods > b.Allocatable.Pods-b.Requested.Pods {
			return true
		}
	}
	return false
}
