// Package certstore keeps certmagic's storage in the platform's PostgreSQL
// database, so that every edge replica serves the same certificates, uses the
// same ACME accounts and takes the same locks: a certificate is obtained by
// one replica and loaded by the others, not obtained once per replica.
//
// It owns the rows of two tables that internal/store's migrations create:
// certmagic_keys (key, value, modified) holds certmagic's files under their
// slash-separated keys, and certmagic_locks (name, token, holder, locked_at,
// expires) holds its locks. It hands the edge router a *Storage, which
// implements certmagic.Storage and certmagic.TryLocker and goes into
// certmagic.Config.Storage of every replica.
//
// Locks are leases on the database's clock: Lock inserts a row that expires
// Options.LockExpiry later, a background refresher pushes the expiry forward
// every Options.LockRefresh while the lock is held, and a lock whose holder
// stopped refreshing (it died, or lost the database) may be taken over once
// its expiry has passed. Refreshes and Unlock apply only to the holder's own
// acquisition, by a random token, so a holder that lost its lock never
// releases its successor's.
//
// Package storagetest holds the suite that checks certmagic's Storage rules;
// it runs against this Storage and against certmagic's FileStorage.
package certstore
