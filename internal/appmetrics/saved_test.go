package appmetrics_test

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bex.co/bex/internal/appmetrics"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newStore opens a store on a fresh database dropped after tb, and
// returns the database's URL too.
func newStore(tb testing.TB) (*store.Store, string) {
	tb.Helper()
	dbURL := pgtest.NewDatabase(tb)
	st, err := store.Open(tb.Context(), dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	return st, dbURL
}

// listed is an Apps source that answers *keys.
func listed(keys *[]appmetrics.Key) func(context.Context) ([]appmetrics.Key, error) {
	return func(context.Context) ([]appmetrics.Key, error) { return *keys, nil }
}

// utc is points with their times in UTC, for comparisons.
func utc(points []appmetrics.Point) []appmetrics.Point {
	out := make([]appmetrics.Point, len(points))
	for i, p := range points {
		p.Time = p.Time.UTC()
		out[i] = p
	}
	return out
}

// TestSavedSeries: a sampler saves its apps' points; a new one
// on the same store loads and answers them (the first point it samples
// after has no CPU reading), except points older than Retention and
// series saved at another Interval; an app no longer listed has its saved
// series deleted at the next save.
func TestSavedSeries(t *testing.T) {
	st, _ := newStore(t)
	rt := &stubRuntime{
		status: map[string]runtime.Status{
			"acme/shop": {Instances: []runtime.Instance{{ID: "1"}, {ID: "2"}}},
			"acme/blog": {Instances: []runtime.Instance{{ID: "b"}}},
		},
		usage: map[string][]runtime.Usage{
			"acme/shop": {{ID: "1", CPUSeconds: 1, MemoryBytes: 100 << 20}, {ID: "2", CPUSeconds: 2, MemoryBytes: 120 << 20}},
			"acme/blog": {{ID: "b", CPUSeconds: 3, MemoryBytes: 50 << 20}},
		},
	}
	shop, blog := appmetrics.Key{Tenant: "acme", App: "shop"}, appmetrics.Key{Tenant: "acme", App: "blog"}
	apps := []appmetrics.Key{shop, blog}
	first, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: st})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	const n = 6
	for i := range n {
		for j := range 10 * i {
			status := http.StatusOK
			if j == 0 {
				status = http.StatusBadGateway
			}
			first.Observe("acme", "shop", status, time.Duration(j+1)*time.Millisecond)
		}
		rt.usage["acme/shop"][0].CPUSeconds += float64(i)
		if err := first.Sample(t.Context(), t0.Add(time.Duration(i)*10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add((n - 1) * 10 * time.Second)
	want := map[appmetrics.Key][]appmetrics.Point{}
	for _, k := range apps {
		series, ok := first.Series(k.Tenant, k.App, time.Hour, now)
		if !ok || len(series.Points) != n {
			t.Fatalf("%v: %d points before the stop", k, len(series.Points))
		}
		want[k] = utc(series.Points)
	}
	if p := want[shop][n-1]; p.CPUCores == nil || p.P99Seconds == nil || p.Errors != 1 {
		t.Fatalf("the last point lacks a field the test means to save: %+v", p)
	}

	// (Run saves once its context ends, after a last sample:
	// TestRunSavesTheLastInterval.)
	if err := first.Save(t.Context()); err != nil {
		t.Fatal(err)
	}

	second, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Load(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	for _, k := range apps {
		series, ok := second.Series(k.Tenant, k.App, time.Hour, now)
		if !ok || !reflect.DeepEqual(utc(series.Points), want[k]) {
			t.Errorf("%v after a restart: %d points, want the %d saved", k, len(series.Points), n)
		}
	}
	if err := second.Sample(t.Context(), now.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	series, _ := second.Series("acme", "shop", time.Hour, now.Add(10*time.Second))
	if len(series.Points) != n+1 || series.Points[n].CPUCores != nil || series.Points[n].MemoryBytes == nil {
		t.Errorf("first point after a restart: %d points, the last %+v: want the saved ones, then one with memory and no CPU", len(series.Points), series.Points[len(series.Points)-1])
	}

	// An hour (Retention) and 25 s later, the three points of the last 35
	// s are left (asked for two hours: no older point was loaded).
	late := now.Add(time.Hour - 25*time.Second)
	third, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := third.Load(t.Context(), late); err != nil {
		t.Fatal(err)
	}
	if series, _ := third.Series("acme", "shop", 2*time.Hour, late); !reflect.DeepEqual(utc(series.Points), want[shop][n-3:]) {
		t.Errorf("loaded %d points an hour later, want the last 3", len(series.Points))
	}
	// Points saved every 10 s do not make a series of 5 s ones.
	fiveSeconds, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: st, Interval: 5 * time.Second, Keep: 720})
	if err != nil {
		t.Fatal(err)
	}
	if err := fiveSeconds.Load(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	if series, ok := fiveSeconds.Series("acme", "shop", time.Hour, now); ok {
		t.Errorf("a 5 s sampler loaded %d points saved every 10 s", len(series.Points))
	}

	// blog is deleted: the next sample drops it, the next save its row.
	apps = []appmetrics.Key{shop}
	if err := second.Sample(t.Context(), now.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := second.Save(t.Context()); err != nil {
		t.Fatal(err)
	}
	saved, err := st.LoadAppSeries(t.Context(), []string{"acme", "acme"}, []string{"shop", "blog"}, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(saved) != 1 || saved[0].App != "shop" {
		t.Errorf("saved after blog's deletion: %d series, want shop's only", len(saved))
	}
}

// countingStore is the store, counting the series of each save that it
// writes and those named as unchanged; answer, when set, is answered
// (once) instead of a save.
type countingStore struct {
	*store.Store
	written, unchanged int
	answer             error
}

func (c *countingStore) SaveAppSeries(ctx context.Context, all iter.Seq[store.AppSeries]) error {
	c.written, c.unchanged = 0, 0
	if err := c.answer; err != nil {
		c.answer = nil
		return err
	}
	return c.Store.SaveAppSeries(ctx, func(yield func(store.AppSeries) bool) {
		for a := range all {
			if a.Unchanged {
				c.unchanged++
			} else {
				c.written++
			}
			if !yield(a) {
				return
			}
		}
	})
}

// loaded is the points of k that a new sampler on st loads at now.
func loaded(t *testing.T, st *store.Store, k appmetrics.Key, now time.Time) []appmetrics.Point {
	t.Helper()
	keys := []appmetrics.Key{k}
	s, err := appmetrics.New(appmetrics.Options{Apps: listed(&keys), Runtime: &stubRuntime{}, Saved: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Series(k.Tenant, k.App, time.Hour, now)
	return got.Points
}

// TestSaveAppendsNewPoints: once an app's series is saved, a save appends
// a chunk of its points since the last save only, leaving the chunks
// saved before as they were, and deletes the chunks older than the points
// the sampler keeps; a new sampler loads the whole series, in order.
func TestSaveAppendsNewPoints(t *testing.T) {
	st, dbURL := newStore(t)
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rt := &stubRuntime{status: map[string]runtime.Status{"acme/shop": {}, "acme/blog": {}}}
	shop := appmetrics.Key{Tenant: "acme", App: "shop"}
	apps := []appmetrics.Key{shop, {Tenant: "acme", App: "blog"}}
	s, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: st, Keep: 6})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * appmetrics.DefaultInterval) }
	sampleAndSave := func(from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			if err := s.Sample(t.Context(), at(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Save(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// chunks is shop's saved chunks: each one's count of points (the
	// encoding's second byte) and the transaction that wrote it.
	type chunk struct {
		points int
		xmin   string
	}
	chunks := func() []chunk {
		t.Helper()
		rows, err := conn.Query(t.Context(), "SELECT get_byte(points, 1), xmin::text FROM app_series_chunks "+
			"WHERE tenant = 'acme' AND app = 'shop' ORDER BY last_at")
		if err != nil {
			t.Fatal(err)
		}
		var out []chunk
		var c chunk
		if _, err := pgx.ForEachRow(rows, []any{&c.points, &c.xmin}, func() error { out = append(out, c); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}

	sampleAndSave(0, 1)
	first := chunks()
	sampleAndSave(2, 2)
	got := chunks()
	if len(first) != 1 || first[0].points != 2 || len(got) != 2 || got[0] != first[0] || got[1].points != 1 {
		t.Fatalf("shop's chunks after a save of 2 points, then one of a new point: %+v, then %+v; want [2 points], then the same and [1 point]", first, got)
	}
	sampleAndSave(3, 4)
	if got := chunks(); len(got) != 3 || got[2].points != 2 {
		t.Errorf("shop's chunks after 2 new points: %+v, want a third of 2 points", got)
	}
	if got := loaded(t, st, shop, at(5)); len(got) != 5 || !got[0].Time.Equal(at(0)) || !got[4].Time.Equal(at(4)) {
		t.Errorf("loaded %d points after three saves, want the 5 saved, oldest first: %+v", len(got), got)
	}

	// The sampler keeps 6 points: from 3 on, after point 8; the chunks of
	// points 0-1 and 2 end before them.
	sampleAndSave(5, 8)
	if got := chunks(); len(got) != 2 || got[0].points != 2 || got[1].points != 4 {
		t.Errorf("shop's chunks after points 5 to 8, keeping 6: %+v, want those of points 3-4 and 5-8", got)
	}
	if got := loaded(t, st, shop, at(9)); len(got) != 6 || !got[0].Time.Equal(at(3)) {
		t.Errorf("loaded %d points after keeping 6, want points 3 to 8: %+v", len(got), got)
	}
}

// TestSaveWritesChangedApps: a save writes the apps whose points changed
// since the last save that succeeded and names the others as unchanged,
// whose rows stay; after a failed save, or a store that answered
// ErrNotSaved, every app is written again; an app no longer listed has its
// row deleted.
func TestSaveWritesChangedApps(t *testing.T) {
	st, _ := newStore(t)
	saved := &countingStore{Store: st}
	rt := &stubRuntime{status: map[string]runtime.Status{"acme/shop": {}, "acme/blog": {}}}
	shop, blog := appmetrics.Key{Tenant: "acme", App: "shop"}, appmetrics.Key{Tenant: "acme", App: "blog"}
	apps := []appmetrics.Key{shop, blog}
	s, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: saved})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	sample := func(i int) {
		t.Helper()
		if err := s.Sample(t.Context(), t0.Add(time.Duration(i)*appmetrics.DefaultInterval)); err != nil {
			t.Fatal(err)
		}
	}
	save := func(ctx context.Context, written, unchanged int) {
		t.Helper()
		err := s.Save(ctx)
		if ctx.Err() == nil && err != nil {
			t.Fatal(err)
		}
		if saved.written != written || saved.unchanged != unchanged {
			t.Errorf("save wrote %d series and named %d unchanged, want %d and %d", saved.written, saved.unchanged, written, unchanged)
		}
	}
	points := func(k appmetrics.Key) int {
		t.Helper()
		return len(loaded(t, st, k, t0.Add(10*time.Minute)))
	}

	sample(0)
	save(t.Context(), 2, 0)
	save(t.Context(), 0, 2)
	if points(shop) != 1 || points(blog) != 1 {
		t.Errorf("after a save of unchanged apps: %d and %d points saved, want 1 each", points(shop), points(blog))
	}

	sample(1)
	failed, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Save(failed); err == nil {
		t.Fatal("a save on a cancelled context succeeded")
	}
	save(t.Context(), 2, 0) // the failed save's apps, again
	if points(shop) != 2 {
		t.Errorf("after the save that followed a failed one: %d points of shop saved, want 2", points(shop))
	}

	// ErrNotSaved is no failure, and the save tries again at once with
	// every app.
	saved.answer = appmetrics.ErrNotSaved
	save(t.Context(), 2, 0)

	apps = []appmetrics.Key{shop}
	sample(2)
	save(t.Context(), 1, 0)
	if points(shop) != 3 || points(blog) != 0 {
		t.Errorf("after blog's deletion: %d and %d points saved, want 3 of shop, none of blog", points(shop), points(blog))
	}
}

// TestRunSavesTheLastInterval: when Run stops, the requests observed since
// its last sample are in the saved series: it samples the partial
// interval before its last save.
func TestRunSavesTheLastInterval(t *testing.T) {
	st, _ := newStore(t)
	rt := &stubRuntime{status: map[string]runtime.Status{"acme/shop": {Instances: []runtime.Instance{{ID: "1"}}}}}
	apps := []appmetrics.Key{{Tenant: "acme", App: "shop"}}
	s, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sample(t.Context(), time.Now().Add(-5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		s.Observe("acme", "shop", http.StatusOK, 3*time.Millisecond)
	}
	s.Observe("acme", "shop", http.StatusServiceUnavailable, time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s.Run(ctx)

	next, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: st})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := next.Load(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	series, _ := next.Series("acme", "shop", time.Hour, now)
	var requests, errs uint64
	for _, p := range series.Points {
		requests, errs = requests+p.Requests, errs+p.Errors
	}
	if len(series.Points) != 2 || requests != 8 || errs != 1 || series.Points[1].P99Seconds == nil || series.Points[1].Instances != 1 {
		t.Errorf("saved after the stop: %d points, %d requests, %d errors (%+v); want 2 points, the last with the 8 requests, 1 error, a p99 and 1 instance",
			len(series.Points), requests, errs, series.Points)
	}
}

// TestTakeOverMergesSavedPoints: a replica that started while another
// saved (a rolling update) loaded the points of then; when it takes over
// the saves (ErrTookOver), the points the other saved since, up to its
// own first sample, are merged before its own, in its series and in what
// it saves, instead of a gap.
func TestTakeOverMergesSavedPoints(t *testing.T) {
	st, _ := newStore(t)
	rt := &stubRuntime{status: map[string]runtime.Status{"acme/shop": {Instances: []runtime.Instance{{ID: "1"}}}}}
	apps := []appmetrics.Key{{Tenant: "acme", App: "shop"}}
	old, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: st})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * appmetrics.DefaultInterval) }
	sampleSave := func(s *appmetrics.Sampler, from, to int, requests int) {
		t.Helper()
		for i := from; i < to; i++ {
			for range requests {
				s.Observe("acme", "shop", http.StatusOK, time.Millisecond)
			}
			if err := s.Sample(t.Context(), at(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Save(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The old holder saves points 0 to 2; the new replica starts and
	// loads them; the old one saves 3 to 5 and stops.
	sampleSave(old, 0, 3, 1)
	saved := &countingStore{Store: st}
	next, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: saved})
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Load(t.Context(), at(2)); err != nil {
		t.Fatal(err)
	}
	sampleSave(old, 3, 6, 1)
	// The new one samples from 4 on (its own instants, 2 s later) with
	// 2 requests each, and takes over.
	for i := 4; i < 8; i++ {
		for range 2 {
			next.Observe("acme", "shop", http.StatusOK, time.Millisecond)
		}
		if err := next.Sample(t.Context(), at(i).Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	saved.answer = appmetrics.ErrTookOver
	if err := next.Save(t.Context()); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 8 {
		switch {
		case i < 4:
			want = append(want, fmt.Sprintf("%s 1", at(i).UTC().Format(time.TimeOnly)))
		default:
			want = append(want, fmt.Sprintf("%s 2", at(i).Add(2*time.Second).UTC().Format(time.TimeOnly)))
		}
	}
	show := func(points []appmetrics.Point) []string {
		var out []string
		for _, p := range points {
			out = append(out, fmt.Sprintf("%s %d", p.Time.UTC().Format(time.TimeOnly), p.Requests))
		}
		return out
	}
	series, _ := next.Series("acme", "shop", time.Hour, at(8))
	if got := show(series.Points); !reflect.DeepEqual(got, want) {
		t.Errorf("series after the takeover (time, requests) = %v, want %v: the old holder's up to the new one's first sample, then the new one's", got, want)
	}
	third, err := appmetrics.New(appmetrics.Options{Apps: listed(&apps), Runtime: rt, Saved: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := third.Load(t.Context(), at(8)); err != nil {
		t.Fatal(err)
	}
	series, _ = third.Series("acme", "shop", time.Hour, at(8))
	if got := show(series.Points); !reflect.DeepEqual(got, want) {
		t.Errorf("saved after the takeover (time, requests) = %v, want %v", got, want)
	}
}

// BenchmarkSave10000Apps measures one save of 10,000 apps of 360 points
// each (an hour at the defaults) into Postgres, each app with a new point
// since the save before (as every app has in a running sampler: after a
// first, untimed, save of every series whole, each save appends that
// point), and reports the bytes one app's chunks take.
func BenchmarkSave10000Apps(b *testing.B) {
	st, dbURL := newStore(b)
	const apps = 10000
	keys := make([]appmetrics.Key, apps)
	rt := &stubRuntime{status: map[string]runtime.Status{}, usage: map[string][]runtime.Usage{}}
	for i := range keys {
		keys[i] = appmetrics.Key{Tenant: fmt.Sprintf("tenant%d", i%500), App: fmt.Sprintf("app%d", i)}
		rt.status[keys[i].Tenant+"/"+keys[i].App] = runtime.Status{Instances: []runtime.Instance{{ID: "1"}, {ID: "2"}}}
	}
	s, err := appmetrics.New(appmetrics.Options{Apps: listed(&keys), Runtime: rt, Saved: st})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour)
	for i := range appmetrics.DefaultKeep {
		for j, k := range keys {
			name := k.Tenant + "/" + k.App
			rt.usage[name] = []runtime.Usage{
				{ID: "1", CPUSeconds: float64(i) * 0.37 * float64(j%7), MemoryBytes: int64(100<<20 + (i*j)%(1<<20))},
				{ID: "2", CPUSeconds: float64(i) * 0.11 * float64(j%5), MemoryBytes: int64(80<<20 + (i*j*3)%(1<<20))},
			}
			for r := range (i + j) % 5 {
				s.Observe(k.Tenant, k.App, http.StatusOK, time.Duration(r*i+1)*time.Millisecond)
			}
		}
		// Times off by up to 3 ms, as a ticker's.
		if err := s.Sample(b.Context(), t0.Add(time.Duration(i)*appmetrics.DefaultInterval+time.Duration(i%4)*time.Millisecond)); err != nil {
			b.Fatal(err)
		}
	}
	// The first save writes every series whole; those timed append.
	if err := s.Save(b.Context()); err != nil {
		b.Fatal(err)
	}
	next := appmetrics.DefaultKeep
	for b.Loop() {
		// As between two saves of a running sampler, every app gets a
		// new point (untimed), so that each save writes every app.
		b.StopTimer()
		if err := s.Sample(b.Context(), t0.Add(time.Duration(next)*appmetrics.DefaultInterval)); err != nil {
			b.Fatal(err)
		}
		next++
		b.StartTimer()
		if err := s.Save(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	ms := float64(b.Elapsed().Milliseconds()) / float64(b.N)
	conn, err := pgx.Connect(b.Context(), dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(b.Context())
	var rows, encoded, stored float64
	if err := conn.QueryRow(b.Context(), "SELECT (SELECT count(*) FROM app_series), sum(octet_length(points)) / count(DISTINCT (tenant, app)), "+
		"sum(pg_column_size(points)) / count(DISTINCT (tenant, app)) FROM app_series_chunks").Scan(&rows, &encoded, &stored); err != nil {
		b.Fatal(err)
	}
	if rows != apps {
		b.Fatalf("%v rows saved, want %d", rows, apps)
	}
	b.ReportMetric(ms, "ms/save")
	b.ReportMetric(encoded, "bytes/app")
	b.ReportMetric(stored, "stored-bytes/app")
	b.Logf("one save of %d apps × %d points: %.0f ms; per app %.0f bytes of points, %.0f as Postgres stores them",
		apps, appmetrics.DefaultKeep, ms, encoded, stored)
}
