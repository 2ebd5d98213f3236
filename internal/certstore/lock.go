package certstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"bex.co/bex/internal/every"
)

// Errors that the lock methods' errors wrap; test for them with errors.Is.
var (
	// ErrNotHeld: Unlock of a lock this Storage does not hold, because it
	// never took it, released it already, or lost it: it went stale and
	// someone else took it over.
	ErrNotHeld = errors.New("lock not held")
	// ErrClosed: Lock or TryLock after Close.
	ErrClosed = errors.New("certificate storage closed")
)

// maxRefreshRestarts is how often a lock's refresher is restarted after a
// panic before it gives up and lets the lock go stale.
const maxRefreshRestarts = 3

// heldLock is a lock this Storage holds and refreshes.
type heldLock struct {
	token string
	stop  context.CancelFunc
	done  chan struct{} // closed when the refresher has returned
}

// Lock obtains the named lock, waiting while someone else holds it, until it
// is released or goes stale, or until ctx is done. A lock this Storage holds
// is refreshed in the background until Unlock or Close.
func (s *Storage) Lock(ctx context.Context, name string) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for lock %s: %w", name, ctx.Err())
		case <-timer.C:
		}
		ok, err := s.TryLock(ctx, name)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		timer.Reset(s.opts.LockPoll)
	}
}

// TryLock obtains the named lock if nobody holds it or its holder let it go
// stale, and reports whether it did. It does not wait.
func (s *Storage) TryLock(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, errors.New("locking: the lock has no name")
	}
	if s.isClosed() {
		return false, fmt.Errorf("locking %s: %w", name, ErrClosed)
	}
	token := rand.Text()
	// One statement: a new row, or the takeover of an expired one. Rows
	// locked by a concurrent taker are re-checked after it commits, so two
	// takers of one stale lock never both succeed.
	tag, err := s.pool.Exec(ctx,
		`INSERT INTO certmagic_locks AS l (name, token, holder, locked_at, expires)
		 VALUES ($1, $2, $3, now(), now() + make_interval(secs => $4))
		 ON CONFLICT (name) DO UPDATE
		 SET token = EXCLUDED.token, holder = EXCLUDED.holder, locked_at = EXCLUDED.locked_at, expires = EXCLUDED.expires
		 WHERE l.expires < now()`,
		name, token, s.opts.Holder, s.opts.LockExpiry.Seconds())
	if err != nil {
		// If the insert committed all the same, nobody refreshes it: the
		// lock goes stale after LockExpiry.
		return false, fmt.Errorf("locking %s: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if !s.hold(ctx, name, token) {
		err := fmt.Errorf("locking %s: %w", name, ErrClosed)
		if relErr := s.release(context.WithoutCancel(ctx), name, token); relErr != nil {
			err = errors.Join(err, relErr)
		}
		return false, err
	}
	return true, nil
}

// Unlock releases the named lock if this Storage holds it, and stops
// refreshing it. The error wraps ErrNotHeld when this Storage does not hold
// it; when the database cannot be reached the lock goes stale after
// LockExpiry.
func (s *Storage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	h := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if h == nil {
		return fmt.Errorf("unlocking %s: %w: this storage did not take it or released it already", name, ErrNotHeld)
	}
	h.stop()
	<-h.done
	return s.release(ctx, name, h.token)
}

// release deletes the lock row of one acquisition.
func (s *Storage) release(ctx context.Context, name, token string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM certmagic_locks WHERE name = $1 AND token = $2", name, token)
	if err != nil {
		return fmt.Errorf("unlocking %s (it goes stale in %v): %w", name, s.opts.LockExpiry, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("unlocking %s: %w: it went stale and was taken over", name, ErrNotHeld)
	}
	return nil
}

// Close stops refreshing the locks this Storage holds, without releasing
// them: they go stale after LockExpiry and others take them over then, as if
// this process had died. Release them first with Unlock (certmagic's
// CleanUpOwnLocks does) to hand them over at once. After Close, Lock and
// TryLock fail with ErrClosed; the other methods work on, and Unlock still
// releases a lock that nobody has taken over.
func (s *Storage) Close() {
	s.mu.Lock()
	s.closed = true
	held := make([]*heldLock, 0, len(s.held))
	for _, h := range s.held {
		held = append(held, h)
	}
	s.mu.Unlock()
	for _, h := range held {
		h.stop()
		<-h.done
	}
}

func (s *Storage) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// hold records an acquired lock and starts refreshing it. It reports false,
// starting nothing, when the Storage is closed.
func (s *Storage) hold(ctx context.Context, name, token string) bool {
	log := s.logger(ctx).WithValues("lock", name, "storage", s.name)
	// The refresher keeps ctx's values but outlives its cancellation: the
	// lock is held until Unlock, not until the caller's context ends.
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h := &heldLock{token: token, stop: stop, done: make(chan struct{})}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		stop()
		return false
	}
	if old := s.held[name]; old != nil {
		// An earlier acquisition of ours that went stale and was taken
		// over; its refresher stops by itself, sooner now.
		old.stop()
	}
	s.held[name] = h
	go s.keepFresh(rctx, log, name, h)
	return true
}

// keepFresh refreshes a held lock every LockRefresh until ctx ends or the
// lock is found taken over. A panic restarts it, a few times.
func (s *Storage) keepFresh(ctx context.Context, log logr.Logger, name string, h *heldLock) {
	defer close(h.done)
	refresh := func() bool {
		held, err := s.refresh(ctx, name, h.token)
		switch {
		case ctx.Err() != nil:
			return false
		case err != nil:
			log.Error(err, "Could not refresh lock; retrying", "expiry", s.opts.LockExpiry)
		case !held:
			log.Error(nil, "Lost lock: it went stale and was taken over")
			return false
		}
		return true
	}
	if !every.Run(ctx, log, "Lock refresher", s.opts.LockRefresh, maxRefreshRestarts, refresh) {
		log.Error(nil, "Lock refresher keeps panicking; the lock will go stale", "expiry", s.opts.LockExpiry)
	}
}

// refresh pushes the expiry of one acquisition forward and reports whether
// it is still held.
func (s *Storage) refresh(ctx context.Context, name, token string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.LockRefresh)
	defer cancel()
	tag, err := s.pool.Exec(ctx,
		"UPDATE certmagic_locks SET expires = now() + make_interval(secs => $3) WHERE name = $1 AND token = $2",
		name, token, s.opts.LockExpiry.Seconds())
	if err != nil {
		return false, fmt.Errorf("refreshing lock %s: %w", name, err)
	}
	return tag.RowsAffected() == 1, nil
}
