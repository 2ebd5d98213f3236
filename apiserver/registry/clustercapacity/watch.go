package clustercapacity

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"

	"bex.co/bex/apis/scheduling"
)

// refresh computes the capacities again when the source's Version moved
// since the last time (always when force, or when the source cannot
// tell), and records each cluster that changed as a change for watchers.
func (r *REST) refresh(ctx context.Context, force bool) error {
	// The version is read before the state: a change that lands while the
	// capacities are computed moves it past the one recorded.
	v, ok := r.source.Version()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !force && r.computed && r.versioned && ok && v == r.version {
		return nil
	}
	caps, err := r.source.Capacities(ctx)
	if err != nil {
		return err
	}
	r.apply(caps)
	r.computed, r.versioned, r.version = true, ok, v
	return nil
}

// apply records the clusters of caps that are new, changed or gone. r.mu
// is held.
func (r *REST) apply(caps []scheduling.ClusterCapacity) {
	seen := make(map[string]bool, len(caps))
	for i := range caps {
		c := new(scheduling.ClusterCapacity)
		*c = caps[i]
		seen[c.Name] = true
		old, ok := r.items[c.Name]
		if ok && same(old, c) {
			continue
		}
		r.rev++
		c.ResourceVersion = formatRV(r.rev)
		r.items[c.Name] = c
		if ok {
			r.record(change{rev: r.rev, typ: watch.Modified, obj: c, prev: old})
		} else {
			r.record(change{rev: r.rev, typ: watch.Added, obj: c})
		}
	}
	for _, name := range sortedNames(r.items) {
		if seen[name] {
			continue
		}
		old := r.items[name]
		delete(r.items, name)
		r.rev++
		gone := old.DeepCopy()
		gone.ResourceVersion = formatRV(r.rev)
		r.record(change{rev: r.rev, typ: watch.Deleted, obj: gone, prev: old})
	}
}

// same reports whether two states of a cluster show the same. It compares
// field by field (TestSameComparesEveryField keeps it complete): with
// equality.Semantic it was two thirds of a change's cost.
func same(a, b *scheduling.ClusterCapacity) bool {
	x, y := &a.Status, &b.Status
	if !maps.Equal(a.Labels, b.Labels) || !maps.Equal(a.Annotations, b.Annotations) ||
		x.Source != y.Source || x.ClusterNamespace != y.ClusterNamespace || x.Region != y.Region ||
		!slices.Equal(x.Plans, y.Plans) || !slices.Equal(x.ControlPlaneVersions, y.ControlPlaneVersions) ||
		x.MidUpgrade != y.MidUpgrade || x.Healthy != y.Healthy || x.Cordoned != y.Cordoned || x.Deleting != y.Deleting ||
		x.Standby != y.Standby || x.AcceptsPlacements != y.AcceptsPlacements || x.Reason != y.Reason || x.Message != y.Message ||
		!sameCapacity(&x.Allocatable, &y.Allocatable) || !sameCapacity(&x.Requested, &y.Requested) || len(x.Pools) != len(y.Pools) {
		return false
	}
	for i := range x.Pools {
		p, q := &x.Pools[i], &y.Pools[i]
		if p.Name != q.Name || p.Nodes != q.Nodes || p.ReadyNodes != q.ReadyNodes ||
			!equality.Semantic.DeepEqual(p.NotReadySince, q.NotReadySince) ||
			!sameCapacity(&p.Allocatable, &q.Allocatable) || !sameCapacity(&p.Requested, &q.Requested) {
			return false
		}
	}
	return true
}

func sameCapacity(a, b *scheduling.Capacity) bool {
	return a.Pods == b.Pods && a.CPU.Cmp(b.CPU) == 0 && a.Memory.Cmp(b.Memory) == 0
}

// record keeps ch in the history, dropping the oldest beyond r.history,
// and hands it to every watcher. r.mu is held.
func (r *REST) record(ch change) {
	r.changes = append(r.changes, ch)
	// Compact once twice the history is held: each change is copied once.
	if n := len(r.changes); n >= 2*r.history {
		r.floor = r.changes[n-r.history-1].rev
		r.changes = append([]change(nil), r.changes[n-r.history:]...)
	}
	for w := range r.watchers {
		if e, ok := w.pred.event(ch); ok {
			w.send(e)
		}
	}
}

// Watch streams the changes of the capacities matching the label and
// field (metadata.name) selectors.
//
// As the kube-apiserver does: with sendInitialEvents, or without it from
// resourceVersion "" or "0", the watch starts with an ADDED event per
// cluster as it is now (and, with sendInitialEvents and bookmarks allowed,
// a BOOKMARK annotated k8s.io/initial-events-end at the newest
// resourceVersion); with sendInitialEvents false from "" or "0" it starts
// with the next change; from any other resourceVersion it replays the changes
// after it, or fails with 410 Gone (Expired) when they are no longer held,
// and as too large when it is newer than the newest. A cluster that stops
// matching the selectors is DELETED, one that starts matching ADDED.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	if err := r.refresh(ctx, false); err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	opts := options
	if opts == nil {
		opts = &metainternalversion.ListOptions{}
	}
	legacy := opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	initial := legacy
	if opts.SendInitialEvents != nil {
		initial = *opts.SendInitialEvents
	}
	// From "" or "0" without the initial events: from now on.
	fromNow := legacy && !initial
	var from uint64
	if !legacy {
		var err error
		if from, err = parseRV(opts.ResourceVersion); err != nil {
			return nil, err
		}
	}
	p := predicateOf(opts)
	r.mu.Lock()
	defer r.mu.Unlock()
	if from > r.rev {
		return nil, storage.NewTooLargeResourceVersionError(from, r.rev, 1)
	}
	var first []watch.Event
	if initial {
		for _, name := range sortedNames(r.items) {
			if c := r.items[name]; p.matches(c) {
				first = append(first, watch.Event{Type: watch.Added, Object: c.DeepCopy()})
			}
		}
		if opts.SendInitialEvents != nil && opts.AllowWatchBookmarks {
			mark := &scheduling.ClusterCapacity{ObjectMeta: metav1.ObjectMeta{
				ResourceVersion: formatRV(r.rev),
				Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
			}}
			first = append(first, watch.Event{Type: watch.Bookmark, Object: mark})
		}
	} else if !fromNow {
		if from < r.floor {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, r.floor))
		}
		for _, ch := range r.changes {
			if ch.rev <= from {
				continue
			}
			if e, ok := p.event(ch); ok {
				first = append(first, e)
			}
		}
	}
	w := &watcher{
		rest: r, pred: p, pending: first, behind: len(first), limit: len(first) + r.watchBuffer,
		result: make(chan watch.Event), kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
	r.watchers[w] = struct{}{}
	go w.run()
	return w, nil
}

// stopWatchers ends every watch.
func (r *REST) stopWatchers() {
	r.mu.Lock()
	ws := slices.Collect(maps.Keys(r.watchers))
	r.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

// watcher is one watch: the events not yet delivered, handed to its
// client by run. A client that falls limit events behind is cut off
// after those it has: it watches again from the last resourceVersion it
// got.
type watcher struct {
	rest *REST
	pred predicate

	mu sync.Mutex
	// pending are the events run has not taken yet; behind counts them
	// and those run has taken but not delivered, which limit bounds.
	pending  []watch.Event
	behind   int
	limit    int
	overflow bool

	result chan watch.Event
	kick   chan struct{}
	done   chan struct{}
	stop   sync.Once
}

var _ watch.Interface = (*watcher)(nil)

// ResultChan returns the events; it is closed when the watch ends.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the watch.
func (w *watcher) Stop() {
	w.stop.Do(func() {
		w.rest.mu.Lock()
		delete(w.rest.watchers, w)
		w.rest.mu.Unlock()
		close(w.done)
	})
}

// send queues e; it never blocks. The storage's lock is held.
func (w *watcher) send(e watch.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.overflow {
		return
	}
	if w.behind >= w.limit {
		w.overflow = true
	} else {
		w.pending = append(w.pending, e)
		w.behind++
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run delivers the queued events in order until the watch stops, or,
// after the last event that fit, overflows.
func (w *watcher) run() {
	defer close(w.result)
	defer w.Stop()
	for {
		w.mu.Lock()
		evs, overflow := w.pending, w.overflow
		w.pending = nil
		w.mu.Unlock()
		for _, e := range evs {
			select {
			case w.result <- e:
			case <-w.done:
				return
			}
			w.mu.Lock()
			w.behind--
			w.mu.Unlock()
		}
		if overflow {
			return
		}
		select {
		case <-w.kick:
		case <-w.done:
			return
		}
	}
}

// predicate selects clusters by labels and by metadata.name.
type predicate struct {
	labels labels.Selector
	fields fields.Selector
}

func predicateOf(o *metainternalversion.ListOptions) predicate {
	p := predicate{labels: labels.Everything(), fields: fields.Everything()}
	if o != nil && o.LabelSelector != nil {
		p.labels = o.LabelSelector
	}
	if o != nil && o.FieldSelector != nil {
		p.fields = o.FieldSelector
	}
	return p
}

func (p predicate) matches(c *scheduling.ClusterCapacity) bool {
	return p.labels.Matches(labels.Set(c.Labels)) && p.fields.Matches(fields.Set{"metadata.name": c.Name})
}

// event is the change as a watcher with the predicate sees it, if at all:
// a cluster that stops matching is deleted (in its previous state at the
// change's resourceVersion), one that starts matching added. The object is
// the watcher's own copy: encoding an event writes to it (its kind, for
// the time of the encoding), and watchers encode at once.
func (p predicate) event(ch change) (watch.Event, bool) {
	now := p.matches(ch.obj)
	switch ch.typ {
	case watch.Added, watch.Deleted:
		return watch.Event{Type: ch.typ, Object: ch.obj.DeepCopy()}, now
	}
	before := p.matches(ch.prev)
	switch {
	case now && before:
		return watch.Event{Type: watch.Modified, Object: ch.obj.DeepCopy()}, true
	case now:
		return watch.Event{Type: watch.Added, Object: ch.obj.DeepCopy()}, true
	case before:
		gone := ch.prev.DeepCopy()
		gone.ResourceVersion = formatRV(ch.rev)
		return watch.Event{Type: watch.Deleted, Object: gone}, true
	}
	return watch.Event{}, false
}

func sortedNames(m map[string]*scheduling.ClusterCapacity) []string {
	return slices.Sorted(maps.Keys(m))
}

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }

func parseRV(s string) (uint64, error) {
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: %v", s, err))
	}
	return rv, nil
}
