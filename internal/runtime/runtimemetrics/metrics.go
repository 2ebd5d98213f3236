package runtimemetrics

import (
	"cmp"
	"context"
	"errors"
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

// DefaultReadTimeout bounds a scrape's reads: they run side by side, so a
// scrape lasts about that at most whatever the number of sources, within
// Prometheus's default scrape timeout (10 s) with room for the rest of the
// registry.
const DefaultReadTimeout = 5 * time.Second

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
// number of apps, the sources side by side. Scrapes that come while a
// read is under way share its outcome, so that a slow source holds no
// scrape longer than ReadTimeout and no read is counted twice.
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
// the reads that failed or did not answer within ReadTimeout: a source
// that failed is left out of that scrape's instances, and the scrape
// shows the error.
type Collector struct {
	opts  Options
	descs Descs
	errs  *prometheus.Desc

	mu       sync.Mutex // guards what follows
	seen     map[string]map[instanceKey]int
	restarts int64
	failed   int64
	// reading is the read under way, if any, and joined the scrapes that
	// waited for one instead of reading.
	reading *scrapeRead
	joined  int
}

// scrapeRead is one read of every source, and what it found once done is
// closed.
type scrapeRead struct {
	done             chan struct{}
	counts           map[runtime.InstanceState]int
	restarts, failed int64
}

type instanceKey struct {
	app runtime.AppName
	id  string
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector; it reads nothing before its first scrape.
func New(opts Options) (*Collector, error) {
	if opts.Driver == "" {
		return nil, errors.New("runtime metrics: Options.Driver is required")
	}
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
	}, nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.descs.Instances
	ch <- c.descs.Restarts
	ch <- c.errs
}

// Collect implements prometheus.Collector: it reads every source, or
// waits for the read under way.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.opts.Active != nil && !c.opts.Active() {
		return
	}
	r := c.read()
	for _, s := range States() {
		ch <- prometheus.MustNewConstMetric(c.descs.Instances, prometheus.GaugeValue, float64(r.counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.descs.Restarts, prometheus.CounterValue, float64(r.restarts))
	ch <- prometheus.MustNewConstMetric(c.errs, prometheus.CounterValue, float64(r.failed))
}

// sourceRead is what one source answered.
type sourceRead struct {
	name  string
	insts []runtime.AppInstance
	err   error
}

// read reads every source side by side, or joins the read under way, and
// returns its outcome: the instances by state, and the counters once the
// restarts read since the last read are added.
func (c *Collector) read() *scrapeRead {
	c.mu.Lock()
	if r := c.reading; r != nil {
		c.joined++
		c.mu.Unlock()
		<-r.done
		return r
	}
	r := &scrapeRead{done: make(chan struct{}), counts: map[runtime.InstanceState]int{}}
	c.reading = r
	c.mu.Unlock()
	defer close(r.done)

	var sources map[string]runtime.InstancesReader
	if c.opts.Sources != nil {
		sources = c.opts.Sources()
	}
	reads := make([]sourceRead, 0, len(sources))
	for name := range sources {
		reads = append(reads, sourceRead{name: name})
	}
	slices.SortFunc(reads, func(a, b sourceRead) int { return cmp.Compare(a.name, b.name) })
	var wg sync.WaitGroup
	for i := range reads {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReadTimeout)
			defer cancel()
			reads[i].insts, reads[i].err = sources[reads[i].name].ReadInstances(ctx)
		})
	}
	wg.Wait()

	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading = nil
	for name := range c.seen {
		if _, ok := sources[name]; !ok {
			delete(c.seen, name)
		}
	}
	for _, sr := range reads {
		if sr.err != nil {
			c.failed++
			c.opts.Log.Error(sr.err, "Reading the runtime's instances for its metrics", "cluster", sr.name)
			continue // its last read stays the one to count from
		}
		prev, known := c.seen[sr.name]
		next := make(map[instanceKey]int, len(sr.insts))
		for _, i := range sr.insts {
			r.counts[i.State]++
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
		c.seen[sr.name] = next
	}
	r.restarts, r.failed = c.restarts, c.failed
	return r
}
