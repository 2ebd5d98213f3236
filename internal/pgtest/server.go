package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"bex.co/bex/internal/pgserver"
)

// NewServerDatabase starts a private server of its own for t with the given
// server settings (such as max_connections, which a shared server cannot
// change for one test), creates a database on it and returns its URL. The
// server stops and its files go when t ends. It fails t when no server can
// be started.
func NewServerDatabase(t testing.TB, settings map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Not t.TempDir: its parent is closed to the postgres user, which runs
	// the server when the tests run as root.
	dir, err := os.MkdirTemp("", "bex-pgtest-")
	if err != nil {
		t.Fatalf("pgtest: creating a directory for a private server: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("pgtest: opening %s to the server's user: %v", dir, err)
	}
	s, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "data"), Ephemeral: true, Settings: settings})
	if err != nil {
		t.Fatalf("pgtest: starting a private server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: stopping the private server: %v", err)
		}
	})
	const name = "bext_private"
	if err := execAdmin(s.URL("postgres"), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	return s.URL(name)
}
