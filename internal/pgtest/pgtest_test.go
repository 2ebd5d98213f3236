package pgtest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// databaseExists reports whether the server behind admin has database name.
func databaseExists(t *testing.T, admin, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	return exists
}

// checkDatabases creates two databases with p in a subtest, checks that they
// are distinct, empty and usable, and that they are gone after the subtest.
func checkDatabases(t *testing.T, p *provider) {
	t.Helper()
	var names [2]string
	t.Run("sub", func(t *testing.T) {
		ctx := t.Context()
		for i := range names {
			dbURL, err := p.newDatabase(t)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				t.Fatalf("connecting to the new database: %v", err)
			}
			var tables int
			if err := conn.QueryRow(ctx,
				"SELECT current_database(), (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')").Scan(&names[i], &tables); err != nil {
				t.Fatal(err)
			}
			if tables != 0 {
				t.Errorf("database %s has %d tables, want none", names[i], tables)
			}
			if _, err := conn.Exec(ctx, "CREATE TABLE t (v int)"); err != nil {
				t.Errorf("creating a table: %v", err)
			}
			// conn stays open on purpose: the drop must end sessions itself.
		}
		if names[0] == names[1] {
			t.Fatalf("both databases are %s", names[0])
		}
		if !strings.Contains(names[0], "sub") {
			t.Errorf("database name %s does not show the test's name", names[0])
		}
	})
	admin, err := p.adminURL()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if name != "" && databaseExists(t, admin, name) {
			t.Errorf("database %s still exists after its test ended", name)
		}
	}
}

func TestNewDatabase(t *testing.T) {
	checkDatabases(t, process)
}

func TestPrivateServerFallback(t *testing.T) {
	t.Setenv(EnvDatabaseURL, "")
	p := &provider{} // no machine servers to try
	checkDatabases(t, p)
	dir := p.privateDir
	if dir == "" {
		t.Fatal("no private server was started")
	}
	server := p.private
	if err := p.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case <-server.Done():
	default:
		t.Error("the private server still runs after close")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the private server's directory %s is still there (stat: %v)", dir, err)
	}
}

func TestExplicitURLDoesNotFallBack(t *testing.T) {
	t.Setenv(EnvDatabaseURL, "postgres://nobody@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	p := newProvider()
	_, err := p.adminURL()
	if err == nil || !strings.Contains(err.Error(), EnvDatabaseURL) {
		t.Fatalf("err = %v, want one naming %s", err, EnvDatabaseURL)
	}
	if p.private != nil {
		t.Error("a private server was started although a URL was given")
	}
}

func TestWithDatabase(t *testing.T) {
	tests := []struct{ admin, want string }{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/db1?sslmode=disable"},
		{"postgres://postgres@/postgres?host=/var/run/postgresql", "postgres://postgres@/db1?host=/var/run/postgresql"},
		{"postgresql://u:p%40ss@h/x", "postgresql://u:p%40ss@h/db1"},
		{"host=/tmp user=postgres dbname=postgres", "host=/tmp user=postgres dbname=postgres dbname=db1"},
	}
	for _, tt := range tests {
		got, err := withDatabase(tt.admin, "db1")
		if err != nil || got != tt.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tt.admin, got, err, tt.want)
		}
	}
}

func TestDatabaseName(t *testing.T) {
	long := strings.Repeat("TestSomethingVeryLong/With_Subtests ", 5)
	name, err := databaseName(long)
	if err != nil {
		t.Fatal(err)
	}
	if len(name) > 63 {
		t.Errorf("%s is %d bytes, more than PostgreSQL's 63", name, len(name))
	}
	if strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		t.Errorf("%s has characters that need quoting", name)
	}
}
