package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bex.co/bex/internal/pgserver"
)

// EnvDatabaseURL names the variable holding an admin URL of the server that
// tests should use.
const EnvDatabaseURL = "BEX_TEST_DATABASE_URL"

// timeout bounds each step: probing a server, starting one, creating or
// dropping a database.
const timeout = 2 * time.Minute

// process is the server every test in this process uses.
var process = newProvider()

// NewDatabase creates an empty database for t on the chosen server and
// returns its URL (or keyword/value string, when BEX_TEST_DATABASE_URL is
// one). The database is dropped, sessions and all, when t ends. It fails t
// when no server is available, saying what to install or set.
func NewDatabase(t testing.TB) string {
	t.Helper()
	dbURL, err := process.newDatabase(t)
	if err != nil {
		t.Fatal(err)
	}
	return dbURL
}

// Main runs the tests and then stops the private server, if one was
// started, and removes its files. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// The test binary exits with the result of the tests.
func Main(m *testing.M) {
	m.Run()
	if err := process.close(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
	}
}

// provider chooses a server once and creates databases on it.
type provider struct {
	// candidates are admin URLs of servers the machine may run.
	candidates []string

	once  sync.Once
	admin string
	err   error

	mu         sync.Mutex
	private    *pgserver.Server
	privateDir string
}

func newProvider() *provider {
	return &provider{candidates: []string{
		"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"postgres://postgres@/postgres?host=/var/run/postgresql&sslmode=disable",
	}}
}

// adminURL returns the URL of a role that may create databases, choosing the
// server on first use.
func (p *provider) adminURL() (string, error) {
	p.once.Do(func() { p.admin, p.err = p.choose() })
	return p.admin, p.err
}

func (p *provider) choose() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		if err := probe(ctx, u); err != nil {
			return "", fmt.Errorf("pgtest: %s is set, but its server does not work: %w", EnvDatabaseURL, err)
		}
		return u, nil
	}

	var tried []string
	for _, u := range p.candidates {
		err := probe(ctx, u)
		if err == nil {
			return u, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", u, err))
	}

	u, err := p.startPrivate(ctx)
	if err == nil {
		return u, nil
	}
	tried = append(tried, fmt.Sprintf("a private server: %v", err))
	return "", fmt.Errorf("pgtest: no PostgreSQL server for tests: install one with `apt-get install postgresql`, "+
		"or set %s to the URL of a role that may create databases\ntried:\n  %s",
		EnvDatabaseURL, strings.Join(tried, "\n  "))
}

// startPrivate starts a throwaway server in a temporary directory.
func (p *provider) startPrivate(ctx context.Context) (string, error) {
	dir, err := os.MkdirTemp("", "bex-pgtest-")
	if err != nil {
		return "", fmt.Errorf("creating a directory for it: %w", err)
	}
	// When root, the server runs as postgres, which must enter dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("opening %s to the server's user: %w", dir, err)
	}
	s, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "data"), Ephemeral: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	p.mu.Lock()
	p.private, p.privateDir = s, dir
	p.mu.Unlock()
	return s.URL("postgres"), nil
}

// close stops the private server, if any, and removes its directory.
func (p *provider) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.private == nil {
		return nil
	}
	err := p.private.Stop()
	if rmErr := os.RemoveAll(p.privateDir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("removing the private server's files: %w", rmErr))
	}
	p.private = nil
	return err
}

// newDatabase creates a database for t and registers its removal.
func (p *provider) newDatabase(t testing.TB) (string, error) {
	admin, err := p.adminURL()
	if err != nil {
		return "", err
	}
	name, err := databaseName(t.Name())
	if err != nil {
		return "", err
	}
	ident := pgx.Identifier{name}.Sanitize()
	// template0 rather than template1: nobody connects to it, so parallel
	// creates cannot find it in use.
	if err := execAdmin(admin, "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("pgtest: creating database %s: %w", name, err)
	}
	t.Cleanup(func() {
		if err := execAdmin(admin, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return withDatabase(admin, name)
}

// probe checks that adminURL reaches a server as a role that may create
// databases.
func probe(ctx context.Context, adminURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var role string
	var may bool
	if err := conn.QueryRow(ctx,
		"SELECT rolname, rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user").Scan(&role, &may); err != nil {
		return fmt.Errorf("reading the role's privileges: %w", err)
	}
	if !may {
		return fmt.Errorf("role %s may not create databases", role)
	}
	return nil
}

// execAdmin runs one statement on a fresh admin connection. CREATE and DROP
// DATABASE cannot run in a transaction, so there is no pool to share.
func execAdmin(adminURL, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// databaseName returns a new database name that shows which test made it:
// bext_<test name>_<random>, within PostgreSQL's 63 bytes.
func databaseName(testName string) (string, error) {
	var b strings.Builder
	b.WriteString("bext_")
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 45 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	random := make([]byte, 6)
	if _, err := rand.Read(random); err != nil {
		return "", fmt.Errorf("pgtest: naming a database: %w", err)
	}
	b.WriteByte('_')
	b.WriteString(hex.EncodeToString(random))
	return b.String(), nil
}

// withDatabase returns adminURL pointing at database name instead. URLs keep
// their form; keyword/value strings get a dbname that overrides theirs.
func withDatabase(adminURL, name string) (string, error) {
	if !strings.HasPrefix(adminURL, "postgres://") && !strings.HasPrefix(adminURL, "postgresql://") {
		return adminURL + " dbname=" + name, nil
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", fmt.Errorf("pgtest: parsing admin URL: %w", err)
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String(), nil
}
