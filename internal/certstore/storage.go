package certstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of Options, those of certmagic's FileStorage: a held lock is
// refreshed every 5 seconds and taken over when it has not been refreshed for
// 10; waiters look again every second.
const (
	DefaultLockExpiry  = 10 * time.Second
	DefaultLockRefresh = 5 * time.Second
	DefaultLockPoll    = 1 * time.Second
)

// Options configure a Storage. Zero values take the defaults.
type Options struct {
	// LockExpiry is how long a lock stays held after its holder last
	// refreshed it. It bounds how long a lock whose holder died keeps others
	// waiting. Default DefaultLockExpiry.
	LockExpiry time.Duration
	// LockRefresh is how often a held lock's expiry is pushed forward; it
	// must be shorter than LockExpiry, and half of it or less leaves room for
	// a failed refresh. Default DefaultLockRefresh.
	LockRefresh time.Duration
	// LockPoll is how often Lock looks again at a lock someone else holds.
	// Default DefaultLockPoll.
	LockPoll time.Duration
	// Holder names this process in the lock rows, for people reading
	// certmagic_locks. Default <hostname>/<pid>.
	Holder string
	// Logger receives what the background refresher has to say (a refresh
	// failed, a lock was lost) when the context given to Lock carries no
	// logger. The zero Logger discards.
	Logger logr.Logger
}

// complete fills in the defaults.
func (o *Options) complete() {
	if o.LockExpiry == 0 {
		o.LockExpiry = DefaultLockExpiry
	}
	if o.LockRefresh == 0 {
		o.LockRefresh = min(DefaultLockRefresh, o.LockExpiry/2)
	}
	if o.LockPoll == 0 {
		o.LockPoll = min(DefaultLockPoll, o.LockExpiry/2)
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = host + "/" + strconv.Itoa(os.Getpid())
	}
}

// validate checks completed options.
func (o *Options) validate() error {
	if o.LockExpiry <= 0 || o.LockRefresh <= 0 || o.LockPoll <= 0 {
		return fmt.Errorf("lock expiry %v, refresh %v and poll %v must be positive", o.LockExpiry, o.LockRefresh, o.LockPoll)
	}
	if o.LockRefresh >= o.LockExpiry {
		return fmt.Errorf("lock refresh %v must be shorter than lock expiry %v", o.LockRefresh, o.LockExpiry)
	}
	return nil
}

// Storage is certmagic's Storage in PostgreSQL. It follows the rules written
// on certmagic.Storage:
//
//   - Keys are slash-separated paths without empty components; Store refuses
//     others. A "directory" is a prefix of keys, component-wise ("a" is a
//     directory of "a/b", not of "ab/c"); it has no row of its own.
//   - Load, Stat and List of a key that is neither a file nor a directory
//     return an error for which errors.Is(err, fs.ErrNotExist) holds. Delete
//     of such a key returns nil; Delete of a directory removes everything
//     under it, in one statement.
//   - List with recursive=false returns the direct children of a directory,
//     files and directories, as full keys; with recursive=true, every file
//     and directory under it, the way FileStorage walks. Both are sorted.
//   - Stat of a file reports its size and the database's time of its last
//     Store; of a directory, IsTerminal false, size 0 and the latest Store
//     under it.
//   - Lock blocks until the named lock is obtained or ctx is done; locks are
//     exclusive across Storage values and processes sharing the database.
//     See the package documentation for expiry, refresh and takeover.
//     Unlock releases a lock only if this Storage holds it.
//
// Unlike FileStorage, a key may be a file and a directory at once (Store of
// "a/b" when "a" is a file succeeds); Stat and Exists then see the file,
// List and Delete see both. Storage does not implement certmagic's
// LockLeaseRenewer: the refresher keeps a lock as long as its holder lives,
// and the leases certmagic asks for (hours, between retries) would keep a
// dead holder's lock that long.
//
// Every method honours its context. A Storage is safe for concurrent use.
type Storage struct {
	pool *pgxpool.Pool
	opts Options
	name string // for String

	mu     sync.Mutex
	held   map[string]*heldLock // by lock name
	closed bool
}

var (
	_ certmagic.Storage   = (*Storage)(nil)
	_ certmagic.TryLocker = (*Storage)(nil)
)

// New returns a Storage over the certmagic tables of the database behind
// pool (internal/store's Store.Pool). The tables must exist: store.Open
// creates them.
func New(pool *pgxpool.Pool, opts Options) (*Storage, error) {
	if pool == nil {
		return nil, errors.New("creating certificate storage: no database pool")
	}
	opts.complete()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("creating certificate storage: %w", err)
	}
	c := pool.Config().ConnConfig
	return &Storage{
		pool: pool,
		opts: opts,
		name: fmt.Sprintf("certstore.Storage(database %s on %s:%d)", c.Database, c.Host, c.Port),
		held: make(map[string]*heldLock),
	}, nil
}

// String names the database, for certmagic's logs.
func (s *Storage) String() string { return s.name }

// validKey reports whether key is a path certmagic may store: components
// separated by single slashes, none empty. The table checks the same.
func validKey(key string) bool {
	return key != "" && !slices.Contains(strings.Split(key, "/"), "")
}

// under returns the bounds of the keys under directory dir: in byte order
// (the column's collation is C) they are exactly [dir/, dir0), '0' being the
// byte after '/'.
func under(dir string) (from, to string) { return dir + "/", dir + "0" }

// notExist is the error for a key that is neither a file nor a directory.
func notExist(op, key string) error {
	return &fs.PathError{Op: op, Path: key, Err: fs.ErrNotExist}
}

// Store puts value at key, replacing any value there.
func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	if !validKey(key) {
		return fmt.Errorf("storing %q: not a key: keys are slash-separated paths without empty components", key)
	}
	if value == nil {
		value = []byte{} // nil would be NULL
	}
	if _, err := s.pool.Exec(ctx,
		`INSERT INTO certmagic_keys (key, value, modified) VALUES ($1, $2, now())
		 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, modified = EXCLUDED.modified`,
		key, value); err != nil {
		return fmt.Errorf("storing %s: %w", key, err)
	}
	return nil
}

// Load returns the value at key.
func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	var value []byte
	err := s.pool.QueryRow(ctx, "SELECT value FROM certmagic_keys WHERE key = $1", key).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notExist("load", key)
	}
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", key, err)
	}
	return value, nil
}

// Delete removes key and, when it is a directory, everything under it. A key
// that does not exist is not an error.
func (s *Storage) Delete(ctx context.Context, key string) error {
	if !validKey(key) {
		return fmt.Errorf("deleting %q: not a key", key)
	}
	from, to := under(key)
	if _, err := s.pool.Exec(ctx,
		"DELETE FROM certmagic_keys WHERE key = $1 OR (key >= $2 AND key < $3)", key, from, to); err != nil {
		return fmt.Errorf("deleting %s: %w", key, err)
	}
	return nil
}

// Exists reports whether key is a file or a directory. It reports false when
// the database cannot be asked, and logs why.
func (s *Storage) Exists(ctx context.Context, key string) bool {
	from, to := under(key)
	var exists bool
	if err := s.pool.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM certmagic_keys WHERE key = $1 OR (key >= $2 AND key < $3))",
		key, from, to).Scan(&exists); err != nil {
		s.logger(ctx).Error(err, "Checking whether a key exists", "key", key)
		return false
	}
	return exists
}

// Stat describes key, a file or a directory.
func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	from, to := under(key)
	info := certmagic.KeyInfo{Key: key}
	// The file itself if there is one, else the latest change under it.
	err := s.pool.QueryRow(ctx,
		`SELECT key = $1, octet_length(value), modified FROM certmagic_keys
		 WHERE key = $1 OR (key >= $2 AND key < $3)
		 ORDER BY key = $1 DESC, modified DESC LIMIT 1`,
		key, from, to).Scan(&info.IsTerminal, &info.Size, &info.Modified)
	if errors.Is(err, pgx.ErrNoRows) {
		return certmagic.KeyInfo{}, notExist("stat", key)
	}
	if err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("describing %s: %w", key, err)
	}
	if !info.IsTerminal {
		info.Size = 0
	}
	return info, nil
}

// List returns the keys under dir ("" is the root): its direct children, or
// with recursive everything under it, files and directories, sorted. A file
// has nothing under it; a key that is neither is fs.ErrNotExist.
func (s *Storage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	var keys []string
	var err error
	if recursive {
		keys, err = s.listAll(ctx, dir)
	} else {
		keys, err = s.listChildren(ctx, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	if len(keys) == 0 && dir != "" {
		var file bool
		if err := s.pool.QueryRow(ctx,
			"SELECT EXISTS (SELECT 1 FROM certmagic_keys WHERE key = $1)", dir).Scan(&file); err != nil {
			return nil, fmt.Errorf("listing %s: %w", dir, err)
		}
		if !file {
			return nil, notExist("list", dir)
		}
	}
	return keys, nil
}

// listChildren returns the first components under dir as full keys. The
// database does the grouping, so that listing a large directory does not
// read every key below it.
func (s *Storage) listChildren(ctx context.Context, dir string) ([]string, error) {
	query := "SELECT DISTINCT split_part(key, '/', 1) FROM certmagic_keys"
	args := []any{}
	if dir != "" {
		from, to := under(dir)
		query = "SELECT DISTINCT $1::text || split_part(substr(key, length($1::text) + 1), '/', 1) FROM certmagic_keys WHERE key >= $1::text AND key < $2::text"
		args = []any{from, to}
	}
	keys, err := s.queryStrings(ctx, query, args...)
	slices.Sort(keys)
	return keys, err
}

// listAll returns every file under dir and the directories between.
func (s *Storage) listAll(ctx context.Context, dir string) ([]string, error) {
	query := "SELECT key FROM certmagic_keys"
	args := []any{}
	prefix := ""
	if dir != "" {
		from, to := under(dir)
		query += " WHERE key >= $1 AND key < $2"
		args = []any{from, to}
		prefix = from
	}
	files, err := s.queryStrings(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(files))
	var keys []string
	for _, f := range files {
		// Each directory between dir and f, then f.
		for i := len(prefix); i < len(f); i++ {
			if f[i] == '/' && !seen[f[:i]] {
				seen[f[:i]] = true
				keys = append(keys, f[:i])
			}
		}
		if !seen[f] {
			seen[f] = true
			keys = append(keys, f)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// queryStrings returns the one text column of query's rows.
func (s *Storage) queryStrings(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// logger returns the logger from ctx, or the one in Options.
func (s *Storage) logger(ctx context.Context) logr.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l
	}
	return s.opts.Logger
}
