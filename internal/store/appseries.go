package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"
)

// AppSeries is one app's saved metric series, or the points to add to it:
// the points of internal/appmetrics, in its own encoding, which the store
// does not read. The encoding is one the caller reads back from the
// concatenation of what it saved: a load answers an app's chunks' Points
// one after the other.
type AppSeries struct {
	Tenant, App string
	// Interval is the points' resolution.
	Interval time.Duration
	// FirstAt is the time of the first point in Points (zero: not known,
	// which only a whole series may be); LastAt the time of the last one.
	// LoadAppSeries skips a series whose last point is not after what it
	// is asked for.
	FirstAt, LastAt time.Time
	// Points is at most MaxAppSeriesBytes, and so is the app's whole
	// saved series.
	Points []byte
	// Append, in a save, adds Points to the app's saved series as one
	// chunk, instead of replacing the series: they are the points after
	// the app's last saved one (FirstAt after its LastAt, the same
	// Interval). The app's chunks whose last point is before From (the
	// oldest point the caller keeps) are deleted by the same save.
	Append bool
	From   time.Time
	// Unchanged, in a save, keeps the app's saved series as it is (the
	// caller wrote these points before): only Tenant and App are read.
	// LoadAppSeries never sets it, nor Append.
	Unchanged bool
}

// MaxAppSeriesBytes bounds one app's saved points, all its chunks
// together (an hour of 10 s points takes about 8 KiB); MaxAppSeriesChunks
// bounds its chunks (a save every 2 minutes keeps about 31 for an hour).
const (
	MaxAppSeriesBytes  = 1 << 20
	MaxAppSeriesChunks = 1024
)

// SaveAppSeries makes the saved series exactly all: a series replaces its
// app's saved one with one chunk, an Append one adds a chunk to it (and
// deletes its chunks before From), an Unchanged one keeps it as it is (or
// none, when the app has none), and the series of every app not in all is
// deleted. An app may appear once in all. It reads all once, one series at
// a time, and writes each series' Points before it asks for the next, so
// all may make them in one buffer it reuses. The series are copied (COPY)
// into a temporary table and merged from it by a few statements, all in
// one transaction: a save that fails, or a series that is refused
// (ErrInvalid: no app, no interval, Points over MaxAppSeriesBytes; an
// Append to an app without a saved series, at another interval, not after
// its last point, or that takes it over MaxAppSeriesBytes or
// MaxAppSeriesChunks), leaves the previous save whole. A periodic save of
// 10,000 apps that each have one new point appends 10,000 chunks of that
// point, where one that rewrites every series writes an hour of points
// for each (BenchmarkSaveAppSeries10000Apps). One writer per database:
// two processes saving their own series would delete each other's.
func (s *Store) SaveAppSeries(ctx context.Context, all iter.Seq[AppSeries]) error {
	next, stop := iter.Pull(all)
	defer stop()
	var n, appends, wholes int
	row := make([]any, 8)
	// refused is the series the copy stopped at: the server only hears
	// that the copy failed.
	var refused error
	src := pgx.CopyFromFunc(func() ([]any, error) {
		a, ok := next()
		if !ok {
			return nil, nil
		}
		if err := checkAppSeries(a); err != nil {
			refused = err
			return nil, err
		}
		n++
		clear(row)
		row[0], row[1] = a.Tenant, a.App
		switch {
		case a.Unchanged:
			// Named, so that the delete keeps its series; not written.
			row[2] = "k"
			return row, nil
		case a.Append:
			appends++
			row[2], row[6] = "a", a.From
		default:
			wholes++
			row[2] = "w"
		}
		row[3], row[5], row[7] = a.Interval.Milliseconds(), a.LastAt, a.Points
		if !a.FirstAt.IsZero() {
			row[4] = a.FirstAt
		}
		return row, nil
	})
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// op is k (unchanged), a (append) or w (whole).
		if _, err := tx.Exec(ctx, "CREATE TEMPORARY TABLE app_series_save (tenant text, app text, op text, "+
			"interval_ms bigint, first_at timestamptz, last_at timestamptz, from_at timestamptz, points bytea) ON COMMIT DROP"); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"app_series_save"},
			[]string{"tenant", "app", "op", "interval_ms", "first_at", "last_at", "from_at", "points"}, src); err != nil {
			return err
		}
		if wholes > 0 {
			if err := saveWholeSeries(ctx, tx); err != nil {
				return err
			}
		}
		if appends > 0 {
			if err := appendSeries(ctx, tx, appends); err != nil {
				return err
			}
		}
		// The heads and chunks of the apps not named.
		_, err := tx.Exec(ctx, "WITH gone AS (DELETE FROM app_series h WHERE NOT EXISTS "+
			"(SELECT 1 FROM app_series_save k WHERE k.tenant = h.tenant AND k.app = h.app) RETURNING h.tenant, h.app) "+
			"DELETE FROM app_series_chunks c USING gone g WHERE c.tenant = g.tenant AND c.app = g.app")
		return err
	})
	if refused != nil {
		return refused
	}
	if errors.Is(err, ErrInvalid) {
		return err
	}
	if err != nil {
		return fmt.Errorf("saving the series of %d apps: %w", n, err)
	}
	return nil
}

// checkAppSeries refuses a series SaveAppSeries cannot save whatever is
// saved already.
func checkAppSeries(a AppSeries) error {
	switch {
	case a.App == "":
		return fmt.Errorf("%w series of tenant %q: no app", ErrInvalid, a.Tenant)
	case a.Unchanged:
		return nil
	case a.Interval <= 0 || len(a.Points) > MaxAppSeriesBytes:
		return fmt.Errorf("%w series of app %q: interval %s, %d bytes (at most %d)", ErrInvalid, a.App, a.Interval, len(a.Points), MaxAppSeriesBytes)
	case a.Append && (a.FirstAt.IsZero() || len(a.Points) == 0):
		return fmt.Errorf("%w points appended to app %q: no first point's time, or no points", ErrInvalid, a.App)
	case !a.FirstAt.IsZero() && a.LastAt.Before(a.FirstAt):
		return fmt.Errorf("%w series of app %q: last point at %s, before its first at %s", ErrInvalid, a.App, a.LastAt, a.FirstAt)
	}
	return nil
}

// saveWholeSeries replaces the saved series of the whole series in
// app_series_save with one chunk each.
func saveWholeSeries(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "DELETE FROM app_series_chunks c USING app_series_save s "+
		"WHERE s.op = 'w' AND c.tenant = s.tenant AND c.app = s.app"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO app_series_chunks (tenant, app, first_at, last_at, points) "+
		"SELECT tenant, app, first_at, last_at, points FROM app_series_save WHERE op = 'w'"); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO app_series (tenant, app, interval_ms, last_at, chunks, bytes) "+
		"SELECT tenant, app, interval_ms, last_at, 1, octet_length(points) FROM app_series_save WHERE op = 'w' "+
		"ON CONFLICT (tenant, app) DO UPDATE SET interval_ms = EXCLUDED.interval_ms, last_at = EXCLUDED.last_at, "+
		"chunks = EXCLUDED.chunks, bytes = EXCLUDED.bytes")
	return err
}

// appendSeries adds the appended series in app_series_save (appends of
// them) as chunks, deletes their apps' chunks before their From, and
// keeps their heads' last point, chunks and bytes, in one statement; it
// refuses them all (ErrInvalid) when one does not follow its app's saved
// series or takes it over its bounds.
func appendSeries(ctx context.Context, tx pgx.Tx, appends int) error {
	var updated, over int
	err := tx.QueryRow(ctx, "WITH expired AS ("+
		"DELETE FROM app_series_chunks c USING app_series_save s "+
		"WHERE s.op = 'a' AND c.tenant = s.tenant AND c.app = s.app AND c.last_at < s.from_at "+
		"RETURNING c.tenant, c.app, octet_length(c.points) AS bytes), "+
		// A chunk at the time of one saved is refused below.
		"added AS (INSERT INTO app_series_chunks (tenant, app, first_at, last_at, points) "+
		"SELECT tenant, app, first_at, last_at, points FROM app_series_save WHERE op = 'a' ON CONFLICT DO NOTHING), "+
		// Each head's change, the expired chunks' and the added one's
		// summed: grouped, not joined, as the planner expects a few
		// expired chunks where there may be one per app.
		"deltas AS (SELECT tenant, app, -count(*) AS chunks, -sum(bytes) AS bytes, "+
		"NULL::bigint AS interval_ms, NULL::timestamptz AS first_at, NULL::timestamptz AS last_at FROM expired GROUP BY tenant, app "+
		"UNION ALL SELECT tenant, app, 1, octet_length(points), interval_ms, first_at, last_at FROM app_series_save WHERE op = 'a'), "+
		"d AS (SELECT tenant, app, sum(chunks) AS chunks, sum(bytes) AS bytes, max(interval_ms) AS interval_ms, "+
		"max(first_at) AS first_at, max(last_at) AS last_at FROM deltas GROUP BY tenant, app), "+
		"heads AS (UPDATE app_series h SET last_at = d.last_at, chunks = h.chunks + d.chunks, bytes = h.bytes + d.bytes FROM d "+
		"WHERE h.tenant = d.tenant AND h.app = d.app AND h.interval_ms = d.interval_ms AND h.last_at < d.first_at "+
		"RETURNING h.chunks, h.bytes) "+
		"SELECT count(*), count(*) FILTER (WHERE chunks > $1 OR bytes > $2) FROM heads",
		MaxAppSeriesChunks, MaxAppSeriesBytes).Scan(&updated, &over)
	if err != nil {
		return err
	}
	if updated == appends && over == 0 {
		return nil
	}
	// Which one, to say what to fix.
	var tenant, app string
	var chunks, bytes int
	var ms int64
	var follows bool
	err = tx.QueryRow(ctx, "SELECT s.tenant, s.app, COALESCE(h.interval_ms, 0), COALESCE(h.chunks, 0), COALESCE(h.bytes, 0), "+
		"COALESCE(h.last_at = s.last_at, false) FROM app_series_save s LEFT JOIN app_series h ON h.tenant = s.tenant AND h.app = s.app "+
		"WHERE s.op = 'a' AND (h.app IS NULL OR h.last_at <> s.last_at OR h.chunks > $1 OR h.bytes > $2) LIMIT 1",
		MaxAppSeriesChunks, MaxAppSeriesBytes).Scan(&tenant, &app, &ms, &chunks, &bytes, &follows)
	switch {
	case err != nil:
		return fmt.Errorf("%w points appended to %d apps: %d do not follow their saved series, %d over their bounds (finding which: %w)",
			ErrInvalid, appends, appends-updated, over, err)
	case ms == 0:
		return fmt.Errorf("%w points appended to app %q of tenant %q: it has no saved series to append to; save it whole", ErrInvalid, app, tenant)
	case !follows:
		return fmt.Errorf("%w points appended to app %q of tenant %q: they do not follow its saved series "+
			"(saved at an interval of %s, or their first point not after its last one); save it whole",
			ErrInvalid, app, tenant, time.Duration(ms)*time.Millisecond)
	default:
		return fmt.Errorf("%w points appended to app %q of tenant %q: its saved series would take %d chunks and %d bytes, over %d and %d; save it whole",
			ErrInvalid, app, tenant, chunks, bytes, MaxAppSeriesChunks, MaxAppSeriesBytes)
	}
}

// LoadAppSeries returns the saved series of the apps named by tenants and
// apps (pairs, in the same order) whose last point is after since: the
// Points of the app's chunks whose last point is after since, one after
// the other, oldest first (the first may start before since: the caller
// drops those points), FirstAt that of the first such chunk (zero when not
// known). An app without one (never saved, deleted since, or only older
// points) is not in the result, which is in no particular order.
func (s *Store) LoadAppSeries(ctx context.Context, tenants, apps []string, since time.Time) ([]AppSeries, error) {
	if len(tenants) != len(apps) {
		return nil, fmt.Errorf("%w: %d tenants for %d apps", ErrInvalid, len(tenants), len(apps))
	}
	rows, err := s.pool.Query(ctx,
		"SELECT h.tenant, h.app, h.interval_ms, h.last_at, c.first_at, c.points FROM app_series h "+
			"JOIN unnest($1::text[], $2::text[]) AS k(tenant, app) ON k.tenant = h.tenant AND k.app = h.app "+
			"JOIN app_series_chunks c ON c.tenant = h.tenant AND c.app = h.app AND c.last_at > $3 "+
			"WHERE h.last_at > $3 ORDER BY h.tenant, h.app, c.last_at",
		tenants, apps, since)
	if err != nil {
		return nil, fmt.Errorf("loading the series of %d apps: %w", len(apps), err)
	}
	var out []AppSeries
	var (
		tenant, app string
		ms          int64
		lastAt      time.Time
		firstAt     *time.Time
		points      []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&tenant, &app, &ms, &lastAt, &firstAt, &points}, func() error {
		if n := len(out); n > 0 && out[n-1].Tenant == tenant && out[n-1].App == app {
			out[n-1].Points = append(out[n-1].Points, points...)
			return nil
		}
		a := AppSeries{Tenant: tenant, App: app, Interval: time.Duration(ms) * time.Millisecond, LastAt: lastAt,
			Points: append([]byte(nil), points...)}
		if firstAt != nil {
			a.FirstAt = *firstAt
		}
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading the series of %d apps: %w", len(apps), err)
	}
	return out, nil
}
