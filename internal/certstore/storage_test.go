package certstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bex.co/bex/internal/certstore"
	"bex.co/bex/internal/certstore/storagetest"
	"bex.co/bex/test/platformtest"
)

// TestStorage runs the shared suite on a fresh database per subtest. Each
// instance has its own connection pool; Crash is Close, which stops the
// refreshers and releases nothing.
func TestStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storagetest.Backend {
		dbURL := newDatabase(t)
		return storagetest.Backend{
			New: func(t *testing.T) certmagic.Storage { return newStorage(t, dbURL, testOptions) },
			Crash: func(t *testing.T, s certmagic.Storage) {
				s.(*certstore.Storage).Close()
			},
			StaleAfter: testOptions.LockExpiry + testOptions.LockPoll,
		}
	})
}

// lockRow is a row of certmagic_locks, with the database's time.
type lockRow struct {
	token, holder     string
	lockedAt, expires time.Time
	now               time.Time
}

// readLock returns the row of lock name, or false when there is none.
func readLock(t *testing.T, pool *pgxpool.Pool, name string) (lockRow, bool) {
	t.Helper()
	var r lockRow
	err := pool.QueryRow(t.Context(),
		"SELECT token, holder, locked_at, expires, now() FROM certmagic_locks WHERE name = $1", name).
		Scan(&r.token, &r.holder, &r.lockedAt, &r.expires, &r.now)
	if errors.Is(err, pgx.ErrNoRows) {
		return lockRow{}, false
	}
	if err != nil {
		t.Fatalf("reading lock %s: %v", name, err)
	}
	return r, true
}

// TestLockRow: a held lock is a row that names its holder and expires within
// LockExpiry; the refresher pushes its expiry forward; Unlock removes it.
func TestLockRow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := newDatabase(t)
	opts := testOptions
	opts.Holder = "edge-0/42"
	s := newStorage(t, dbURL, opts)
	pool := newPool(t, dbURL)
	const name = "issue_cert_row.example"

	if err := s.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	first, ok := readLock(t, pool, name)
	if !ok {
		t.Fatal("no row for a held lock")
	}
	if first.holder != "edge-0/42" || first.token == "" {
		t.Errorf("lock row = %+v, want holder edge-0/42 and a token", first)
	}
	if left := first.expires.Sub(first.now); left <= 0 || left > opts.LockExpiry {
		t.Errorf("lock expires in %v, want within (0, %v]", left, opts.LockExpiry)
	}

	platformtest.Eventually(t, 10*opts.LockExpiry, "the lock's expiry pushed forward", func(context.Context) error {
		r, ok := readLock(t, pool, name)
		if !ok || r.token != first.token {
			t.Fatalf("the lock row changed hands while held: %+v", r)
		}
		if !r.expires.After(first.expires) {
			return fmt.Errorf("it expires at %v still", r.expires)
		}
		return nil
	})

	if err := s.Unlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	if r, ok := readLock(t, pool, name); ok {
		t.Errorf("after Unlock the lock row is still there: %+v", r)
	}
}

// TestUnlockReleasesOnlyOwnLock: Unlock by an instance that does not hold a
// lock, or that lost it to a takeover, leaves the holder's lock alone.
func TestUnlockReleasesOnlyOwnLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := newDatabase(t)
	holder, other, third := newStorage(t, dbURL, testOptions), newStorage(t, dbURL, testOptions), newStorage(t, dbURL, testOptions)
	pool := newPool(t, dbURL)
	const name = "issue_cert_own.example"

	if err := holder.Lock(ctx, name); err != nil {
		t.Fatal(err)
	}
	before, _ := readLock(t, pool, name)
	if err := other.Unlock(ctx, name); !errors.Is(err, certstore.ErrNotHeld) {
		t.Errorf("Unlock by an instance that never locked: err = %v, want ErrNotHeld", err)
	}
	if after, ok := readLock(t, pool, name); !ok || after.token != before.token {
		t.Fatalf("Unlock by another instance changed the lock: %+v, %v", after, ok)
	}

	// The holder stops refreshing, as if it had died; other takes over.
	holder.Close()
	wait, cancel := context.WithTimeout(ctx, 3*testOptions.LockExpiry)
	defer cancel()
	if err := other.Lock(wait, name); err != nil {
		t.Fatalf("taking over a stale lock: %v", err)
	}
	taken, _ := readLock(t, pool, name)

	if err := holder.Unlock(ctx, name); !errors.Is(err, certstore.ErrNotHeld) || !strings.Contains(err.Error(), "taken over") {
		t.Errorf("Unlock by the holder that lost the lock: err = %v, want ErrNotHeld saying it was taken over", err)
	}
	if after, ok := readLock(t, pool, name); !ok || after.token != taken.token {
		t.Fatalf("Unlock by the former holder released its successor's lock: %+v, %v", after, ok)
	}
	if got, err := third.TryLock(ctx, name); got || err != nil {
		t.Errorf("TryLock after the former holder's Unlock = %v, %v; want false, nil", got, err)
	}
	if err := other.Unlock(ctx, name); err != nil {
		t.Errorf("Unlock by the new holder: %v", err)
	}
	if err := other.Unlock(ctx, name); !errors.Is(err, certstore.ErrNotHeld) {
		t.Errorf("second Unlock: err = %v, want ErrNotHeld", err)
	}
}

// TestClose: after Close, locks are refused and keys still work.
func TestClose(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStorage(t, newDatabase(t), testOptions)
	s.Close()
	if err := s.Lock(ctx, "x"); !errors.Is(err, certstore.ErrClosed) {
		t.Errorf("Lock after Close: err = %v, want ErrClosed", err)
	}
	if got, err := s.TryLock(ctx, "x"); got || !errors.Is(err, certstore.ErrClosed) {
		t.Errorf("TryLock after Close = %v, %v; want false, ErrClosed", got, err)
	}
	if err := s.Store(ctx, "k", []byte("v")); err != nil {
		t.Errorf("Store after Close: %v", err)
	}
}

// TestContextHonoured: every method stops with the caller's context.
func TestContextHonoured(t *testing.T) {
	t.Parallel()
	s := newStorage(t, newDatabase(t), testOptions)
	if err := s.Store(t.Context(), "k/v", []byte("v")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, loadErr := s.Load(ctx, "k/v")
	_, statErr := s.Stat(ctx, "k/v")
	_, listErr := s.List(ctx, "k", true)
	_, tryErr := s.TryLock(ctx, "free")
	for what, err := range map[string]error{
		"Store":   s.Store(ctx, "k/w", []byte("w")),
		"Load":    loadErr,
		"Stat":    statErr,
		"List":    listErr,
		"Delete":  s.Delete(ctx, "k"),
		"Lock":    s.Lock(ctx, "free"),
		"TryLock": tryErr,
	} {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: err = %v, want context.Canceled", what, err)
		}
	}
	if s.Exists(ctx, "k/v") {
		t.Error("Exists with a cancelled context = true")
	}
	if v, err := s.Load(t.Context(), "k/v"); err != nil || string(v) != "v" {
		t.Errorf("after the cancelled calls, k/v = %q, %v; want it untouched", v, err)
	}
}

// TestKeysRefused: keys that are not slash-separated paths of non-empty
// components are refused, and nothing is stored.
func TestKeysRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStorage(t, newDatabase(t), testOptions)
	for _, key := range []string{"", "/a", "a/", "a//b", "/"} {
		if err := s.Store(ctx, key, []byte("x")); err == nil {
			t.Errorf("Store(%q) succeeded", key)
		}
	}
	if err := s.Delete(ctx, ""); err == nil {
		t.Error(`Delete("") succeeded; it must not mean "everything"`)
	}
	if keys, err := s.List(ctx, "", true); err != nil || len(keys) != 0 {
		t.Errorf("after the refused Stores, List = %q, %v; want nothing", keys, err)
	}
}

// TestListRoot: "" lists the top of the tree.
func TestListRoot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStorage(t, newDatabase(t), testOptions)
	if keys, err := s.List(ctx, "", false); err != nil || len(keys) != 0 {
		t.Errorf("List of an empty root = %q, %v; want nothing, nil", keys, err)
	}
	for _, k := range []string{"certificates/ca/example.com/example.com.crt", "ocsp/example.com-1", "top"} {
		if err := s.Store(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if keys, err := s.List(ctx, "", false); err != nil || strings.Join(keys, " ") != "certificates ocsp top" {
		t.Errorf("List(\"\", false) = %q, %v", keys, err)
	}
	want := "certificates certificates/ca certificates/ca/example.com certificates/ca/example.com/example.com.crt ocsp ocsp/example.com-1 top"
	if keys, err := s.List(ctx, "", true); err != nil || strings.Join(keys, " ") != want {
		t.Errorf("List(\"\", true) = %q, %v; want %s", keys, err, want)
	}
}

// TestNew: New refuses a missing pool and options that cannot work, and the
// Storage names its database.
func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := certstore.New(nil, certstore.Options{}); err == nil {
		t.Error("New without a pool succeeded")
	}
	dbURL := newDatabase(t)
	pool := newPool(t, dbURL)
	for _, opts := range []certstore.Options{
		{LockExpiry: time.Second, LockRefresh: time.Second},
		{LockExpiry: time.Second, LockRefresh: 2 * time.Second},
		{LockExpiry: -time.Second},
		{LockPoll: -time.Second},
	} {
		if _, err := certstore.New(pool, opts); err == nil {
			t.Errorf("New with %+v succeeded", opts)
		}
	}
	s, err := certstore.New(pool, certstore.Options{})
	if err != nil {
		t.Fatalf("New with defaults: %v", err)
	}
	if name := pool.Config().ConnConfig.Database; !strings.Contains(s.String(), name) {
		t.Errorf("String() = %q, want it to name database %s", s.String(), name)
	}
}
