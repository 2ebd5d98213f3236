package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bex.co/bex/internal/store"
)

// TestAppSeries: a save replaces each app's row and deletes the rows of
// apps it does not name; a load answers the named apps whose last point
// is after since, and nothing for the others.
func TestAppSeries(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	err := s.SaveAppSeries(ctx, slices.Values([]store.AppSeries{
		{Tenant: "acme", App: "shop", Interval: 10 * time.Second, LastAt: t0, Points: []byte("shop 1")},
		{Tenant: "acme", App: "blog", Interval: 10 * time.Second, LastAt: t0.Add(-time.Hour), Points: []byte("blog 1")},
		{Tenant: "other", App: "shop", Interval: 5 * time.Second, LastAt: t0, Points: []byte("other 1")},
	}))
	if err != nil {
		t.Fatal(err)
	}
	load := func(since time.Time, keys ...string) map[string]store.AppSeries {
		t.Helper()
		var tenants, apps []string
		for i := 0; i < len(keys); i += 2 {
			tenants, apps = append(tenants, keys[i]), append(apps, keys[i+1])
		}
		got, err := s.LoadAppSeries(ctx, tenants, apps, since)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]store.AppSeries{}
		for _, a := range got {
			m[a.Tenant+"/"+a.App] = a
		}
		return m
	}
	got := load(t0.Add(-2*time.Hour), "acme", "shop", "acme", "blog", "acme", "ghost")
	if len(got) != 2 || string(got["acme/shop"].Points) != "shop 1" || got["acme/shop"].Interval != 10*time.Second ||
		!got["acme/shop"].LastAt.Equal(t0) || string(got["acme/blog"].Points) != "blog 1" {
		t.Errorf("load: %+v", got)
	}
	if got := load(t0.Add(-30*time.Minute), "acme", "shop", "acme", "blog", "other", "shop"); len(got) != 2 || got["acme/blog"].Points != nil ||
		got["other/shop"].Interval != 5*time.Second {
		t.Errorf("load since 30 min: %+v, want acme/shop and other/shop (acme/blog's last point is an hour old)", got)
	}

	// The next save names acme/shop only.
	if err := s.SaveAppSeries(ctx, slices.Values([]store.AppSeries{{Tenant: "acme", App: "shop", Interval: 10 * time.Second, LastAt: t0.Add(time.Minute), Points: []byte("shop 2")}})); err != nil {
		t.Fatal(err)
	}
	got = load(t0.Add(-2*time.Hour), "acme", "shop", "acme", "blog", "other", "shop")
	if len(got) != 1 || string(got["acme/shop"].Points) != "shop 2" || !got["acme/shop"].LastAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("after a save of acme/shop only: %+v", got)
	}

	// A refused series, after a good one, refuses the whole save: the
	// previous save stays whole.
	for _, bad := range []store.AppSeries{
		{Tenant: "acme", Interval: time.Second, Points: []byte("x")},
		{Tenant: "acme", App: "shop", Points: []byte("x")},
		{Tenant: "acme", App: "shop", Interval: time.Second, Points: make([]byte, store.MaxAppSeriesBytes+1)},
	} {
		good := store.AppSeries{Tenant: "acme", App: "blog", Interval: 10 * time.Second, LastAt: t0, Points: []byte("blog 2")}
		if err := s.SaveAppSeries(ctx, slices.Values([]store.AppSeries{good, bad})); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("SaveAppSeries(%s/%s, %s, %d bytes) = %v, want ErrInvalid", bad.Tenant, bad.App, bad.Interval, len(bad.Points), err)
		}
	}
	got = load(t0.Add(-2*time.Hour), "acme", "shop", "acme", "blog")
	if len(got) != 1 || string(got["acme/shop"].Points) != "shop 2" {
		t.Errorf("after the refused saves: %+v, want acme/shop's shop 2 only", got)
	}

	// The series may come from one buffer, rewritten for each: each row
	// has its own points.
	buf := make([]byte, 0, 16)
	err = s.SaveAppSeries(ctx, func(yield func(store.AppSeries) bool) {
		for _, app := range []string{"a1", "a2", "a3"} {
			buf = append(buf[:0], "points of "+app...)
			if !yield(store.AppSeries{Tenant: "reuse", App: app, Interval: time.Second, LastAt: t0, Points: buf}) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	got = load(t0.Add(-2*time.Hour), "reuse", "a1", "reuse", "a2", "reuse", "a3", "acme", "shop")
	if len(got) != 3 || string(got["reuse/a1"].Points) != "points of a1" || string(got["reuse/a3"].Points) != "points of a3" {
		t.Errorf("after a save from one buffer: %+v, want reuse/a1 to a3 with their own points", got)
	}

	if err := s.SaveAppSeries(ctx, slices.Values([]store.AppSeries(nil))); err != nil {
		t.Fatal(err)
	}
	if got := load(t0.Add(-2*time.Hour), "acme", "shop", "reuse", "a1"); len(got) != 0 {
		t.Errorf("after an empty save: %+v", got)
	}
}

// newStoreConn opens a store on a fresh database, and a connection of
// its own to the database, for what the store does not answer.
func newStoreConn(tb testing.TB) (*store.Store, *pgx.Conn) {
	tb.Helper()
	s, dbURL := newStoreURL(tb)
	conn, err := pgx.Connect(tb.Context(), dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return s, conn
}

// TestAppSeriesTenThousand: a save of 10,000 whole series is one
// transaction whose one insert writes every app's chunk (every chunk has
// the same xmin and the same command ID), and so is the next one, which
// rewrites 9,999 series and deletes the one it does not name.
func TestAppSeriesTenThousand(t *testing.T) {
	s, conn := newStoreConn(t)
	ctx := t.Context()

	const apps = 10000
	points := bytes.Repeat([]byte{7}, 8<<10)
	all := make([]store.AppSeries, apps)
	for i := range all {
		all[i] = store.AppSeries{Tenant: fmt.Sprintf("t%d", i%100), App: fmt.Sprintf("app%d", i), Interval: 10 * time.Second, LastAt: time.Now(), Points: points}
	}
	check := func(want int) {
		t.Helper()
		var rows, xmins, cmins, size int
		err := conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT xmin::text), count(DISTINCT cmin::text), COALESCE(max(octet_length(points)), 0) FROM app_series_chunks").
			Scan(&rows, &xmins, &cmins, &size)
		if err != nil {
			t.Fatal(err)
		}
		if rows != want || xmins != 1 || cmins != 1 || size != len(points) {
			t.Errorf("%d rows by %d transactions and %d statements, %d bytes per row: want %d rows by 1 transaction and 1 statement, %d bytes",
				rows, xmins, cmins, size, want, len(points))
		}
	}
	if err := s.SaveAppSeries(ctx, slices.Values(all)); err != nil {
		t.Fatal(err)
	}
	check(apps)
	if err := s.SaveAppSeries(ctx, slices.Values(all[1:])); err != nil {
		t.Fatal(err)
	}
	check(apps - 1)
}

// TestAppSeriesUnchanged: an unchanged series keeps its app's row as it
// was saved, neither rewritten nor deleted; one of an app without a row
// makes none; the rows of apps not named are still deleted.
func TestAppSeriesUnchanged(t *testing.T) {
	s, conn := newStoreConn(t)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	series := func(app, points string) store.AppSeries {
		return store.AppSeries{Tenant: "acme", App: app, Interval: 10 * time.Second, LastAt: t0, Points: []byte(points)}
	}
	if err := s.SaveAppSeries(ctx, slices.Values([]store.AppSeries{series("shop", "shop 1"), series("blog", "blog 1"), series("wiki", "wiki 1")})); err != nil {
		t.Fatal(err)
	}
	// xmin is the transaction that wrote the row.
	xmins := func() map[string]string {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT app, xmin::text FROM app_series")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		var app, xmin string
		if _, err := pgx.ForEachRow(rows, []any{&app, &xmin}, func() error { m[app] = xmin; return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := xmins()
	// The interval and points of an unchanged series are not read.
	err := s.SaveAppSeries(ctx, slices.Values([]store.AppSeries{
		{Tenant: "acme", App: "shop", Unchanged: true},
		series("blog", "blog 2"),
		{Tenant: "acme", App: "ghost", Unchanged: true},
	}))
	if err != nil {
		t.Fatal(err)
	}
	after := xmins()
	if len(after) != 2 || after["shop"] != before["shop"] || after["blog"] == before["blog"] {
		t.Errorf("rows' transactions %v, then %v: want shop's row kept as written, blog's rewritten, wiki's deleted, none for ghost", before, after)
	}
	got, err := s.LoadAppSeries(ctx, []string{"acme", "acme"}, []string{"shop", "blog"}, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	points := map[string]string{}
	for _, a := range got {
		points[a.App] = string(a.Points)
	}
	if points["shop"] != "shop 1" || points["blog"] != "blog 2" {
		t.Errorf("saved points %v, want shop 1 and blog 2", points)
	}
}

// BenchmarkSaveAppSeries10000Apps measures saves of 10,000 apps' series,
// in one run: every app's whole series of 7,416 bytes (an hour of 10 s
// points, as internal/appmetrics encodes them) written again, as every
// periodic save did before appends; then the periodic save now, every
// app appending one new point (24 bytes) and dropping its chunks older
// than the last save's; then 1% of the apps appending a point and the
// others unchanged. Each reports the chunks it wrote, the points' bytes
// it sent, the WAL it wrote and its time; run it with -benchmem for what
// a save costs the process.
func BenchmarkSaveAppSeries10000Apps(b *testing.B) {
	s, conn := newStoreConn(b)
	const apps = 10000
	all := make([]store.AppSeries, apps)
	last := time.Now().Truncate(time.Millisecond)
	for i := range all {
		points := make([]byte, 7416)
		for j := range points {
			points[j] = byte(i*31 + j*j)
		}
		all[i] = store.AppSeries{Tenant: fmt.Sprintf("tenant%d", i%500), App: fmt.Sprintf("app%d", i), Interval: 10 * time.Second,
			FirstAt: last.Add(-time.Hour), LastAt: last, Points: points}
	}
	if err := s.SaveAppSeries(b.Context(), slices.Values(all)); err != nil {
		b.Fatal(err)
	}
	point := make([]byte, 24)
	for _, c := range []struct {
		name string
		// every is how many apps there are for one that changed;
		// whole writes the changed ones' whole series, else one point.
		every int
		whole bool
	}{{"whole-series-as-before", 1, true}, {"append-one-point-every-app", 1, false}, {"append-one-point-1pct", 100, false}} {
		b.Run(c.name, func(b *testing.B) {
			var rows, sent int
			var wal int64
			save := make([]store.AppSeries, apps)
			for b.Loop() {
				// Each save's changed apps have a last point of their own.
				prev := last
				last = last.Add(10 * time.Second)
				sent = 0
				for i, a := range all {
					switch {
					case i%c.every != 0:
						a = store.AppSeries{Tenant: a.Tenant, App: a.App, Unchanged: true}
					case c.whole:
						a.FirstAt, a.LastAt = last.Add(-time.Hour), last
					default:
						a.FirstAt, a.LastAt, a.Points, a.Append, a.From = last, last, point, true, prev
					}
					sent += len(a.Points)
					save[i] = a
				}
				b.StopTimer()
				var lsn string
				if err := conn.QueryRow(b.Context(), "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := s.SaveAppSeries(b.Context(), slices.Values(save)); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := conn.QueryRow(b.Context(), "SELECT (SELECT count(*) FROM app_series_chunks WHERE last_at = $1), "+
					"pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $2::pg_lsn)::bigint", last, lsn).Scan(&rows, &wal); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			ms := float64(b.Elapsed().Milliseconds()) / float64(b.N)
			b.ReportMetric(ms, "ms/save")
			b.ReportMetric(float64(rows), "chunks/save")
			b.ReportMetric(float64(sent), "point-bytes/save")
			b.ReportMetric(float64(wal), "wal-bytes/save")
			b.Logf("%s: %d of %d apps' chunks written, %d bytes of points sent, %d bytes of WAL, %.0f ms a save", c.name, rows, apps, sent, wal, ms)
		})
	}
}

// TestAppSeriesAppend: an appended series adds one chunk holding only its
// points, and leaves the app's other chunks as they were written; a load
// answers the app's chunks one after the other, oldest first, without
// those that end before since; an append deletes its app's chunks that
// end before its From; and an append that does not follow its app's
// saved series, or takes it over its bounds, is refused and changes
// nothing.
func TestAppSeriesAppend(t *testing.T) {
	s, conn := newStoreConn(t)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Second) }
	apps := []string{"shop", "blog", "wiki"}
	whole := make([]store.AppSeries, len(apps))
	for i, app := range apps {
		whole[i] = store.AppSeries{Tenant: "acme", App: app, Interval: 10 * time.Second, FirstAt: at(0), LastAt: at(1), Points: []byte(app + "[0,1]")}
	}
	if err := s.SaveAppSeries(ctx, slices.Values(whole)); err != nil {
		t.Fatal(err)
	}
	// appendPoint saves point i of every app, keeping points from from on.
	appendPoint := func(i, from int) []store.AppSeries {
		all := make([]store.AppSeries, len(apps))
		for j, app := range apps {
			all[j] = store.AppSeries{Tenant: "acme", App: app, Interval: 10 * time.Second, FirstAt: at(i), LastAt: at(i),
				Points: fmt.Appendf(nil, "%s[%d]", app, i), Append: true, From: at(from)}
		}
		return all
	}
	type chunk struct {
		points, xmin    string
		first, last     time.Time
		headN, headSize int
	}
	chunks := func(app string) []chunk {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT convert_from(c.points, 'UTF8'), c.xmin::text, c.first_at, c.last_at, h.chunks, h.bytes FROM app_series_chunks c "+
			"JOIN app_series h USING (tenant, app) WHERE c.tenant = 'acme' AND c.app = $1 ORDER BY c.last_at", app)
		if err != nil {
			t.Fatal(err)
		}
		var out []chunk
		var c chunk
		if _, err := pgx.ForEachRow(rows, []any{&c.points, &c.xmin, &c.first, &c.last, &c.headN, &c.headSize}, func() error {
			out = append(out, c)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	load := func(since time.Time) map[string]store.AppSeries {
		t.Helper()
		got, err := s.LoadAppSeries(ctx, []string{"acme", "acme", "acme"}, apps, since)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]store.AppSeries{}
		for _, a := range got {
			m[a.App] = a
		}
		return m
	}

	before := chunks("shop")
	if err := s.SaveAppSeries(ctx, slices.Values(appendPoint(2, 0))); err != nil {
		t.Fatal(err)
	}
	after := chunks("shop")
	if len(after) != 2 || after[0].points != before[0].points || after[0].xmin != before[0].xmin || after[1].points != "shop[2]" || !after[1].first.Equal(at(2)) || !after[1].last.Equal(at(2)) {
		t.Fatalf("shop's chunks after a save of one new point: %+v, want the whole series' chunk as it was written, then one of the new point", after)
	}
	var size int
	if err := conn.QueryRow(ctx, "SELECT sum(octet_length(points)) FROM app_series_chunks WHERE last_at = $1", at(2)).Scan(&size); err != nil {
		t.Fatal(err)
	}
	if want := len("shop[2]blog[2]wiki[2]"); size != want {
		t.Errorf("the save of one new point per app wrote %d bytes of points, want %d (the new points only)", size, want)
	}
	for i := 3; i <= 5; i++ {
		if err := s.SaveAppSeries(ctx, slices.Values(appendPoint(i, 0))); err != nil {
			t.Fatal(err)
		}
	}
	got := load(t0.Add(-time.Hour))
	if len(got) != 3 || string(got["shop"].Points) != "shop[0,1]shop[2]shop[3]shop[4]shop[5]" || !got["wiki"].LastAt.Equal(at(5)) ||
		!got["blog"].FirstAt.Equal(at(0)) || got["blog"].Interval != 10*time.Second {
		t.Errorf("load after four appends: %+v", got)
	}
	if got := load(at(3)); string(got["blog"].Points) != "blog[4]blog[5]" || !got["blog"].FirstAt.Equal(at(4)) {
		t.Errorf("load since point 3: %+v, want blog's chunks of points 4 and 5", got)
	}

	// Keeping points from 3 on deletes the chunks that end before it.
	if err := s.SaveAppSeries(ctx, slices.Values(appendPoint(6, 3))); err != nil {
		t.Fatal(err)
	}
	after = chunks("wiki")
	if len(after) != 4 || after[0].points != "wiki[3]" || after[3].points != "wiki[6]" || after[0].headN != 4 ||
		after[0].headSize != len("wiki[3]wiki[4]wiki[5]wiki[6]") {
		t.Errorf("wiki's chunks after keeping points from 3 on: %+v, want those of points 3 to 6, counted in its head", after)
	}

	// Refused appends leave every app as it was.
	saved := load(t0.Add(-time.Hour))
	for _, c := range []struct {
		name string
		a    store.AppSeries
	}{
		{"no saved series", store.AppSeries{Tenant: "acme", App: "ghost", Interval: 10 * time.Second, FirstAt: at(7), LastAt: at(7), Points: []byte("x"), Append: true}},
		{"not after the last point", store.AppSeries{Tenant: "acme", App: "shop", Interval: 10 * time.Second, FirstAt: at(6), LastAt: at(7), Points: []byte("x"), Append: true}},
		{"another interval", store.AppSeries{Tenant: "acme", App: "shop", Interval: 5 * time.Second, FirstAt: at(7), LastAt: at(7), Points: []byte("x"), Append: true}},
		{"no first time", store.AppSeries{Tenant: "acme", App: "shop", Interval: 10 * time.Second, LastAt: at(7), Points: []byte("x"), Append: true}},
		{"over the bytes", store.AppSeries{Tenant: "acme", App: "shop", Interval: 10 * time.Second, FirstAt: at(7), LastAt: at(7),
			Points: make([]byte, store.MaxAppSeriesBytes-len("shop[3]shop[4]shop[5]")), Append: true}},
	} {
		good := appendPoint(7, 0)[1]
		if err := s.SaveAppSeries(ctx, slices.Values([]store.AppSeries{good, c.a})); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("append, %s: %v, want ErrInvalid", c.name, err)
		}
	}
	if got := load(t0.Add(-time.Hour)); fmt.Sprint(got) != fmt.Sprint(saved) {
		t.Errorf("after refused appends: %v, want %v", got, saved)
	}

	// An app has at most MaxAppSeriesChunks chunks.
	refused := false
	for i := 7; i <= 7+store.MaxAppSeriesChunks && !refused; i++ {
		err := s.SaveAppSeries(ctx, slices.Values(appendPoint(i, 0)[:1]))
		refused = errors.Is(err, store.ErrInvalid)
		if err != nil && !refused {
			t.Fatal(err)
		}
	}
	if n := len(chunks("shop")); !refused || n != store.MaxAppSeriesChunks {
		t.Errorf("shop has %d chunks, refused %t: want the append over %d refused", n, refused, store.MaxAppSeriesChunks)
	}
	// A whole series replaces the app's chunks with one.
	if err := s.SaveAppSeries(ctx, slices.Values(whole[:1])); err != nil {
		t.Fatal(err)
	}
	if after := chunks("shop"); len(after) != 1 || after[0].points != "shop[0,1]" || after[0].headN != 1 {
		t.Errorf("shop's chunks after a whole save: %+v, want its one chunk", after)
	}
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM app_series_chunks WHERE app <> 'shop'").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d chunks of the apps not named (%v), want none", left, err)
	}
}
