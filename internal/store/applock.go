package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// appLockClass is the first key of every app lock (pg_advisory_lock(int,
// int)); the second is a hash of the app's name. The two-key form keeps app
// locks apart from the migration lock, which uses the one-key form.
const appLockClass int32 = 0x62657861 // "bexa"

// LockApp takes the lock of one app, shared by every process that uses this
// database: deploys, rollbacks and removals of an app then run one at a time
// across the git receiver, the web API and the controller manager, whichever
// process each runs in.
//
// The lock is a session-level advisory lock on a connection of its own,
// outside the pool, so that holding it through a build takes no connection
// from other work, and a process that dies releases its locks with its
// connections. LockApp waits until the lock is free or ctx ends; it then
// returns ctx's error and holds nothing. Names that hash alike share a lock,
// which only makes them wait for each other.
//
// unlock releases the lock and closes the connection; it must be called
// exactly once. It cannot fail the caller: if the unlock statement fails,
// closing the connection releases the lock.
func (s *Store) LockApp(ctx context.Context, tenant, app string) (unlock func(), err error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("connecting for the lock of app %s/%s: %w", tenant, app, err)
	}
	key := tenant + "/" + app
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, hashtext($2))", appLockClass, key); err != nil {
		// The lock may have been granted just as ctx ended: closing the
		// session releases it either way.
		_ = conn.Close(context.Background())
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = errors.Join(ctxErr, err)
		}
		return nil, fmt.Errorf("waiting for the lock of app %s/%s: %w", tenant, app, err)
	}
	return func() {
		// Unlock explicitly, then close: the lock is gone either way.
		_, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1, hashtext($2))", appLockClass, key)
		_ = conn.Close(context.Background())
	}, nil
}
