package store

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bex.co/bex/internal/pgtest"
)

func TestReadMigrations(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    []string
		errPart string
	}{
		{
			name: "in order",
			fsys: fstest.MapFS{"0002_b.sql": file("B"), "0001_a.sql": file("A"), "README.md": file("-")},
			want: []string{"0001_a.sql", "0002_b.sql"},
		},
		{name: "gap", fsys: fstest.MapFS{"0001_a.sql": file("A"), "0003_c.sql": file("C")}, errPart: "0003_c.sql: expected number 0002"},
		{name: "not from one", fsys: fstest.MapFS{"0002_b.sql": file("B")}, errPart: "expected number 0001"},
		{name: "duplicate", fsys: fstest.MapFS{"0001_a.sql": file("A"), "0001_b.sql": file("B")}, errPart: "0001_b.sql: expected number 0002"},
		{name: "bad name", fsys: fstest.MapFS{"1_a.sql": file("A")}, errPart: "1_a.sql: name is not of the form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := readMigrations(tt.fsys)
			if tt.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("err = %v, want one containing %q", err, tt.errPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for i, m := range ms {
				names = append(names, m.name)
				if m.version != i+1 || len(m.checksum) != 64 {
					t.Errorf("migration %s: version %d, checksum %q", m.name, m.version, m.checksum)
				}
			}
			if strings.Join(names, " ") != strings.Join(tt.want, " ") {
				t.Errorf("migrations = %v, want %v", names, tt.want)
			}
		})
	}
}

func TestEmbeddedMigrationsLoad(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 2 {
		t.Fatalf("%d embedded migrations, want the identity and audit log ones at least", len(ms))
	}
}

// TestFailedMigrationLeavesNothing: a migration that fails halfway is rolled
// back whole and not recorded, and the next run applies it again.
func TestFailedMigrationLeavesNothing(t *testing.T) {
	ctx := t.Context()
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ms, err := readMigrations(fstest.MapFS{
		"0001_ok.sql":   {Data: []byte("CREATE TABLE one (v int);")},
		"0002_half.sql": {Data: []byte("CREATE TABLE two (v int); SELECT no_such_function();")},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = migrate(ctx, pool, ms)
	if err == nil || !strings.Contains(err.Error(), "0002_half.sql") {
		t.Fatalf("err = %v, want one naming 0002_half.sql", err)
	}
	var one, two *string
	var recorded int
	if err := pool.QueryRow(ctx,
		"SELECT to_regclass('one')::text, to_regclass('two')::text, (SELECT count(*) FROM schema_migrations)").Scan(&one, &two, &recorded); err != nil {
		t.Fatal(err)
	}
	if one == nil || two != nil || recorded != 1 {
		t.Fatalf("after the failure: table one %v, table two %v, %d recorded; want one, no two, 1 recorded", one, two, recorded)
	}

	ms[1].sql = "CREATE TABLE two (v int);"
	ms[1].checksum = "fixed" // as if the unapplied file had been fixed
	if err := migrate(ctx, pool, ms); err != nil {
		t.Fatalf("after fixing 0002: %v", err)
	}
	// The lock is released: another session can take it at once. (Not a
	// pool connection: the session that held it could take it again.)
	other, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var got bool
	if err := other.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", migrationLockKey).Scan(&got); err != nil || !got {
		t.Fatalf("the migration lock is still held after migrate returned (err %v)", err)
	}
}

func TestPendingMigrations(t *testing.T) {
	known := []migration{{version: 1, name: "0001_a.sql", checksum: "a"}, {version: 2, name: "0002_b.sql", checksum: "b"}}
	tests := []struct {
		name    string
		applied []migration
		pending int
		errPart string
	}{
		{name: "fresh", pending: 2},
		{name: "half", applied: known[:1], pending: 1},
		{name: "all", applied: known, pending: 0},
		{name: "edited", applied: []migration{{version: 1, name: "0001_a.sql", checksum: "old"}}, errPart: "0001_a.sql has changed"},
		{name: "renamed", applied: []migration{{version: 1, name: "0001_z.sql", checksum: "a"}}, errPart: "applied as 0001_z.sql"},
		{name: "newer", applied: append(known[:2:2], migration{version: 3, name: "0003_c.sql"}), errPart: "0003_c.sql, which this binary does not know"},
		{name: "hole", applied: []migration{{version: 2, name: "0002_b.sql", checksum: "b"}}, errPart: "not 1, 2, 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pending, err := pendingMigrations(known, tt.applied)
			if tt.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("err = %v, want one containing %q", err, tt.errPart)
				}
				return
			}
			if err != nil || len(pending) != tt.pending {
				t.Fatalf("pending = %d, %v; want %d", len(pending), err, tt.pending)
			}
		})
	}
}

// migratedBefore opens a fresh database with the migrations before the one
// whose name ends in suffix applied, and returns it with every migration,
// for a test that writes rows of the old schema and then migrates them.
func migratedBefore(t *testing.T, suffix string) (*pgxpool.Pool, []migration) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ms, func(m migration) bool { return strings.HasSuffix(m.name, suffix) })
	if i < 0 {
		t.Fatalf("no migration *%s", suffix)
	}
	if err := migrate(t.Context(), pool, ms[:i]); err != nil {
		t.Fatal(err)
	}
	return pool, ms
}

// TestMembersMigration: the users of the old role tenant become admins of
// their tenant, operators stay operators, and existing tokens keep full
// scope.
func TestMembersMigration(t *testing.T) {
	ctx := t.Context()
	pool, ms := migratedBefore(t, "_members_and_tokens.sql")
	if _, err := pool.Exec(ctx, `
		INSERT INTO tenants (id, name) VALUES ('00000000-0000-0000-0000-00000000000a', 'acme');
		INSERT INTO users (id, tenant_id, email, role) VALUES
			('00000000-0000-0000-0000-0000000000a1', '00000000-0000-0000-0000-00000000000a', 'ann@acme.test', 'tenant'),
			('00000000-0000-0000-0000-0000000000a2', NULL, 'ops@bex.test', 'operator');
		INSERT INTO api_tokens (tenant_id, user_id, name, prefix, hash) VALUES
			('00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-0000000000a1', 'old', 'bex_aaaa', decode(repeat('ab', 32), 'hex'))`); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, pool, ms); err != nil {
		t.Fatal(err)
	}
	var ann, ops, scope string
	if err := pool.QueryRow(ctx, `SELECT (SELECT role FROM users WHERE email = 'ann@acme.test'), (SELECT role FROM users WHERE email = 'ops@bex.test'),
		(SELECT scope FROM api_tokens WHERE name = 'old')`).Scan(&ann, &ops, &scope); err != nil {
		t.Fatal(err)
	}
	if ann != "admin" || ops != "operator" || scope != "full" {
		t.Errorf("after migrating: ann %s, ops %s, token scope %s; want admin, operator, full", ann, ops, scope)
	}
}

// TestReleaseKindsMigration: the releases recorded before migration 0021
// get their kind, and a rollback its target, from the descriptions the
// platform wrote; a description of no known form is told by its image;
// the releases stay immutable after.
func TestReleaseKindsMigration(t *testing.T) {
	ctx := t.Context()
	pool, ms := migratedBefore(t, "_release_kinds.sql")
	const tenant = "00000000-0000-0000-0000-00000000000a"
	if _, err := pool.Exec(ctx, "INSERT INTO tenants (id, name) VALUES ($1, 'acme')", tenant); err != nil {
		t.Fatal(err)
	}
	type old struct {
		app         string
		number      int
		image       string
		description string
		kind        string // what the backfill gives
		to          int
	}
	rows := []old{
		{"web", 1, "img@sha256:1", "Deploy abc1234", "deploy", 0},
		{"web", 2, "img@sha256:1", "Set FOO, BAR; unset BAZ", "config", 0},
		{"web", 3, "img@sha256:1", "Unset FOO", "config", 0},
		{"web", 4, "img@sha256:2", "Deploy def5678", "deploy", 0},
		{"web", 5, "img@sha256:1", "Rollback to v2", "rollback", 2},
		{"web", 6, "img@sha256:1", "Rollback to v12", "config", 0}, // no v12: not a rollback; its image ran before
		{"web", 7, "img@sha256:3", "Imported from Heroku", "deploy", 0},
		{"web", 8, "img@sha256:3", "Imported from Heroku", "config", 0},
		{"web", 9, "img@sha256:4", "Deploy ", "deploy", 0},
		{"api", 1, "img@sha256:1", "Rollback to v1", "deploy", 0}, // not earlier than itself; a new image of api
		{"api", 2, "img@sha256:5", "Rollback to v1", "rollback", 1},
		{"api", 3, "img@sha256:5", "rollback to v1", "config", 0},
	}
	for _, r := range rows {
		if _, err := pool.Exec(ctx, "INSERT INTO releases (tenant_id, app, number, image, description, created_by) VALUES ($1, $2, $3, $4, $5, 'dev')",
			tenant, r.app, r.number, r.image, r.description); err != nil {
			t.Fatal(err)
		}
	}
	// A pruned release keeps its pruning through the backfill.
	if _, err := pool.Exec(ctx, `BEGIN; SET LOCAL bex.pruning_releases = 'on';
		UPDATE releases SET pruned_at = now(), pruned_retention = 5 WHERE app = 'web' AND number = 1; COMMIT`); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, pool, ms); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var kind string
		var to *int
		if err := pool.QueryRow(ctx, "SELECT kind, rollback_to FROM releases WHERE tenant_id = $1 AND app = $2 AND number = $3",
			tenant, r.app, r.number).Scan(&kind, &to); err != nil {
			t.Fatal(err)
		}
		gotTo := 0
		if to != nil {
			gotTo = *to
		}
		if kind != r.kind || gotTo != r.to {
			t.Errorf("%s v%d %q: kind %s, rollback_to %d; want %s, %d", r.app, r.number, r.description, kind, gotTo, r.kind, r.to)
		}
	}
	var pruned int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM releases WHERE pruned_at IS NOT NULL").Scan(&pruned); err != nil || pruned != 1 {
		t.Errorf("%d pruned releases after the migration (%v), want 1", pruned, err)
	}
	// The immutability triggers are back on.
	for _, stmt := range []string{"UPDATE releases SET kind = 'config' WHERE number = 1", "DELETE FROM releases"} {
		if _, err := pool.Exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "releases are immutable") {
			t.Errorf("%s after the migration: err = %v, want it refused as immutable", stmt, err)
		}
	}
}

// TestAppSeriesChunksMigration: each series saved whole before migration
// 0025 becomes its app's one chunk, with its head's chunks and bytes, and
// takes appended points after it.
func TestAppSeriesChunksMigration(t *testing.T) {
	ctx := t.Context()
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ms, func(m migration) bool { return strings.HasSuffix(m.name, "_app_series_chunks.sql") })
	if err := migrate(ctx, pool, ms[:i]); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, "INSERT INTO app_series (tenant, app, interval_ms, points, last_at) VALUES "+
		"('acme', 'shop', 10000, 'shop points', $1), ('acme', 'blog', 10000, 'blog', $1)", t0); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var chunks, bytes int
	if err := pool.QueryRow(ctx, "SELECT chunks, bytes FROM app_series WHERE app = 'shop'").Scan(&chunks, &bytes); err != nil {
		t.Fatal(err)
	}
	if chunks != 1 || bytes != len("shop points") {
		t.Errorf("shop's head after migrating: %d chunks, %d bytes; want 1 and %d", chunks, bytes, len("shop points"))
	}
	if err := s.SaveAppSeries(ctx, slices.Values([]AppSeries{
		{Tenant: "acme", App: "shop", Interval: 10 * time.Second, FirstAt: t0.Add(10 * time.Second), LastAt: t0.Add(10 * time.Second),
			Points: []byte(" and more"), Append: true},
		{Tenant: "acme", App: "blog", Unchanged: true},
	})); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadAppSeries(ctx, []string{"acme", "acme"}, []string{"shop", "blog"}, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	points := map[string]string{}
	for _, a := range got {
		points[a.App] = string(a.Points)
	}
	if len(points) != 2 || points["shop"] != "shop points and more" || points["blog"] != "blog" {
		t.Errorf("after migrating and appending to shop: %q", points)
	}
}
