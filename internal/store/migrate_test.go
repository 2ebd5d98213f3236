package store_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
)

// catalogue describes the public schema: columns, constraints, indexes,
// triggers and functions, one per line, sorted.
const catalogue = `
SELECT coalesce(string_agg(x, E'\n' ORDER BY x), '') FROM (
	SELECT format('column %s.%s %s null=%s default=%s', table_name, column_name, data_type, is_nullable, column_default)
	  FROM information_schema.columns WHERE table_schema = 'public'
	UNION ALL
	SELECT format('constraint %s.%s %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
	  FROM pg_constraint WHERE connamespace = 'public'::regnamespace
	UNION ALL
	SELECT format('index %s', indexdef) FROM pg_indexes WHERE schemaname = 'public'
	UNION ALL
	SELECT format('trigger %s', pg_get_triggerdef(oid)) FROM pg_trigger WHERE NOT tgisinternal
	UNION ALL
	SELECT format('function %s', oid::regprocedure) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
) AS s(x)`

// schemaState is what a migration run leaves behind.
type schemaState struct {
	catalogue  string
	migrations []string // version, name, checksum and applied_at of each row
}

func readSchemaState(t *testing.T, dbURL string) schemaState {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var st schemaState
	if err := conn.QueryRow(ctx, catalogue).Scan(&st.catalogue); err != nil {
		t.Fatalf("reading the catalogue: %v", err)
	}
	rows, err := conn.Query(ctx,
		"SELECT format('%s %s %s %s', version, name, checksum, applied_at) FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatalf("reading schema_migrations: %v", err)
	}
	if st.migrations, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatalf("reading schema_migrations: %v", err)
	}
	return st
}

// migrationFiles lists the migrations in the source tree.
func migrationFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestMigrationsApplyOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.NewDatabase(t)

	s, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatalf("first Open: %v", err)
	}
	s.Close()
	first := readSchemaState(t, dbURL)

	files := migrationFiles(t)
	if len(first.migrations) != len(files) {
		t.Fatalf("schema_migrations has %d rows, want one per file (%v):\n%s", len(first.migrations), files, strings.Join(first.migrations, "\n"))
	}
	for i, f := range files {
		if !strings.Contains(first.migrations[i], " "+f+" ") {
			t.Errorf("schema_migrations row %d is %q, want it to name %s", i+1, first.migrations[i], f)
		}
	}
	for _, want := range []string{
		"column tenants.name", "column users.email", "column api_tokens.hash", "column ssh_keys.fingerprint",
		"column audit_log.details", "column schema_migrations.applied_at", "trigger CREATE TRIGGER audit_log_append_only",
	} {
		if !strings.Contains(first.catalogue, want) {
			t.Errorf("the catalogue lacks %q after migrating", want)
		}
	}

	s, err = store.Open(ctx, dbURL)
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	s.Close()
	second := readSchemaState(t, dbURL)
	if first.catalogue != second.catalogue {
		t.Errorf("the second Open changed the catalogue:\nbefore:\n%s\nafter:\n%s", first.catalogue, second.catalogue)
	}
	if !slices.Equal(first.migrations, second.migrations) {
		t.Errorf("the second Open changed schema_migrations:\nbefore:\n%s\nafter:\n%s",
			strings.Join(first.migrations, "\n"), strings.Join(second.migrations, "\n"))
	}
}

func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.NewDatabase(t)

	const n = 5
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			start.Wait()
			s, err := store.Open(ctx, dbURL)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	start.Done()
	done.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}

	st := readSchemaState(t, dbURL)
	if files := migrationFiles(t); len(st.migrations) != len(files) {
		t.Errorf("schema_migrations has %d rows, want %d:\n%s", len(st.migrations), len(files), strings.Join(st.migrations, "\n"))
	}
}

func TestOpenRefusesChangedMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, dbURL := newStoreURL(t)
	first := migrationFiles(t)[0]
	if _, err := s.Pool().Exec(ctx, "UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1"); err != nil {
		t.Fatal(err)
	}
	before := readSchemaState(t, dbURL)

	_, err := store.Open(ctx, dbURL)
	if err == nil || !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("Open after %s was edited: err = %v, want one naming it as changed", first, err)
	}
	if after := readSchemaState(t, dbURL); !slices.Equal(before.migrations, after.migrations) || before.catalogue != after.catalogue {
		t.Error("the refused Open changed the schema")
	}
}

func TestOpenRefusesUnknownMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, dbURL := newStoreURL(t)
	if _, err := s.Pool().Exec(ctx,
		"INSERT INTO schema_migrations (version, name, checksum) SELECT max(version) + 1, '9999_from_the_future.sql', 'x' FROM schema_migrations"); err != nil {
		t.Fatal(err)
	}
	_, err := store.Open(ctx, dbURL)
	if err == nil || !strings.Contains(err.Error(), "9999_from_the_future.sql") {
		t.Fatalf("Open on a newer schema: err = %v, want one naming the unknown migration", err)
	}
}

func TestOpenWithoutServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := store.Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "database none on 127.0.0.1:1") {
		t.Fatalf("err = %v, want one naming the database and server", err)
	}
	if _, err := store.Open(ctx, ""); err == nil {
		t.Fatal("Open with an empty URL succeeded")
	}
}
