package store

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles holds the schema's migrations: NNNN_description.sql,
// numbered from 0001 without gaps. An applied migration is never edited;
// changes go into a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the pg_advisory_lock key that serialises migration
// runs on one database ("bexmigr1" in ASCII).
const migrationLockKey int64 = 0x6265786d69677231

// migrationName is the form of a migration's file name.
var migrationName = regexp.MustCompile(`^([0-9]{4})_[a-z0-9_]+\.sql$`)

// migration is one SQL file, applied in one transaction.
type migration struct {
	version  int
	name     string // the file name
	sql      string
	checksum string // hex SHA-256 of the file
}

// loadMigrations returns the embedded migrations in order.
func loadMigrations() ([]migration, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	return readMigrations(sub)
}

// readMigrations returns the *.sql files of fsys as migrations in order. It
// refuses names not of the form NNNN_description.sql and numbers that are
// not 1, 2, 3, ...
func readMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("listing migrations: %w", err)
	}
	var ms []migration
	for _, name := range names { // fs.Glob sorts
		m := migrationName.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("migration %s: name is not of the form 0001_description.sql", name)
		}
		version, _ := strconv.Atoi(m[1])
		if want := len(ms) + 1; version != want {
			return nil, fmt.Errorf("migration %s: expected number %04d next", name, want)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", name, err)
		}
		sum := sha256.Sum256(b)
		ms = append(ms, migration{version: version, name: path.Base(name), sql: string(b), checksum: hex.EncodeToString(sum[:])})
	}
	return ms, nil
}

// migrate applies the migrations that the database has not applied yet, each
// in its own transaction, and records them in schema_migrations. It holds an
// advisory lock on one connection for the whole run, so that processes
// starting together apply each migration once. It fails, changing nothing,
// if an applied migration is unknown to this binary or has changed.
func migrate(ctx context.Context, pool *pgxpool.Pool, migrations []migration) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring a connection: %w", err)
	}
	defer conn.Release()

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		// The lock may have been granted just as ctx ended: ending the
		// session releases it either way.
		_ = conn.Conn().Close(context.Background())
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	defer func() {
		if _, unlockErr := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockKey); unlockErr != nil {
			_ = conn.Conn().Close(context.Background())
			err = errors.Join(err, fmt.Errorf("releasing the migration lock: %w", unlockErr))
		}
	}()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		checksum   text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}

	rows, err := conn.Query(ctx, "SELECT version, name, checksum FROM schema_migrations ORDER BY version")
	if err != nil {
		return fmt.Errorf("reading schema_migrations: %w", err)
	}
	applied, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (migration, error) {
		var m migration
		err := row.Scan(&m.version, &m.name, &m.checksum)
		return m, err
	})
	if err != nil {
		return fmt.Errorf("reading schema_migrations: %w", err)
	}
	pending, err := pendingMigrations(migrations, applied)
	if err != nil {
		return err
	}

	for _, m := range pending {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
				m.version, m.name, m.checksum)
			return err
		})
		if err != nil {
			return fmt.Errorf("applying migration %s: %w", m.name, err)
		}
	}
	return nil
}

// pendingMigrations checks what the database applied against what this
// binary knows, and returns what is left to apply.
func pendingMigrations(known, applied []migration) ([]migration, error) {
	for i, a := range applied {
		if a.version != i+1 {
			return nil, fmt.Errorf("schema_migrations is not 1, 2, 3...: version %d at position %d", a.version, i+1)
		}
		if i >= len(known) {
			return nil, fmt.Errorf("the database has migration %s, which this binary does not know (it knows up to %04d): is it an older bex?",
				a.name, len(known))
		}
		k := known[i]
		if a.name != k.name {
			return nil, fmt.Errorf("migration %04d was applied as %s but this binary has it as %s", a.version, a.name, k.name)
		}
		if a.checksum != k.checksum {
			return nil, fmt.Errorf("migration %s has changed since it was applied (checksum %s, applied %s): applied migrations must not be edited; add a new one",
				k.name, k.checksum, a.checksum)
		}
	}
	return known[len(applied):], nil
}
