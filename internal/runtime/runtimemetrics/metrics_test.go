package runtimemetrics_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/runtimemetrics"
	"bex.co/bex/internal/runtime/runtimetest"
)

// reader answers the instances it holds, or err.
type reader struct {
	insts []runtime.AppInstance
	err   error
}

func (r *reader) ReadInstances(context.Context) ([]runtime.AppInstance, error) {
	return r.insts, r.err
}

func inst(app, id string, state runtime.InstanceState, restarts int) runtime.AppInstance {
	return runtime.AppInstance{
		App:      runtime.AppName{Tenant: "acme", App: app},
		Instance: runtime.Instance{Process: "web", ID: id, State: state, Restarts: restarts},
	}
}

// TestCollectorCountsEachRestartOnce follows two clusters' instances
// through the changes a scrape may find: restarts in place, an instance
// replaced by a new one, one that went, a count that went down under the
// same ID, a read that failed, a cluster that went and came back.
func TestCollectorCountsEachRestartOnce(t *testing.T) {
	a := &reader{insts: []runtime.AppInstance{inst("shop", "shop-1", runtime.Running, 4), inst("blog", "blog-1", runtime.Crashed, 2)}}
	b := &reader{insts: []runtime.AppInstance{inst("shop", "shop-1", runtime.Starting, 7)}}
	sources := map[string]runtime.InstancesReader{"a": a, "b": b}
	c, err := runtimemetrics.New(runtimemetrics.Options{Driver: "kube", Sources: func() map[string]runtime.InstancesReader { return sources }})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name     string
		change   func()
		restarts float64
		running  float64
		crashed  float64
		errs     float64
	}{
		{"first read: every restart before it is a baseline", func() {}, 0, 1, 1, 0},
		{"restarts in place", func() {
			a.insts = []runtime.AppInstance{inst("shop", "shop-1", runtime.Running, 5), inst("blog", "blog-1", runtime.Running, 4)}
			b.insts = []runtime.AppInstance{inst("shop", "shop-1", runtime.Running, 8)}
		}, 4, 3, 0, 0},
		{"replaced: the new instance's restarts count, the old one's are not taken back", func() {
			a.insts = []runtime.AppInstance{inst("shop", "shop-2", runtime.Crashed, 1), inst("blog", "blog-1", runtime.Running, 4)}
		}, 5, 2, 1, 0},
		{"a count that went down: a new instance under the old ID", func() {
			a.insts = []runtime.AppInstance{inst("shop", "shop-2", runtime.Running, 1), inst("blog", "blog-1", runtime.Running, 2)}
		}, 7, 3, 0, 0},
		{"a failed read: the cluster is left out, and read from its last read after", func() {
			b.err = errors.New("unreachable")
		}, 7, 2, 0, 1},
		{"b read again: its restarts since its last good read count", func() {
			b.err = nil
			b.insts = []runtime.AppInstance{inst("shop", "shop-1", runtime.Running, 10)}
		}, 9, 3, 0, 1},
		{"b gone", func() { delete(sources, "b") }, 9, 2, 0, 1},
		{"b back: a baseline again", func() {
			sources["b"] = b
			b.insts = []runtime.AppInstance{inst("shop", "shop-1", runtime.Running, 15)}
		}, 9, 3, 0, 1},
	} {
		step.change()
		m := runtimetest.ReadMetrics(t, c, "kube")
		if m.Restarts != step.restarts || m.Instances[runtime.Running] != step.running || m.Instances[runtime.Crashed] != step.crashed {
			t.Errorf("%s: restarts %v, instances %v; want %v restarts, %v Running, %v Crashed", step.name, m.Restarts, m.Instances, step.restarts, step.running, step.crashed)
		}
		if m.ReadErrors != step.errs {
			t.Errorf("%s: %v read errors, want %v", step.name, m.ReadErrors, step.errs)
		}
	}
}

// waiting answers once every reader of its group entered ReadInstances,
// or fails when its context ends first: read one after the other, no
// group of two is ever answered.
type waiting struct {
	entered *sync.WaitGroup
	insts   []runtime.AppInstance
}

func (w *waiting) ReadInstances(ctx context.Context) ([]runtime.AppInstance, error) {
	w.entered.Done()
	all := make(chan struct{})
	go func() { w.entered.Wait(); close(all) }()
	select {
	case <-all:
		return w.insts, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestCollectorReadsSourcesSideBySide: a scrape reads its clusters side by
// side, so that a slow one holds the scrape no longer than ReadTimeout
// whatever their number; read one after the other, each of these two
// would wait for the other until its timeout, and both would fail.
func TestCollectorReadsSourcesSideBySide(t *testing.T) {
	var entered sync.WaitGroup
	entered.Add(2)
	sources := map[string]runtime.InstancesReader{
		"a": &waiting{entered: &entered, insts: []runtime.AppInstance{inst("shop", "shop-1", runtime.Running, 0)}},
		"b": &waiting{entered: &entered, insts: []runtime.AppInstance{inst("blog", "blog-1", runtime.Running, 0)}},
	}
	c, err := runtimemetrics.New(runtimemetrics.Options{Driver: "kube", ReadTimeout: 2 * time.Second,
		Sources: func() map[string]runtime.InstancesReader { return sources }})
	if err != nil {
		t.Fatal(err)
	}
	m := runtimetest.ReadMetrics(t, c, "kube")
	if m.ReadErrors != 0 || m.Instances[runtime.Running] != 2 {
		t.Errorf("%v read errors and %v Running, want 0 and both clusters' 2", m.ReadErrors, m.Instances[runtime.Running])
	}
}

// TestNewRequiresADriver: the driver label is what tells two drivers'
// series apart; a Collector without one is refused.
func TestNewRequiresADriver(t *testing.T) {
	if _, err := runtimemetrics.New(runtimemetrics.Options{}); err == nil {
		t.Error("New without a driver: no error")
	}
}

// TestTwoDriversInOneRegistry: make run serves the process driver's
// families and the kube clusters' in one registry, told apart by their
// driver label.
func TestTwoDriversInOneRegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	kube, err := runtimemetrics.New(runtimemetrics.Options{Driver: "kube"})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(kube); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(processLike{runtimemetrics.NewDescs("process")}); err != nil {
		t.Fatalf("registering a second driver's families: %v", err)
	}
	if n, err := testutil.GatherAndCount(reg, runtimemetrics.InstancesName, runtimemetrics.RestartsName); err != nil || n != 2*len(runtimemetrics.States())+2 {
		t.Errorf("%d series (%v), want each driver's", n, err)
	}
}

// processLike reports no instance and no restart, with the descriptions
// the process driver uses.
type processLike struct{ d runtimemetrics.Descs }

func (p processLike) Describe(ch chan<- *prometheus.Desc) {
	ch <- p.d.Instances
	ch <- p.d.Restarts
}

func (p processLike) Collect(ch chan<- prometheus.Metric) {
	for _, s := range runtimemetrics.States() {
		ch <- prometheus.MustNewConstMetric(p.d.Instances, prometheus.GaugeValue, 0, string(s))
	}
	ch <- prometheus.MustNewConstMetric(p.d.Restarts, prometheus.CounterValue, 0)
}
