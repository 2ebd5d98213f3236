package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// AdvisoryLockWaiters counts the sessions of pool's database that wait for
// an advisory lock, for tests that must see a caller blocked on one before
// they go on. It fails t when the query fails.
func AdvisoryLockWaiters(ctx context.Context, t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND NOT granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
		t.Fatalf("counting advisory lock waiters: %v", err)
	}
	return n
}
