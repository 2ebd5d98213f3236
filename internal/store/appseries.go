package store

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"
)

// AppSeries is one app's saved metric series: the points of
// internal/appmetrics, in its own encoding, which the store does not read.
type AppSeries struct {
	Tenant, App string
	// Interval is the points' resolution.
	Interval time.Duration
	// LastAt is the time of the last point: LoadAppSeries skips a series
	// whose last point is older than it is asked for.
	LastAt time.Time
	// Points is at most MaxAppSeriesBytes.
	Points []byte
	// Unchanged, in a save, keeps the app's saved row as it is (the
	// caller wrote these points before): only Tenant and App are read.
	// LoadAppSeries never sets it.
	Unchanged bool
}

// MaxAppSeriesBytes bounds one app's saved points (an hour of 10 s points
// takes about 8 KiB).
const MaxAppSeriesBytes = 1 << 20

// SaveAppSeries makes the saved series exactly all: each one replaces its
// app's row, except an Unchanged one, which keeps the row as it is (or no
// row, when the app has none), and the row of every app not in all is
// deleted. An app may appear once in all. It reads all once, one series
// at a time, and writes each series' Points before it asks for the next,
// so all may make them in one buffer it reuses. The series are copied
// (COPY) into a temporary table and merged from it by one upsert of the
// changed ones and one delete, all in one transaction: a save that fails,
// or a series that is refused (ErrInvalid: no app, no interval, Points
// over MaxAppSeriesBytes), leaves the previous save whole. A save of
// 10,000 apps of which 100 changed writes 100 rows, where one that
// rewrites every row writes 10,000 (BenchmarkSaveAppSeries10000Apps). One
// writer per database: two processes saving their own series would delete
// each other's rows.
func (s *Store) SaveAppSeries(ctx context.Context, all iter.Seq[AppSeries]) error {
	next, stop := iter.Pull(all)
	defer stop()
	n := 0
	row := make([]any, 5)
	// refused is the series the copy stopped at: the server only hears
	// that the copy failed.
	var refused error
	src := pgx.CopyFromFunc(func() ([]any, error) {
		a, ok := next()
		if !ok {
			return nil, nil
		}
		if a.App == "" || !a.Unchanged && (a.Interval <= 0 || len(a.Points) > MaxAppSeriesBytes) {
			refused = fmt.Errorf("%w series of app %q: interval %s, %d bytes", ErrInvalid, a.App, a.Interval, len(a.Points))
			return nil, refused
		}
		n++
		if a.Unchanged {
			// Named, so that the delete keeps its row; not written.
			row[0], row[1], row[2], row[3], row[4] = a.Tenant, a.App, nil, nil, nil
			return row, nil
		}
		row[0], row[1], row[2], row[3], row[4] = a.Tenant, a.App, a.Interval.Milliseconds(), a.LastAt, a.Points
		return row, nil
	})
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// points is null for an unchanged series.
		if _, err := tx.Exec(ctx, "CREATE TEMPORARY TABLE app_series_save "+
			"(tenant text, app text, interval_ms bigint, last_at timestamptz, points bytea) ON COMMIT DROP"); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"app_series_save"},
			[]string{"tenant", "app", "interval_ms", "last_at", "points"}, src); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO app_series (tenant, app, interval_ms, last_at, points) "+
			"SELECT tenant, app, interval_ms, last_at, points FROM app_series_save WHERE points IS NOT NULL "+
			"ON CONFLICT (tenant, app) DO UPDATE SET interval_ms = EXCLUDED.interval_ms, last_at = EXCLUDED.last_at, points = EXCLUDED.points"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM app_series s WHERE NOT EXISTS "+
			"(SELECT 1 FROM app_series_save k WHERE k.tenant = s.tenant AND k.app = s.app)")
		return err
	})
	if refused != nil {
		return refused
	}
	if err != nil {
		return fmt.Errorf("saving the series of %d apps: %w", n, err)
	}
	return nil
}

// LoadAppSeries returns the saved series of the apps named by tenants and
// apps (pairs, in the same order) whose last point is after since; an app
// without one (never saved, deleted since, or only older points) is not in
// the result, which is in no particular order.
func (s *Store) LoadAppSeries(ctx context.Context, tenants, apps []string, since time.Time) ([]AppSeries, error) {
	if len(tenants) != len(apps) {
		return nil, fmt.Errorf("%w: %d tenants for %d apps", ErrInvalid, len(tenants), len(apps))
	}
	rows, err := s.pool.Query(ctx,
		"SELECT s.tenant, s.app, s.interval_ms, s.last_at, s.points FROM app_series s "+
			"JOIN unnest($1::text[], $2::text[]) AS k(tenant, app) ON k.tenant = s.tenant AND k.app = s.app "+
			"WHERE s.last_at > $3",
		tenants, apps, since)
	if err != nil {
		return nil, fmt.Errorf("loading the series of %d apps: %w", len(apps), err)
	}
	var out []AppSeries
	var ms int64
	var a AppSeries
	_, err = pgx.ForEachRow(rows, []any{&a.Tenant, &a.App, &ms, &a.LastAt, &a.Points}, func() error {
		a.Interval = time.Duration(ms) * time.Millisecond
		out = append(out, a)
		a = AppSeries{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading the series of %d apps: %w", len(apps), err)
	}
	return out, nil
}
