package appmetrics

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"bex.co/bex/internal/store"
)

// SeriesStore keeps the apps' series across restarts of the platform;
// internal/store.Store is one, in Postgres. The points it holds are
// opaque to it (the sampler's encoding, see encodePoints).
type SeriesStore interface {
	// SaveAppSeries makes the saved series exactly all: each one replaces
	// its app's, an Append one adds its points after the app's saved ones
	// (and drops those before its From), an Unchanged one keeps it, and an
	// app not in all has its saved series deleted. A save that fails leaves the previous one
	// whole. It reads all once and is done with a series' Points before it
	// asks for the next, so the sampler encodes every app's points into
	// one buffer. The sampler's saves never overlap, and it is the store's
	// only writer while it saves. A store that another process writes,
	// as well as this one at times, answers ErrNotSaved when it wrote
	// nothing (another process saves): the sampler then writes every app
	// at its next save; and ErrTookOver, writing nothing, the first time
	// it is to write after another may have: the sampler then merges what
	// LoadAppSeries answers into its points and saves again at once,
	// every app.
	SaveAppSeries(ctx context.Context, all iter.Seq[store.AppSeries]) error
	// LoadAppSeries returns the saved series of the apps named by tenants
	// and apps (pairs) whose last point is after since: the Points of what
	// was saved whole and appended since, one after the other (some may be
	// before since). An app without one is absent from the result, not an
	// error.
	LoadAppSeries(ctx context.Context, tenants, apps []string, since time.Time) ([]store.AppSeries, error)
}

var _ SeriesStore = (*store.Store)(nil)

// ErrNotSaved is what a SeriesStore answers when it did not save and the
// sampler's next save is to write every app's points: it is no failure
// of the sampler's (Save returns nil), and the rows it holds may be
// another process's.
var ErrNotSaved = errors.New("the series are saved by another process")

// ErrTookOver is what a SeriesStore answers, without saving, when this
// sampler is to save from now on where another process saved before:
// the saved points are that process's, and Save merges them into its
// own (the saved ones up to the interval of its first sample, its own
// from then on) before it writes every app.
var ErrTookOver = errors.New("the series were saved by another process until now")

// finalSaveTimeout bounds the save Run makes once its context ends;
// finalSampleTimeout the sample of the last, partial, interval before it.
const (
	finalSaveTimeout   = 30 * time.Second
	finalSampleTimeout = 10 * time.Second
)

// Load reads the saved series of the apps the Apps source lists, for the
// points of the last Retention before now, as Run's first sample's
// predecessors: call it once, before Run. A series saved at another
// Interval than the sampler's is dropped (its points would not be one
// interval apart), and so is one that does not decode; an app that has
// points already keeps them. CPU counters are not saved: an app's first
// point after a load has no CPU reading, as a new app's first point.
// Without Options.Saved it does nothing.
func (s *Sampler) Load(ctx context.Context, now time.Time) error {
	if s.opts.Saved == nil {
		return nil
	}
	keys, err := s.opts.Apps(ctx)
	if err != nil {
		return fmt.Errorf("listing the apps: %w", err)
	}
	tenants, apps := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		tenants[i], apps[i] = k.Tenant, k.App
	}
	since := now.Add(-s.Retention())
	saved, err := s.opts.Saved.LoadAppSeries(ctx, tenants, apps, since)
	if err != nil {
		return fmt.Errorf("loading the saved series: %w", err)
	}
	loaded, dropped := 0, 0
	for _, sv := range saved {
		if sv.Interval != s.opts.Interval {
			dropped++
			continue
		}
		points, err := decodePoints(sv.Points, s.opts.Interval)
		if err != nil {
			s.opts.Log.Error(err, "Dropping a saved series", "tenant", sv.Tenant, "app", sv.App)
			dropped++
			continue
		}
		first := len(points)
		for i, p := range points {
			if p.Time.After(since) {
				first = i
				break
			}
		}
		points = points[max(first, len(points)-s.opts.Keep):]
		if len(points) == 0 {
			continue
		}
		if s.loadApp(Key{sv.Tenant, sv.App}, points) {
			loaded++
		}
	}
	s.opts.Log.Info("Loaded the saved series", "apps", loaded, "dropped", dropped, "interval", s.opts.Interval)
	return nil
}

// loadApp gives the app points unless it has some, or the sampler tracks
// MaxApps apps.
func (s *Sampler) loadApp(k Key, points []Point) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[k]
	if a == nil {
		if len(s.apps) >= s.opts.MaxApps {
			return false
		}
		a = newAppState()
		s.apps[k] = a
	}
	if len(a.points) > 0 {
		return false
	}
	a.points = points
	a.changes++
	// The next save writes the series whole.
	a.savedLast, a.chunks, a.chunkBytes = time.Time{}, 0, 0
	return true
}

// Save writes to Options.Saved, in one call, the series of the apps whose
// points changed since the last save that succeeded (an app whose save
// failed is written again the next time), names the others as
// unchanged, and deletes the saved series of apps the sampler no longer
// tracks. Run saves every SaveInterval and once more when it stops.
// Without Options.Saved it does nothing. An app saved before gets only
// its points since its last saved one appended (store.AppSeries.Append),
// dropping the saved points older than its own; it is written whole when
// it was never saved (or loaded, merged, or refused since), and after
// store.MaxAppSeriesChunks appends. The apps' points are encoded one
// app at a time, as the store asks for them, into one buffer: a save
// allocates about that buffer, not the encoded size of every app. When
// the store answers ErrNotSaved, every app is written at the next save,
// at once when some had been saved; when it answers ErrTookOver, the
// saved points are merged into the sampler's and every app is written at
// once.
func (s *Sampler) Save(ctx context.Context) error {
	if s.opts.Saved == nil {
		return nil
	}
	forgot, err := s.saveOnce(ctx)
	var merged error
	switch {
	case errors.Is(err, ErrTookOver):
		// A merge that fails leaves this sampler's points to replace
		// the saved ones.
		merged = s.merge(ctx, time.Now())
		_, err = s.saveOnce(ctx)
	case errors.Is(err, ErrNotSaved) && forgot:
		// Every app is to be written now.
		_, err = s.saveOnce(ctx)
	}
	if errors.Is(err, ErrNotSaved) || errors.Is(err, ErrTookOver) {
		err = nil
	}
	return errors.Join(merged, err)
}

// merge puts the saved points of the apps the sampler tracks, of the last
// Retention before now, into their series: those up to the start of the
// interval of the app's first sample here, then the sampler's own from
// it on, the last Keep of them. An app without saved points keeps its
// own.
func (s *Sampler) merge(ctx context.Context, now time.Time) error {
	s.mu.Lock()
	tenants, apps := make([]string, 0, len(s.apps)), make([]string, 0, len(s.apps))
	for k := range s.apps {
		tenants, apps = append(tenants, k.Tenant), append(apps, k.App)
	}
	s.mu.Unlock()
	since := now.Add(-s.Retention())
	saved, err := s.opts.Saved.LoadAppSeries(ctx, tenants, apps, since)
	if err != nil {
		return fmt.Errorf("merging the series saved by another process: %w", err)
	}
	for _, sv := range saved {
		if sv.Interval != s.opts.Interval {
			continue
		}
		points, err := decodePoints(sv.Points, s.opts.Interval)
		if err != nil {
			s.opts.Log.Error(err, "Not merging a saved series", "tenant", sv.Tenant, "app", sv.App)
			continue
		}
		s.mergeApp(Key{sv.Tenant, sv.App}, points, since)
	}
	return nil
}

// mergeApp puts theirs, saved by another process, into k's series.
func (s *Sampler) mergeApp(k Key, theirs []Point, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[k]
	if a == nil {
		return
	}
	merged := make([]Point, 0, len(theirs)+len(a.points))
	for _, p := range theirs {
		// Theirs end where the interval of the first sample here starts:
		// none counts requests this sampler counted too.
		if p.Time.After(since) && (a.firstSampled.IsZero() || !p.Time.Add(s.opts.Interval).After(a.firstSampled)) {
			merged = append(merged, p)
		}
	}
	for _, p := range a.points {
		if !a.firstSampled.IsZero() && !p.Time.Before(a.firstSampled) {
			merged = append(merged, p)
		}
	}
	a.points = merged[max(len(merged)-s.opts.Keep, 0):]
	a.changes++
	a.savedLast, a.chunks, a.chunkBytes = time.Time{}, 0, 0
}

// saveOnce is one call to Options.Saved. On ErrNotSaved and ErrTookOver
// it forgets which apps were saved, and answers whether it forgot any.
func (s *Sampler) saveOnce(ctx context.Context) (forgot bool, err error) {
	s.mu.Lock()
	keys := make([]Key, 0, len(s.apps))
	for k := range s.apps {
		keys = append(keys, k)
	}
	s.saves++
	save := s.saves
	s.mu.Unlock()
	var buf []byte
	all := func(yield func(store.AppSeries) bool) {
		for _, k := range keys {
			// One app at a time: Observe waits for one app's encoding at most.
			s.mu.Lock()
			a := s.apps[k]
			var sv store.AppSeries
			named := a != nil && len(a.points) > 0
			switch {
			case !named:
			case a.saved == a.changes:
				sv = store.AppSeries{Tenant: k.Tenant, App: k.App, Unchanged: true}
			default:
				buf, sv = s.encodeApp(buf[:0], k, a)
				a.sending, a.sendingIn = a.changes, save
				a.sendingLast, a.sendingWhole, a.sendingBytes = sv.LastAt, !sv.Append, len(buf)
			}
			s.mu.Unlock()
			if named && !yield(sv) {
				return
			}
		}
	}
	err = s.opts.Saved.SaveAppSeries(ctx, all)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.apps {
		switch {
		case errors.Is(err, ErrNotSaved) || errors.Is(err, ErrTookOver) || errors.Is(err, store.ErrInvalid):
			// A refused save says nothing of which app: every one is
			// written whole next.
			forgot = forgot || a.saved != 0
			a.saved = 0
			a.savedLast, a.chunks, a.chunkBytes = time.Time{}, 0, 0
		case err == nil && a.sendingIn == save:
			a.saved, a.savedLast = a.sending, a.sendingLast
			if a.sendingWhole {
				a.chunks, a.chunkBytes = 0, 0
			}
			a.chunks++
			a.chunkBytes += a.sendingBytes
		}
	}
	return forgot, err
}

// encodeApp encodes into b the points of a (which has some) to save: those
// after its last saved point, to append, or, when it has no saved point,
// none after it, or the append would take it over the store's bounds, all
// of them, whole.
func (s *Sampler) encodeApp(b []byte, k Key, a *appState) ([]byte, store.AppSeries) {
	sv := store.AppSeries{Tenant: k.Tenant, App: k.App, Interval: s.opts.Interval, LastAt: a.points[len(a.points)-1].Time}
	if !a.savedLast.IsZero() && a.chunks < store.MaxAppSeriesChunks {
		// The new points are the last few.
		i := len(a.points)
		for i > 0 && a.points[i-1].Time.After(a.savedLast) {
			i--
		}
		if i < len(a.points) {
			b = encodePoints(b, a.points[i:], s.opts.Interval)
			if a.chunkBytes+len(b) <= store.MaxAppSeriesBytes {
				sv.Append, sv.FirstAt, sv.From, sv.Points = true, a.points[i].Time, a.points[0].Time, b
				return b, sv
			}
		}
	}
	b = encodePoints(b[:0], a.points, s.opts.Interval)
	sv.FirstAt, sv.Points = a.points[0].Time, b
	return b, sv
}

// save is Save for Run: it logs what fails.
func (s *Sampler) save(ctx context.Context) {
	if err := s.Save(ctx); err != nil {
		s.opts.Log.Error(err, "Saving the apps' series")
	}
}

// The saved encoding of an app's points, version 1: the version byte, the
// number of points (uvarint), then each point:
//
//   - its time in Unix milliseconds (varint) for the first point; for the
//     others, how far it is from one Interval after the point before, in
//     milliseconds (varint): mostly 0, one byte;
//   - a byte of flags saying which of CPUCores, MemoryBytes, P50Seconds and
//     P99Seconds are there;
//   - Instances and Restarts (varint), Requests and Errors (uvarint);
//   - CPUCores as 8 bytes (IEEE 754, little-endian), MemoryBytes (varint);
//   - P50Seconds and P99Seconds each as the index of the histogram bucket
//     whose upper bound they are (one byte), or 0xff and 8 bytes.
//
// Times keep their milliseconds only. An hour of 10 s points takes about
// 8 KiB per app.
const encodingVersion = 1

// Flags of a point, and the latency byte that says 8 bytes follow.
const (
	flagCPU = 1 << iota
	flagMemory
	flagP50
	flagP99

	rawLatency = 0xff
)

// encodePoints appends the saved encoding of points, interval apart, to b.
func encodePoints(b []byte, points []Point, interval time.Duration) []byte {
	b = slices.Grow(b, 2+len(points)*24)
	b = append(b, encodingVersion)
	b = binary.AppendUvarint(b, uint64(len(points)))
	var prev int64
	for i, p := range points {
		ms := p.Time.UnixMilli()
		if i == 0 {
			b = binary.AppendVarint(b, ms)
		} else {
			b = binary.AppendVarint(b, ms-prev-interval.Milliseconds())
		}
		prev = ms
		var flags byte
		if p.CPUCores != nil {
			flags |= flagCPU
		}
		if p.MemoryBytes != nil {
			flags |= flagMemory
		}
		if p.P50Seconds != nil {
			flags |= flagP50
		}
		if p.P99Seconds != nil {
			flags |= flagP99
		}
		b = append(b, flags)
		b = binary.AppendVarint(b, int64(p.Instances))
		b = binary.AppendVarint(b, int64(p.Restarts))
		b = binary.AppendUvarint(b, p.Requests)
		b = binary.AppendUvarint(b, p.Errors)
		if p.CPUCores != nil {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(*p.CPUCores))
		}
		if p.MemoryBytes != nil {
			b = binary.AppendVarint(b, *p.MemoryBytes)
		}
		if p.P50Seconds != nil {
			b = appendLatency(b, *p.P50Seconds)
		}
		if p.P99Seconds != nil {
			b = appendLatency(b, *p.P99Seconds)
		}
	}
	return b
}

// appendLatency appends v as its bucket's index when it is a bucket's
// upper bound (as every quantile is), else raw.
func appendLatency(b []byte, v float64) []byte {
	if i, ok := slices.BinarySearch(bucketUppers[:], v); ok {
		return append(b, byte(i))
	}
	b = append(b, rawLatency)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

var errEncoding = errors.New("malformed saved series")

// decodePoints reads what encodePoints wrote with the same interval, or
// several of those one after the other (a series saved whole, then the
// points appended to it, each after the last one saved: the store
// refuses others). Points are read as they were sampled, even a wall
// clock's step back, as before chunks.
func decodePoints(b []byte, interval time.Duration) ([]Point, error) {
	var points []Point
	for len(b) > 0 {
		var err error
		if points, b, err = decodeChunk(points, b, interval); err != nil {
			return nil, err
		}
	}
	return points, nil
}

// decodeChunk appends to points those of the first encoding in b, and
// returns what follows it.
func decodeChunk(points []Point, b []byte, interval time.Duration) ([]Point, []byte, error) {
	d := decoder{b: b}
	if v := d.byte(); v != encodingVersion {
		return nil, nil, fmt.Errorf("%w: version %d", errEncoding, v)
	}
	n := d.uvarint()
	if d.err != nil || n > uint64(len(b)) { // every point takes several bytes
		return nil, nil, fmt.Errorf("%w: %d points in %d bytes", errEncoding, n, len(b))
	}
	points = slices.Grow(points, int(n))
	var prev int64
	for i := range n {
		var p Point
		ms := d.varint()
		if i > 0 {
			ms += prev + interval.Milliseconds()
		}
		prev = ms
		p.Time = time.UnixMilli(ms)
		flags := d.byte()
		p.Instances, p.Restarts = int(d.varint()), int(d.varint())
		p.Requests, p.Errors = d.uvarint(), d.uvarint()
		if flags&flagCPU != 0 {
			v := d.float()
			p.CPUCores = &v
		}
		if flags&flagMemory != 0 {
			v := d.varint()
			p.MemoryBytes = &v
		}
		if flags&flagP50 != 0 {
			v := d.latency()
			p.P50Seconds = &v
		}
		if flags&flagP99 != 0 {
			v := d.latency()
			p.P99Seconds = &v
		}
		if d.err != nil {
			return nil, nil, fmt.Errorf("%w: point %d: %w", errEncoding, i, d.err)
		}
		points = append(points, p)
	}
	return points, d.b, nil
}

// decoder reads b; its first error sticks and makes every read answer 0.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("ends early")

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) < 1 {
		d.err = errShort
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if d.err != nil || n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if d.err != nil || n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) float() float64 {
	if d.err != nil || len(d.b) < 8 {
		d.err = errShort
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func (d *decoder) latency() float64 {
	i := d.byte()
	switch {
	case i == rawLatency:
		return d.float()
	case int(i) < bucketCount:
		return upper(int(i))
	default:
		if d.err == nil {
			d.err = fmt.Errorf("latency bucket %d", i)
		}
		return 0
	}
}
