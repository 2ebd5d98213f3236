package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

// lockAsync takes the lock in a goroutine and reports when it holds it.
func lockAsync(ctx context.Context, s *store.Store, tenant, app string) (<-chan func(), <-chan error) {
	held, failed := make(chan func(), 1), make(chan error, 1)
	go func() {
		unlock, err := s.LockApp(ctx, tenant, app)
		if err != nil {
			failed <- err
			return
		}
		held <- unlock
	}()
	return held, failed
}

// contended opens two stores on one new database, as two processes of a
// cluster install would, lets the first take acme/web's lock and returns
// once the second waits for it (lockAsync's channels). The first store and
// its unlock are returned too.
func contended(t *testing.T) (a *store.Store, unlockA func(), held <-chan func(), failed <-chan error) {
	t.Helper()
	a, dbURL := newStoreURL(t)
	b, err := store.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	unlockA, err = a.LockApp(t.Context(), "acme", "web")
	if err != nil {
		t.Fatal(err)
	}
	held, failed = lockAsync(t.Context(), b, "acme", "web")
	platformtest.Eventually(t, time.Minute, "the second process to wait for the lock", lockWaiters(t, a, 1))
	return a, unlockA, held, failed
}

// Two stores on one database stand for two processes (the git receiver and
// the web API): a rollback in one waits for a deploy of the same app in the
// other.
func TestLockAppSerialisesProcesses(t *testing.T) {
	a, unlockA, held, failed := contended(t)
	select {
	case <-held:
		t.Fatal("the second process took the lock while the first held it")
	case err := <-failed:
		t.Fatalf("LockApp: %v", err)
	default:
	}

	// Another app, and the same app name of another tenant, are not held up.
	for _, other := range [][2]string{{"acme", "api"}, {"globex", "web"}} {
		unlock, err := a.LockApp(t.Context(), other[0], other[1])
		if err != nil {
			t.Fatalf("LockApp(%s/%s): %v", other[0], other[1], err)
		}
		unlock()
	}

	unlockA()
	awaitLock(t, held, failed, "after the first process released it")
}

// A process that dies while it holds the lock does not hold up the others:
// the lock goes with its connection.
func TestLockAppReleasedWhenTheHolderDies(t *testing.T) {
	a, unlockA, held, failed := contended(t)
	defer unlockA()

	// The holder's session ends as it would when its process is killed.
	var killed bool
	if err := a.Pool().QueryRow(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminating the holder's session: %v %v", killed, err)
	}
	awaitLock(t, held, failed, "after its holder's session ended")
}

// lockWaiters is a condition for platformtest.Eventually: want sessions
// wait for an advisory lock on s's database.
func lockWaiters(t *testing.T, s *store.Store, want int) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if n := pgtest.AdvisoryLockWaiters(ctx, t, s.Pool()); n != want {
			return fmt.Errorf("%d sessions wait for an advisory lock, want %d", n, want)
		}
		return nil
	}
}

// awaitLock waits for lockAsync's lock, and releases it; it fails t when
// the lock is not taken within 20 s (after what it says).
func awaitLock(t *testing.T, held <-chan func(), failed <-chan error, after string) {
	t.Helper()
	select {
	case unlock := <-held:
		unlock()
	case err := <-failed:
		t.Fatalf("LockApp %s: %v", after, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("the lock was not taken %s", after)
	}
}

// A wait that is given up returns the context's error and leaves nothing
// waiting or held.
func TestLockAppWaitEndsWithItsContext(t *testing.T) {
	s := newStore(t)
	unlock, err := s.LockApp(t.Context(), "acme", "web")
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, stopWaiting := context.WithCancel(t.Context())
	defer stopWaiting()
	held, failed := lockAsync(waitCtx, s, "acme", "web")
	platformtest.Eventually(t, time.Minute, "the second caller to wait for the lock", lockWaiters(t, s, 1))
	stopWaiting()
	select {
	case err := <-failed:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("LockApp after cancel: %v, want context.Canceled", err)
		}
	case u := <-held:
		u()
		t.Fatal("LockApp took the lock after its context was cancelled")
	case <-time.After(20 * time.Second):
		t.Fatal("LockApp did not return after its context was cancelled")
	}
	platformtest.Eventually(t, time.Minute, "the abandoned wait to go", lockWaiters(t, s, 0))
	unlock()
	again, err := s.LockApp(t.Context(), "acme", "web")
	if err != nil {
		t.Fatalf("LockApp after the holder unlocked: %v", err)
	}
	again()
}
