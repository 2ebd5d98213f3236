package store

import (
	"context"
	"fmt"
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
}

// MaxAppSeriesBytes bounds one app's saved points (an hour of 10 s points
// takes about 8 KiB).
const MaxAppSeriesBytes = 1 << 20

// appSeriesChunk is how many apps one statement of SaveAppSeries writes:
// a save of 10,000 apps is 10 upserts and a delete, in one round trip.
const appSeriesChunk = 1000

// SaveAppSeries makes the saved series exactly all: each one replaces its
// app's row, and the row of every app not in all is deleted. It is one
// transaction sent in one round trip (a batch of statements of at most
// appSeriesChunk apps each, then the delete): a save that fails leaves the
// previous one whole. An app may appear once in all. One writer per
// database: two processes saving their own series would delete each
// other's rows.
func (s *Store) SaveAppSeries(ctx context.Context, all []AppSeries) error {
	tenants := make([]string, len(all))
	apps := make([]string, len(all))
	for i, a := range all {
		if a.App == "" || a.Interval <= 0 || len(a.Points) > MaxAppSeriesBytes {
			return fmt.Errorf("%w series of app %q: interval %s, %d bytes", ErrInvalid, a.App, a.Interval, len(a.Points))
		}
		tenants[i], apps[i] = a.Tenant, a.App
	}
	b := &pgx.Batch{}
	for from := 0; from < len(all); from += appSeriesChunk {
		chunk := all[from:min(from+appSeriesChunk, len(all))]
		intervals := make([]int64, len(chunk))
		lastAts := make([]time.Time, len(chunk))
		points := make([][]byte, len(chunk))
		for i, a := range chunk {
			intervals[i], lastAts[i], points[i] = a.Interval.Milliseconds(), a.LastAt, a.Points
		}
		b.Queue("INSERT INTO app_series (tenant, app, interval_ms, last_at, points) "+
			"SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::bytea[]) "+
			"ON CONFLICT (tenant, app) DO UPDATE SET interval_ms = EXCLUDED.interval_ms, last_at = EXCLUDED.last_at, points = EXCLUDED.points",
			tenants[from:from+len(chunk)], apps[from:from+len(chunk)], intervals, lastAts, points)
	}
	b.Queue("DELETE FROM app_series s WHERE NOT EXISTS "+
		"(SELECT 1 FROM unnest($1::text[], $2::text[]) AS k(tenant, app) WHERE k.tenant = s.tenant AND k.app = s.app)",
		tenants, apps)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("saving the series of %d apps: %w", len(all), err)
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
