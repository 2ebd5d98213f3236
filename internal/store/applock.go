package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// appLockClass is the first key of every app lock (pg_advisory_lock(int,
// int)); the second is a hash of the app's name. The two-key form keeps app
// locks apart from the migration lock, which uses the one-key form.
const appLockClass int32 = 0x62657861 // "bexa"

const (
	// lockStatementTimeout bounds each statement on the connection that
	// holds the locks. These are quick; one that takes longer means the
	// connection is in trouble, and it is closed (releasing the locks).
	lockStatementTimeout = 10 * time.Second
	// lockWaitConns is how many connections of a process may wait for app
	// locks that another session holds.
	lockWaitConns = 2
	// lockWaitSlice is how long one wait on a waiting connection lasts
	// (lock_timeout) before the waiter tries again and gives the
	// connection to the next, so that a few long waits do not hold up
	// others when more callers wait than there are connections.
	lockWaitSlice = 2 * time.Second
)

// LockApp takes the lock of one app, shared by every process that uses this
// database: deploys, rollbacks and removals of an app then run one at a time
// across the git receiver, the web API and the controller manager, whichever
// process each runs in.
//
// The lock is a session-level advisory lock. Every lock a process holds is
// held on one connection of its own, outside the pool: holding locks
// through builds takes no connection from other work and no connection per
// lock, and a process that dies releases its locks with its connection. A
// caller that finds the lock taken waits on one of a few connections kept
// for waiting (two per process; more waiters take turns). LockApp waits
// until the lock is free or ctx ends; it then returns ctx's error and holds
// nothing. Names that hash alike share a lock, which only makes them wait
// for each other.
//
// When the holding connection breaks, every lock of the process is
// released, as when the process dies; holders are not told, and the next
// LockApp connects again.
//
// unlock releases the lock; it must be called exactly once. It cannot fail
// the caller: if the unlock statement fails, the holding connection is
// closed, which releases the lock.
func (s *Store) LockApp(ctx context.Context, tenant, app string) (unlock func(), err error) {
	unlock, err = s.lock(ctx, tenant+"/"+app)
	if err != nil {
		return nil, fmt.Errorf("app %s/%s: %w", tenant, app, err)
	}
	return unlock, nil
}

// lock takes the lock key, as LockApp does, on the process's lock
// connection: no connection of the pool is held while it waits or while
// the lock is held.
func (s *Store) lock(ctx context.Context, key string) (unlock func(), err error) {
	for {
		unlock, err := s.locks.try(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("taking the lock: %w", err)
		}
		if unlock != nil {
			return unlock, nil
		}
		if err := s.locks.waitFree(ctx, key); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
				err = errors.Join(ctxErr, err)
			}
			return nil, fmt.Errorf("waiting for the lock: %w", err)
		}
	}
}

// appLocks holds a process's app locks on one connection.
type appLocks struct {
	connConfig *pgx.ConnConfig
	// waiters are the connections on which callers wait for a lock that
	// another session holds.
	waiters *pgxpool.Pool

	mu   sync.Mutex
	conn *pgx.Conn
	// gen counts the holding connections: a lock taken on an earlier one
	// is gone.
	gen  int
	held map[string]*heldLock
}

// heldLock is one lock held by this process.
type heldLock struct{ gen int }

func newAppLocks(poolConfig *pgxpool.Config) (*appLocks, error) {
	cfg := poolConfig.Copy()
	cfg.MaxConns, cfg.MinConns = lockWaitConns, 0
	cfg.MaxConnIdleTime = time.Minute
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = fmt.Sprint(lockWaitSlice.Milliseconds())
	waiters, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the pool of lock waiters: %w", err)
	}
	return &appLocks{connConfig: poolConfig.ConnConfig.Copy(), waiters: waiters, held: map[string]*heldLock{}}, nil
}

// try takes key's lock on the holding connection if nobody holds it, and
// returns its unlock; it returns nil and no error when the lock is taken,
// in this process or another.
func (l *appLocks) try(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.held[key]; h != nil && h.gen == l.gen {
		// Taken in this process, unless the holding connection is gone.
		if err := l.exec(func(ctx context.Context, c *pgx.Conn) error { _, err := c.Exec(ctx, "SELECT 1"); return err }); err == nil {
			return nil, nil
		}
	}
	var got bool
	for attempt := 0; ; attempt++ {
		if l.conn == nil {
			conn, err := pgx.ConnectConfig(ctx, l.connConfig.Copy())
			if err != nil {
				return nil, fmt.Errorf("connecting: %w", err)
			}
			l.conn = conn
		}
		err := l.exec(func(ctx context.Context, c *pgx.Conn) error {
			return c.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, hashtext($2))", appLockClass, key).Scan(&got)
		})
		if err == nil {
			break
		}
		// A connection that broke while idle fails its next statement:
		// one more try on a new one.
		if attempt > 0 || ctx.Err() != nil {
			return nil, err
		}
	}
	if !got {
		return nil, nil
	}
	h := &heldLock{gen: l.gen}
	l.held[key] = h
	var once sync.Once
	return func() { once.Do(func() { l.unlock(key, h) }) }, nil
}

// unlock releases h, key's lock, unless the connection it was held on is
// gone.
func (l *appLocks) unlock(key string, h *heldLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[key] != h {
		return
	}
	delete(l.held, key)
	if h.gen != l.gen || l.conn == nil {
		return
	}
	_ = l.exec(func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SELECT pg_advisory_unlock($1, hashtext($2))", appLockClass, key)
		return err
	})
}

// exec runs f on the holding connection, which must be open, with l.mu
// held. The statement does not end with its caller's context: cancelling
// it would close the connection and release every lock on it. When f
// fails, the connection is closed and every lock on it is released.
func (l *appLocks) exec(f func(context.Context, *pgx.Conn) error) error {
	if l.conn == nil {
		return errors.New("not connected")
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockStatementTimeout)
	defer cancel()
	err := f(ctx, l.conn)
	if err != nil {
		l.dropLocked()
	}
	return err
}

// dropLocked closes the holding connection, with l.mu held.
func (l *appLocks) dropLocked() {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = l.conn.Close(ctx)
	l.conn = nil
	l.gen++
}

// waitFree returns once key's lock was free for a moment (it takes and
// releases the lock on a waiting connection), after lockWaitSlice of
// waiting, or with ctx's error when ctx ends.
func (l *appLocks) waitFree(ctx context.Context, key string) error {
	conn, err := l.waiters.Acquire(ctx)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1, hashtext($2))", appLockClass, key)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: the slice ended
		conn.Release()
		return nil
	}
	if err != nil {
		// The lock may have been granted just as ctx ended: closing the
		// session releases it either way.
		_ = conn.Hijack().Close(context.Background())
		return err
	}
	unlockCtx, cancel := context.WithTimeout(context.Background(), lockStatementTimeout)
	defer cancel()
	if _, err := conn.Exec(unlockCtx, "SELECT pg_advisory_unlock($1, hashtext($2))", appLockClass, key); err != nil {
		_ = conn.Hijack().Close(context.Background())
		return nil
	}
	conn.Release()
	return nil
}

// close releases every lock and closes the connections.
func (l *appLocks) close() {
	l.mu.Lock()
	l.dropLocked()
	l.mu.Unlock()
	l.waiters.Close()
}
