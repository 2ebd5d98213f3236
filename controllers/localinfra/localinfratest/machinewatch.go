package localinfratest

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/localfleet"
)

// WatchOptions configure WatchMachines.
type WatchOptions struct {
	// Interval is the time between two looks at the Host's load
	// balancer (the Machines and the Cluster are watched); 100 ms when
	// zero.
	Interval time.Duration
	// ControlPlane: only the cluster's control-plane Machines.
	ControlPlane bool
	// Hook is the deletion hook annotation whose going, once a Machine is
	// marked for deletion, is its release (MachineLife.Released).
	Hook string
	// Host, when set, runs the cluster's machines: the watch also notes
	// when each Machine's apiserver joined and left the cluster's load
	// balancer.
	Host *localfleet.Host
}

// MachineLife is what a MachineWatch saw of one Machine. The times are
// those of the watch event that brought each change (of the look at the
// load balancer, within one interval of it), where the Machine's own
// timestamps have whole seconds.
type MachineLife struct {
	Name    string
	Version string // spec.version, "v1.37.2"
	// Infra is its LocalMachine's name.
	Infra string
	// Existing: the Machine was there at the watch's first list; Created is
	// then its creationTimestamp, otherwise when the watch first saw it.
	Existing bool
	Created  time.Time
	// HookedAt is when it was first seen carrying the hook, Marked when
	// first seen marked for deletion (DeletionTimestamp is the mark's own
	// time, whole seconds), Released when the hook was first seen gone
	// from it once marked, Gone when the Machine was.
	HookedAt, Marked, DeletionTimestamp, Released, Gone time.Time
	// JoinedLB and LeftLB are when its apiserver was first seen in, and
	// then out of, the cluster's load balancer (with WatchOptions.Host).
	JoinedLB, LeftLB time.Time

	addr string
}

// MachineWatch watches the Machines of one Cluster API cluster, and
// whether the Cluster is paused, until closed, and keeps what it saw. It
// lists and then watches each kind (listing again when a watch ends), so
// that it costs the apiserver what an informer does, not a request per
// interval.
type MachineWatch struct {
	c        client.WithWatch
	ns, name string
	opts     WatchOptions

	mu       sync.Mutex
	lives    map[string]*MachineLife
	machines map[string]*clusterv1.Machine // as last listed or watched
	paused   bool
	listed   bool

	stop, done chan struct{}
	once       sync.Once
}

// WatchMachines starts watching the Machines of cluster ns/name.
func WatchMachines(c client.WithWatch, ns, name string, opts WatchOptions) *MachineWatch {
	if opts.Interval == 0 {
		opts.Interval = 100 * time.Millisecond
	}
	w := &MachineWatch{c: c, ns: ns, name: name, opts: opts, lives: map[string]*MachineLife{},
		stop: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.watchMachines(ctx) }()
	go func() { defer wg.Done(); w.watchCluster(ctx) }()
	go func() {
		defer close(w.done)
		tick := time.NewTicker(opts.Interval)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				cancel()
				wg.Wait()
				return
			case <-tick.C:
				w.observe()
			}
		}
	}()
	return w
}

// listWatch lists with list and then watches from the list's resource
// version, calling seen with the whole list and event with each event,
// until ctx ends; it lists again when a watch ends, and retries a failed
// list or watch after a second.
func (w *MachineWatch) listWatch(ctx context.Context, list client.ObjectList, opts []client.ListOption, seen func(), event func(watch.Event)) {
	for ctx.Err() == nil {
		if err := w.c.List(ctx, list, opts...); err != nil {
			sleep(ctx, time.Second)
			continue
		}
		seen()
		wopts := append(slices.Clone(opts), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		wi, err := w.c.Watch(ctx, list, wopts...)
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			event(ev)
		}
		wi.Stop()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (w *MachineWatch) watchMachines(ctx context.Context) {
	opts := []client.ListOption{client.InNamespace(w.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: w.name}}
	if w.opts.ControlPlane {
		opts = append(opts, client.HasLabels{clusterv1.MachineControlPlaneLabel})
	}
	list := &clusterv1.MachineList{}
	w.listWatch(ctx, list, opts, func() {
		w.mu.Lock()
		w.machines = map[string]*clusterv1.Machine{}
		for i := range list.Items {
			w.machines[list.Items[i].Name] = &list.Items[i]
		}
		w.mu.Unlock()
		w.observe()
	}, func(ev watch.Event) {
		m, ok := ev.Object.(*clusterv1.Machine)
		if !ok {
			return
		}
		w.mu.Lock()
		switch ev.Type {
		case watch.Added, watch.Modified:
			w.machines[m.Name] = m
		case watch.Deleted:
			delete(w.machines, m.Name)
		}
		w.mu.Unlock()
		w.observe()
	})
}

func (w *MachineWatch) watchCluster(ctx context.Context) {
	opts := []client.ListOption{client.InNamespace(w.ns), client.MatchingFields{"metadata.name": w.name}}
	list := &clusterv1.ClusterList{}
	pausedIn := func(c *clusterv1.Cluster) {
		if ptr.Deref(c.Spec.Paused, false) {
			w.mu.Lock()
			w.paused = true
			w.mu.Unlock()
		}
	}
	w.listWatch(ctx, list, opts, func() {
		for i := range list.Items {
			pausedIn(&list.Items[i])
		}
	}, func(ev watch.Event) {
		if c, ok := ev.Object.(*clusterv1.Cluster); ok && ev.Type != watch.Deleted {
			pausedIn(c)
		}
	})
}

// observe notes what changed since it last ran: in the Machines as last
// listed or watched, and in the cluster's load balancer.
func (w *MachineWatch) observe() {
	now := time.Now()
	var cluster *localfleet.Cluster
	var backends []string
	if w.opts.Host != nil {
		if cluster = w.opts.Host.Cluster(w.ns, w.name); cluster != nil {
			backends = cluster.Backends()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.machines == nil {
		return // not listed yet
	}
	for _, m := range w.machines {
		ml := w.lives[m.Name]
		if ml == nil {
			ml = &MachineLife{Name: m.Name, Version: m.Spec.Version, Infra: m.Spec.InfrastructureRef.Name, Existing: !w.listed, Created: now}
			if ml.Existing {
				ml.Created = m.CreationTimestamp.Time
			}
			w.lives[m.Name] = ml
		}
		_, hooked := m.Annotations[w.opts.Hook]
		hooked = hooked && w.opts.Hook != ""
		if hooked && ml.HookedAt.IsZero() {
			ml.HookedAt = now
		}
		marked := !m.DeletionTimestamp.IsZero()
		if marked && ml.Marked.IsZero() {
			ml.Marked, ml.DeletionTimestamp = now, m.DeletionTimestamp.Time
		}
		if marked && !hooked && ml.Released.IsZero() {
			ml.Released = now
		}
	}
	for n, ml := range w.lives {
		if w.machines[n] == nil && ml.Gone.IsZero() {
			ml.Gone = now
		}
		if cluster == nil {
			continue
		}
		lm := cluster.Machine(ml.Infra)
		if ml.addr == "" && lm != nil {
			ml.addr = lm.Addr()
		}
		in := ml.addr != "" && lm != nil && slices.Contains(backends, ml.addr)
		switch {
		case in && ml.JoinedLB.IsZero():
			ml.JoinedLB = now
		case !in && !ml.JoinedLB.IsZero() && ml.LeftLB.IsZero():
			ml.LeftLB = now
		}
	}
	w.listed = true
}

// Close stops the watch and waits for it; it is safe to call more than
// once.
func (w *MachineWatch) Close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

// Snapshot returns the Machines seen: those marked for deletion in the
// order they were seen marked, then the others by creation, then by name.
func (w *MachineWatch) Snapshot() []MachineLife {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]MachineLife, 0, len(w.lives))
	for _, ml := range w.lives {
		out = append(out, *ml)
	}
	slices.SortFunc(out, func(a, b MachineLife) int {
		switch {
		case a.Marked.IsZero() != b.Marked.IsZero():
			if a.Marked.IsZero() {
				return 1
			}
			return -1
		case !a.Marked.Equal(b.Marked):
			return a.Marked.Compare(b.Marked)
		case !a.Created.Equal(b.Created):
			return a.Created.Compare(b.Created)
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

// Marked returns the names of the Machines of version seen marked for
// deletion, in the order they were seen marked.
func (w *MachineWatch) Marked(version string) []string {
	var out []string
	for _, ml := range w.Snapshot() {
		if ml.Version == version && !ml.Marked.IsZero() {
			out = append(out, ml.Name)
		}
	}
	return out
}

// MaxAtOnce returns the most Machines that existed at once, as seen: one
// that went and one that came at the same instant count once.
func (w *MachineWatch) MaxAtOnce() int {
	type change struct {
		at    time.Time
		delta int
	}
	var changes []change
	for _, ml := range w.Snapshot() {
		changes = append(changes, change{ml.Created, 1})
		if !ml.Gone.IsZero() {
			changes = append(changes, change{ml.Gone, -1})
		}
	}
	slices.SortFunc(changes, func(a, b change) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.delta, b.delta) // goings first
	})
	n, most := 0, 0
	for _, c := range changes {
		n += c.delta
		most = max(most, n)
	}
	return most
}

// Paused reports whether the watch saw the Cluster paused.
func (w *MachineWatch) Paused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paused
}
