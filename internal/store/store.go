package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors that the store's errors wrap; test for them with errors.Is. The
// message around them says what was missing, taken or wrong.
var (
	// ErrNotFound: no such row, or none that the caller's tenant owns.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique name, email or fingerprint is already taken.
	ErrConflict = errors.New("already exists")
	// ErrInvalid: an argument is malformed, such as a tenant name that is
	// not a DNS label or an SSH key that does not parse.
	ErrInvalid = errors.New("invalid")
	// ErrUnauthenticated: a token secret is malformed, unknown or revoked.
	// Which of these is not said.
	ErrUnauthenticated = errors.New("unauthenticated")
)

// Store is the PostgreSQL store. It is safe for concurrent use.
//
// The connections a Store opens are bounded, whatever the number of log
// followers and app locks: the pool for its work, followReaders for the
// reads of log followers, one connection that LISTENs for every follower
// (notifier), one that holds every app lock, and lockWaitConns on which
// callers wait for a lock taken elsewhere.
type Store struct {
	pool *pgxpool.Pool
	// followReaders serves the reads of log followers, apart from the
	// pool, so that followers never starve the writers they wait for.
	followReaders *pgxpool.Pool
	notifier      *notifier
	locks         *appLocks
	limits        Limits
}

// DefaultBuildLogLines is how many lines of a build's log are kept unless
// Limits say otherwise: the last 10,000.
const DefaultBuildLogLines = 10000

// MaxBuildLogLineBytes is the longest line a build's log stores; the rest of
// a longer line is cut, and the line says so.
const MaxBuildLogLineBytes = 8 << 10

// Limits bound what one tenant's activity stores. Zero fields take the
// defaults.
type Limits struct {
	// BuildLogLines is how many lines of one build's log are kept: past
	// it, the oldest lines are deleted as new ones come, and the log starts
	// with a line saying how many were dropped and why. Default
	// DefaultBuildLogLines.
	BuildLogLines int
}

func (l Limits) withDefaults() Limits {
	if l.BuildLogLines <= 0 {
		l.BuildLogLines = DefaultBuildLogLines
	}
	return l
}

// WithLimits returns a Store on the same connections, notifier and app
// locks that applies l. Close one of them only: it closes both.
func (s *Store) WithLimits(l Limits) *Store {
	c := *s
	c.limits = l.withDefaults()
	return &c
}

// DefaultConnectTimeout bounds each new connection to the database, unless
// the URL sets connect_timeout: a server that takes connections and never
// answers (hung, or its port taken by something else) fails a request as
// unavailable after it, instead of holding the request until the caller
// gives up.
const DefaultConnectTimeout = 5 * time.Second

// followReaderConns is how many connections the reads of a process's log
// followers share.
const followReaderConns = 4

// Open connects to the database at databaseURL (a postgres:// URL or a
// keyword/value string), applies the migrations it has not applied yet, and
// returns the store. Processes that open one database at the same time apply
// each migration once. Open fails if the database holds a migration this
// binary does not know or one whose content has changed.
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	if databaseURL == "" {
		return nil, errors.New("opening store: database URL is empty")
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("creating connection pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to %s: %w", describe(cfg), err)
	}
	migrations, err := loadMigrations()
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := migrate(ctx, pool, migrations); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrating %s: %w", describe(cfg), err)
	}
	readersConfig := pool.Config()
	readersConfig.MaxConns, readersConfig.MinConns = followReaderConns, 0
	readersConfig.MaxConnIdleTime = time.Minute
	readers, err := pgxpool.NewWithConfig(ctx, readersConfig)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("creating the pool of log followers: %w", err)
	}
	locks, err := newAppLocks(pool.Config())
	if err != nil {
		readers.Close()
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool, followReaders: readers, notifier: newNotifier(pool.Config().ConnConfig), locks: locks, limits: Limits{}.withDefaults()}, nil
}

// Close closes the store's connections, waiting for those in use, and
// releases the app locks it holds.
func (s *Store) Close() {
	s.notifier.stop()
	s.locks.close()
	s.followReaders.Close()
	s.pool.Close()
}

// Pool returns the connection pool, for packages that keep their own tables
// in this database and for tests.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// describe names a database for error messages, without its password.
func describe(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("database %s on %s:%d as %s", c.Database, c.Host, c.Port, c.User)
}

// PostgreSQL error codes the store turns into its own errors.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
)

// constraintViolated returns the name of the constraint err violated when
// err is a PostgreSQL error with the given code.
func constraintViolated(err error, code string) (string, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == code {
		return pgErr.ConstraintName, true
	}
	return "", false
}

// nullable turns an empty ID into SQL NULL.
func nullable(id string) any {
	if id == "" {
		return nil
	}
	return id
}

// orEmpty turns a NULL column scanned into a *string into "".
func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// isUUID reports whether s is a UUID in its canonical text form. IDs that
// are not would make PostgreSQL fail the whole statement; the store answers
// ErrNotFound for them instead.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
