package process

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"bex.co/bex/internal/procstat"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/runtime/runtimemetrics"
)

// DriverLabel is the driver label of the process driver's metrics.
const DriverLabel = "process"

var (
	_ runtime.UsageReader  = (*Driver)(nil)
	_ prometheus.Collector = (*collector)(nil)
)

// Collector returns the driver's Prometheus metrics, for the caller to
// register (runtimemetrics' families, driver="process"):
// bex_runtime_instances{driver,state}, the instances of every app by
// state, read at each scrape, and bex_runtime_restarts_total{driver}, the
// restarts in place of crashed instances since the driver started,
// counted as each happens. Neither has a tenant's or an app's name as a
// label.
func (d *Driver) Collector() prometheus.Collector {
	return &collector{d: d, descs: runtimemetrics.NewDescs(DriverLabel)}
}

type collector struct {
	d     *Driver
	descs runtimemetrics.Descs
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.descs.Instances
	ch <- c.descs.Restarts
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counts := map[runtime.InstanceState]int{}
	for _, a := range c.d.allApps() {
		for _, i := range a.instances() {
			counts[i.snapshot().State]++
		}
	}
	for _, s := range runtimemetrics.States() {
		ch <- prometheus.MustNewConstMetric(c.descs.Instances, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.descs.Restarts, prometheus.CounterValue, float64(c.d.restarts.Load()))
}

// allApps returns the apps the driver holds.
func (d *Driver) allApps() []*app {
	d.mu.Lock()
	defer d.mu.Unlock()
	apps := make([]*app, 0, len(d.apps))
	for _, a := range d.apps {
		apps = append(apps, a)
	}
	return apps
}

// instances returns the instances of the app's current and pending
// releases.
func (a *app) instances() []*instance {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*instance
	for _, r := range []*release{a.current, a.pending} {
		if r != nil {
			out = append(out, r.instances...)
		}
	}
	return out
}

// Usage implements runtime.UsageReader: each instance's container cgroup
// in a sandbox; without one, the /proc entry of the instance's process
// (its own CPU time and that of the children it waited for, and its
// resident memory: what its children use while they run is not counted).
// An instance between two runs (crashed, waiting for its restart) is
// left out.
func (d *Driver) Usage(ctx context.Context, tenant, name string) ([]runtime.Usage, error) {
	a := d.lookup(tenant, name)
	if a == nil {
		return nil, fmt.Errorf("%s/%s: %w", tenant, name, runtime.ErrNotFound)
	}
	var out []runtime.Usage
	for _, i := range a.instances() {
		i.mu.Lock()
		pid, c := i.pid, i.container
		i.mu.Unlock()
		if pid == 0 {
			continue
		}
		u := runtime.Usage{Process: i.process, Index: i.index, ID: i.id}
		var err error
		if c != nil {
			u.CPUSeconds, u.MemoryBytes, err = c.Usage()
		} else {
			u.CPUSeconds, u.MemoryBytes, err = procUsage(pid)
		}
		if err != nil {
			continue // it exited between the two reads
		}
		out = append(out, u)
	}
	return out, nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times:
// 100 on every Linux architecture Go runs on.
const clockTicks = 100

// procUsage reads the CPU time and resident memory of process pid.
func procUsage(pid int) (float64, int64, error) {
	f, err := procstat.Fields(pid)
	if err != nil {
		return 0, 0, err
	}
	if len(f) < 22 {
		return 0, 0, fmt.Errorf("reading /proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, k := range []int{procstat.UTime, procstat.STime, procstat.CUTime, procstat.CSTime} {
		v, err := procstat.Int(f, k)
		if err != nil {
			return 0, 0, fmt.Errorf("reading /proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	rss, err := strconv.ParseInt(f[21], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("reading /proc/%d/stat: %w", pid, err)
	}
	return float64(ticks) / clockTicks, rss * int64(os.Getpagesize()), nil
}
