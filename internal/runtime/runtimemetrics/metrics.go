package runtimemetrics

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"bex.co/bex/internal/runtime"
)

// The families' names.
const (
	InstancesName  = "bex_runtime_instances"
	RestartsName   = "bex_runtime_restarts_total"
	ReadErrorsName = "bex_runtime_read_errors_total"
)

// States returns the states bex_runtime_instances has a series of, in
// this order; each is reported, 0 included.
func States() []runtime.InstanceState {
	return []runtime.InstanceState{runtime.Starting, runtime.Running, runtime.Unhealthy, runtime.Crashed, runtime.Stopped}
}

// Descs are the descriptions of one driver's families. The driver is a
// constant label, so that two drivers' collectors (the process driver's
// and the kube clusters' in make run) register side by side in one
// registry.
type Descs struct {
	Instances, Restarts *prometheus.Desc
}

// NewDescs returns driver's descriptions: driver is the value of the
// label driver ("process", "kube").
func NewDescs(driver string) Descs {
	l := prometheus.Labels{"driver": driver}
	return Descs{
		Instances: prometheus.NewDesc(InstancesName,
			"Instances the runtime runs, by driver and state.", []string{"state"}, l),
		Restarts: prometheus.NewDesc(RestartsName,
			"Restarts in place of instances that exited on their own, by driver.", nil, l),
	}
}

// DefaultReadTimeout bounds one source's read at a scrape.
const DefaultReadTimeout = 10 * time.Second

// Options configure a Collector. Zero fields take the defaults in brackets.
type Options struct {
	// Driver is the driver label (required).
	Driver string
	// Sources returns the readers to read at a scrape, by name (a
	// cluster's; "" for a driver alone). A name read at one scrape and
	// gone at the next is forgotten; read again later, it starts anew.
	Sources func() map[string]runtime.InstancesReader
	// Active, when set, says whether the Collector reports: a replica
	// that is not its controller manager's leader reports nothing, so that
	// one replica reads the clusters and the counter has one source [always].
	Active func() bool
	// ReadTimeout bounds each source's read [DefaultReadTimeout].
	ReadTimeout time.Duration
	// Log gets the reads that fail [discarded].
	Log logr.Logger
}

// Collector is a prometheus.Collector of the families, read from its
// sources at each scrape: one ReadInstances per source, whatever the
// number of apps.
//
// bex_runtime_instances counts the instances read, by state.
// bex_runtime_restarts_total adds up, for each instance (its app and ID),
// how much its restart count went up from one read to the next: an
// instance first read at a later read than its source's first counts
// every restart it has (it started since the read before); at a source's
// first read every instance is a baseline, its restarts happened before
// the Collector watched. A count that went down is a new instance under
// an old ID, and counts as one. So the counter never goes back and
// counts no restart twice; it misses the restarts of an instance between
// its last read and its deletion. bex_runtime_read_errors_total counts
// the reads that failed: a source that failed is left out of that
// scrape's instances.
type Collector struct {
	opts  Options
	descs Descs
	errs  *prometheus.Desc

	mu       sync.Mutex // one scrape at a time
	seen     map[string]map[instanceKey]int
	restarts int64
	failed   int64
}

type instanceKey struct {
	app runtime.AppName
	id  string
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector; it reads nothing before its first scrape.
func New(opts Options) *Collector {
	opts.ReadTimeout = cmp.Or(opts.ReadTimeout, DefaultReadTimeout)
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Collector{
		opts:  opts,
		descs: NewDescs(opts.Driver),
		errs: prometheus.NewDesc(ReadErrorsName,
			"Reads of the runtime's instances that failed at a scrape, by driver.", nil, prometheus.Labels{"driver": opts.Driver}),
		seen: map[string]map[instanceKey]int{},
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.descs.Instances
	ch <- c.descs.Restarts
	ch <- c.errs
}

// Collect implements prometheus.Collector: it reads every source.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.opts.Active != nil && !c.opts.Active() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := c.read()
	for _, s := range States() {
		ch <- prometheus.MustNewConstMetric(c.descs.Instances, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.descs.Restarts, prometheus.CounterValue, float64(c.restarts))
	ch <- prometheus.MustNewConstMetric(c.errs, prometheus.CounterValue, float64(c.failed))
}

// read reads every source, adds the restarts read since the last read to
// c.restarts, and returns the instances by state.
func (c *Collector) read() map[runtime.InstanceState]int {
	counts := map[runtime.InstanceState]int{}
	var sources map[string]runtime.InstancesReader
	if c.opts.Sources != nil {
		sources = c.opts.Sources()
	}
	for name := range c.seen {
		if _, ok := sources[name]; !ok {
			delete(c.seen, name)
		}
	}
	names := make([]string, 0, len(sources))
	for name := range sources {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReadTimeout)
		insts, err := sources[name].ReadInstances(ctx)
		cancel()
		if err != nil {
			c.failed++
			c.opts.Log.Error(err, "Reading the runtime's instances for its metrics", "cluster", name)
			continue // its last read stays the one to count from
		}
		prev, known := c.seen[name]
		next := make(map[instanceKey]int, len(insts))
		for _, i := range insts {
			counts[i.State]++
			k := instanceKey{i.App, i.ID}
			next[k] = i.Restarts
			if !known {
				continue
			}
			last, ok := prev[k]
			if !ok || i.Restarts < last {
				last = 0
			}
			c.restarts += int64(i.Restarts - last)
		}
		c.seen[name] = next
	}
	return counts
}
