package certstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bex.co/bex/internal/certstore"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testOptions make locks go stale in two seconds, so that the stale-lock
// tests take a few.
var testOptions = certstore.Options{
	LockExpiry:  2 * time.Second,
	LockRefresh: 500 * time.Millisecond,
	LockPoll:    100 * time.Millisecond,
}

// newDatabase returns the URL of a fresh database migrated by store.Open, as
// the platform's is, dropped after t.
func newDatabase(t *testing.T) string {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	s, err := store.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	s.Close()
	return dbURL
}

// newPool returns a connection pool of its own to dbURL, as a separate edge
// replica would have, closed after t.
func newPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newStorage returns a Storage with opts over a pool of its own to dbURL,
// closed after t.
func newStorage(t *testing.T, dbURL string, opts certstore.Options) *certstore.Storage {
	t.Helper()
	s, err := certstore.New(newPool(t, dbURL), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
