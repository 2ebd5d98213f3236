package localinfratest

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/localfleet"
)

// WatchOptions configure WatchMachines.
type WatchOptions struct {
	// Interval is the time between two polls; 100 ms when zero.
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
// those of the first poll that saw each change, within one interval of it,
// where the Machine's own timestamps have whole seconds.
type MachineLife struct {
	Name    string
	Version string // spec.version, "v1.37.2"
	// Infra is its LocalMachine's name.
	Infra string
	// Existing: the Machine was there at the watch's first poll; Created is
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

// MachineWatch polls the Machines of one Cluster API cluster, and whether
// the Cluster is paused, until closed, and keeps what it saw.
type MachineWatch struct {
	c        client.Client
	ns, name string
	opts     WatchOptions

	mu     sync.Mutex
	lives  map[string]*MachineLife
	paused bool
	polled bool

	stop, done chan struct{}
	once       sync.Once
}

// WatchMachines starts watching the Machines of cluster ns/name.
func WatchMachines(c client.Client, ns, name string, opts WatchOptions) *MachineWatch {
	if opts.Interval == 0 {
		opts.Interval = 100 * time.Millisecond
	}
	w := &MachineWatch{c: c, ns: ns, name: name, opts: opts, lives: map[string]*MachineLife{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			w.poll()
			select {
			case <-w.stop:
				return
			case <-time.After(w.opts.Interval):
			}
		}
	}()
	return w
}

func (w *MachineWatch) poll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	opts := []client.ListOption{client.InNamespace(w.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: w.name}}
	if w.opts.ControlPlane {
		opts = append(opts, client.HasLabels{clusterv1.MachineControlPlaneLabel})
	}
	var list clusterv1.MachineList
	if err := w.c.List(ctx, &list, opts...); err != nil {
		return
	}
	now := time.Now()
	var cluster *localfleet.Cluster
	var backends []string
	if w.opts.Host != nil {
		if cluster = w.opts.Host.Cluster(w.ns, w.name); cluster != nil {
			backends = cluster.Backends()
		}
	}
	w.mu.Lock()
	present := map[string]bool{}
	for _, m := range list.Items {
		present[m.Name] = true
		ml := w.lives[m.Name]
		if ml == nil {
			ml = &MachineLife{Name: m.Name, Version: m.Spec.Version, Infra: m.Spec.InfrastructureRef.Name, Existing: !w.polled, Created: now}
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
		if !present[n] && ml.Gone.IsZero() {
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
	w.polled = true
	w.mu.Unlock()

	c := &clusterv1.Cluster{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name}, c); err == nil && ptr.Deref(c.Spec.Paused, false) {
		w.mu.Lock()
		w.paused = true
		w.mu.Unlock()
	}
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

// Paused reports whether a poll saw the Cluster paused.
func (w *MachineWatch) Paused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paused
}
