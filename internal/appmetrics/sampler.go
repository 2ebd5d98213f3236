package appmetrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"bex.co/bex/internal/runtime"
)

// Defaults of Options.
const (
	DefaultInterval = 10 * time.Second
	// DefaultKeep is an hour of DefaultInterval points.
	DefaultKeep    = 360
	DefaultMaxApps = 10000
	// DefaultSaveInterval is how often Run saves the series when
	// Options.Saved is set: a platform killed loses at most this much.
	DefaultSaveInterval = 2 * time.Minute
)

// Key names an app.
type Key struct{ Tenant, App string }

// Options configure a Sampler.
type Options struct {
	// Apps lists the apps that exist; an app it does not list is dropped
	// with its series. Required. An error keeps the apps of the last
	// round.
	Apps func(ctx context.Context) ([]Key, error)
	// Runtime reports each app's instances (restarts) and, when it is a
	// runtime.UsageReader, their CPU and memory. Required.
	Runtime runtime.Driver
	// Interval is the resolution of the series [DefaultInterval]; Keep how
	// many points each app keeps [DefaultKeep].
	Interval time.Duration
	Keep     int
	// MaxApps bounds the apps tracked at once [DefaultMaxApps]: requests
	// for more are not counted.
	MaxApps int
	// Saved, when not nil, keeps the series across restarts: Load reads
	// them back, Run saves them every SaveInterval
	// [DefaultSaveInterval] and once more when it stops. Nil keeps them in
	// memory only.
	Saved        SeriesStore
	SaveInterval time.Duration
	Log          logr.Logger
}

// Point is one interval of an app, ending at Time. A nil field was not
// measured: CPU and memory where the runtime cannot read them (and CPU on
// an app's first point, which has no earlier reading), latencies of an
// interval without requests.
type Point struct {
	Time time.Time `json:"time"`
	// CPUCores is the CPU the app's instances used over the interval, in
	// cores (1 = one core busy all the time).
	CPUCores *float64 `json:"cpuCores"`
	// MemoryBytes is the memory its instances use at Time.
	MemoryBytes *int64 `json:"memoryBytes"`
	// Instances is how many instances the runtime reported at Time.
	Instances int `json:"instances"`
	// Restarts is how many restarts of crashed instances happened in the
	// interval.
	Restarts int `json:"restarts"`
	// Requests and Errors (answered 5xx) are the edge's requests for the
	// app in the interval.
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"`
	// P50Seconds and P99Seconds are the median and 99th percentile of the
	// edge's request durations in the interval (the upper bound of their
	// bucket: at most 25% above).
	P50Seconds *float64 `json:"p50Seconds"`
	P99Seconds *float64 `json:"p99Seconds"`
}

// Series is an app's points, oldest first.
type Series struct {
	Interval time.Duration
	Points   []Point
	// UsageNote, when CPU and memory are not measured, says why.
	UsageNote string
}

// Sampler keeps the apps' series. Its methods are safe for concurrent
// use; Observe is on the edge's request path and only takes a lock.
type Sampler struct {
	opts Options

	mu   sync.Mutex
	apps map[Key]*appState
	// readAppsErr is the last error of the runtime's ReadApps, logged
	// once until it changes.
	readAppsErr string
	// saves counts the calls to Options.Saved.
	saves uint64
}

type appState struct {
	points []Point
	cur    histogram
	// cpu and restarts are the last readings, by instance ID.
	cpu       map[string]float64
	restarts  map[string]int
	lastAt    time.Time
	usageNote string
	// changes counts the changes of points; saved is its value when they
	// were last saved (0: never), sending its value when they were
	// handed to the store in save number sendingIn.
	changes, saved, sending, sendingIn uint64
	// savedLast is the time of the last point saved (zero: the next save
	// writes the whole series), chunks and chunkBytes the chunks and bytes
	// saved since the last whole write (the store's bounds); sendingLast,
	// sendingWhole and sendingBytes are what save sendingIn handed over.
	savedLast, sendingLast time.Time
	chunks, chunkBytes     int
	sendingWhole           bool
	sendingBytes           int
	// firstSampled is the time of the app's first point sampled here
	// (not loaded).
	firstSampled time.Time
}

// New checks the options.
func New(opts Options) (*Sampler, error) {
	switch {
	case opts.Apps == nil:
		return nil, errors.New("appmetrics: Apps is nil")
	case opts.Runtime == nil:
		return nil, errors.New("appmetrics: Runtime is nil")
	case opts.Interval < 0 || opts.Keep < 0 || opts.MaxApps < 0 || opts.SaveInterval < 0:
		return nil, errors.New("appmetrics: Interval, Keep, MaxApps and SaveInterval may not be negative")
	}
	if opts.SaveInterval == 0 {
		opts.SaveInterval = DefaultSaveInterval
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Keep == 0 {
		opts.Keep = DefaultKeep
	}
	if opts.MaxApps == 0 {
		opts.MaxApps = DefaultMaxApps
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Sampler{opts: opts, apps: map[Key]*appState{}}, nil
}

// Interval is the series' resolution; Retention how far back they go.
func (s *Sampler) Interval() time.Duration  { return s.opts.Interval }
func (s *Sampler) Retention() time.Duration { return time.Duration(s.opts.Keep) * s.opts.Interval }

// Observe counts one request the edge served for an app.
func (s *Sampler) Observe(tenant, app string, status int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.tracked(Key{tenant, app}); a != nil {
		a.cur.observe(status, d)
	}
}

// tracked is k's state, made when k is new and fewer than MaxApps are
// tracked; nil past that. s.mu is held.
func (s *Sampler) tracked(k Key) *appState {
	a := s.apps[k]
	if a == nil && len(s.apps) < s.opts.MaxApps {
		a = newAppState()
		s.apps[k] = a
	}
	return a
}

func newAppState() *appState {
	return &appState{cpu: map[string]float64{}, restarts: map[string]int{}}
}

// Run samples every Interval until ctx ends. With Options.Saved it saves
// the series every SaveInterval, and once more after ctx ends, before it
// returns: it first ends the current interval with a last sample (at
// most 10 s: the requests observed since the last sample, and the
// runtime's reading), then saves (at most 30 s), each on a context of
// ctx's values.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	var saves <-chan time.Time
	if s.opts.Saved != nil {
		st := time.NewTicker(s.opts.SaveInterval)
		defer st.Stop()
		saves = st.C
	}
	for {
		select {
		case <-ctx.Done():
			if s.opts.Saved != nil {
				s.saveLast(context.WithoutCancel(ctx))
			}
			return
		case <-saves:
			s.save(ctx)
		case now := <-t.C:
			if err := s.Sample(ctx, now); err != nil {
				s.opts.Log.Error(err, "Sampling the apps' metrics")
			}
		}
	}
}

// saveLast samples the partial interval since the last sample, so that
// its requests are saved, and saves, each within its bound.
func (s *Sampler) saveLast(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, finalSampleTimeout)
	if err := s.Sample(sctx, time.Now()); err != nil {
		s.opts.Log.Error(err, "Sampling the last interval before the last save")
	}
	cancel()
	sctx, cancel = context.WithTimeout(ctx, finalSaveTimeout)
	s.save(sctx)
	cancel()
}

// read reads the apps' instances: all at once from a runtime that can
// (runtime.AppsReader: the kube driver lists the cluster's Pods once a
// round instead of twice for each app), app by app otherwise or when that
// fails.
func (s *Sampler) read(ctx context.Context, keys []Key) map[runtime.AppName]runtime.AppReading {
	names := make([]runtime.AppName, len(keys))
	for i, k := range keys {
		names[i] = runtime.AppName(k)
	}
	if r, ok := s.opts.Runtime.(runtime.AppsReader); ok {
		readings, err := r.ReadApps(ctx, names)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		s.mu.Lock()
		changed := msg != s.readAppsErr
		s.readAppsErr = msg
		s.mu.Unlock()
		if err == nil {
			return readings
		}
		if changed {
			s.opts.Log.Error(err, "Reading the apps' instances at once; reading them app by app until it works")
		}
	}
	readings := make(map[runtime.AppName]runtime.AppReading, len(names))
	usageReader, _ := s.opts.Runtime.(runtime.UsageReader)
	for _, n := range names {
		var r runtime.AppReading
		r.Status, r.StatusErr = s.opts.Runtime.Status(ctx, n.Tenant, n.App)
		if usageReader == nil {
			r.UsageErr = runtime.ErrUsageNotSupported
		} else {
			r.Usage, r.UsageErr = usageReader.Usage(ctx, n.Tenant, n.App)
		}
		readings[n] = r
	}
	return readings
}

// Sample ends the current interval at now: it reads every app's instances
// and adds a point to each app's series.
func (s *Sampler) Sample(ctx context.Context, now time.Time) error {
	keys, err := s.opts.Apps(ctx)
	listed := err == nil
	if err != nil {
		err = fmt.Errorf("listing the apps: %w", err)
		s.mu.Lock()
		for k := range s.apps {
			keys = append(keys, k)
		}
		s.mu.Unlock()
	}
	readings := s.read(ctx, keys)

	s.mu.Lock()
	defer s.mu.Unlock()
	if listed {
		for k := range s.apps {
			if _, ok := readings[runtime.AppName(k)]; !ok {
				delete(s.apps, k)
			}
		}
	}
	for _, k := range keys {
		a := s.apps[k]
		if a == nil {
			if len(s.apps) >= s.opts.MaxApps {
				continue
			}
			a = newAppState()
			s.apps[k] = a
		}
		r := readings[runtime.AppName(k)]
		p := Point{Time: now, Requests: a.cur.requests, Errors: a.cur.errors}
		if v, ok := a.cur.quantile(0.5); ok {
			p.P50Seconds = &v
		}
		if v, ok := a.cur.quantile(0.99); ok {
			p.P99Seconds = &v
		}
		a.cur = histogram{}

		restarts := map[string]int{}
		if r.StatusErr == nil {
			p.Instances = len(r.Status.Instances)
			for _, i := range r.Status.Instances {
				restarts[i.ID] = i.Restarts
				p.Restarts += max(i.Restarts-a.restarts[i.ID], 0)
			}
		}
		a.restarts = restarts

		cpu := map[string]float64{}
		a.usageNote = ""
		switch {
		case r.UsageErr == nil:
			var mem int64
			var cores float64
			measured := false
			for _, u := range r.Usage {
				mem += u.MemoryBytes
				cpu[u.ID] = u.CPUSeconds
				if prev, ok := a.cpu[u.ID]; ok && !a.lastAt.IsZero() && now.After(a.lastAt) {
					used := u.CPUSeconds - prev
					if used < 0 { // the instance restarted: its counter too
						used = u.CPUSeconds
					}
					cores += used / now.Sub(a.lastAt).Seconds()
					measured = true
				}
			}
			p.MemoryBytes = &mem
			if measured || len(r.Usage) == 0 && !a.lastAt.IsZero() {
				p.CPUCores = &cores
			}
		case errors.Is(r.UsageErr, runtime.ErrUsageNotSupported):
			a.usageNote = "CPU and memory are not measured: " + r.UsageErr.Error()
		case errors.Is(r.UsageErr, runtime.ErrNotFound):
			zero, none := 0.0, int64(0)
			p.CPUCores, p.MemoryBytes = &zero, &none
		default:
			a.usageNote = "CPU and memory could not be read: " + r.UsageErr.Error()
		}
		a.cpu, a.lastAt = cpu, now
		if a.firstSampled.IsZero() {
			a.firstSampled = now
		}

		a.points = append(a.points, p)
		a.changes++
		if len(a.points) > s.opts.Keep {
			a.points = append(a.points[:0], a.points[len(a.points)-s.opts.Keep:]...)
		}
	}
	return err
}

// Series returns the app's points of the last since (at most Retention),
// oldest first; ok is false when the sampler tracks no such app.
func (s *Sampler) Series(tenant, app string, since time.Duration, now time.Time) (Series, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[Key{tenant, app}]
	if a == nil {
		return Series{Interval: s.opts.Interval}, false
	}
	from := now.Add(-since)
	out := Series{Interval: s.opts.Interval, UsageNote: a.usageNote}
	for _, p := range a.points {
		if p.Time.After(from) {
			out.Points = append(out.Points, p)
		}
	}
	return out, true
}
