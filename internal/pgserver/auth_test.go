package pgserver

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bex.co/bex/internal/childproc"
)

// refused fails t when dsn opens a session.
func refused(ctx context.Context, t *testing.T, what, dsn string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn+"&connect_timeout=5")
	if err == nil {
		_ = conn.Close(ctx)
		t.Errorf("%s: the server accepted the connection", what)
		return
	}
	t.Logf("%s: refused: %v", what, err)
}

// withPassword returns s's URL of db with another password, or none.
func withPassword(s *Server, db, password string) string {
	u, _ := url.Parse(s.URL(db))
	u.User = url.User(superuser)
	if password != "" {
		u.User = url.UserPassword(superuser, password)
	}
	return u.String()
}

// TestConnectionsNeedThePassword is what a process on the machine gets from
// the private server without the password: nothing, over TCP or the Unix
// socket; the server's URL carries the password and works.
func TestConnectionsNeedThePassword(t *testing.T) {
	skipWithoutBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := reachableTempDir(t)
	sock := filepath.Join(dir, "sock")
	s, err := Start(ctx, Options{DataDir: filepath.Join(dir, "data"), SocketDir: sock, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })

	fi, err := os.Stat(filepath.Join(dir, "data.password"))
	if err != nil {
		t.Fatalf("the password file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the password file has mode %v, want 0600", fi.Mode().Perm())
	}
	refused(ctx, t, "TCP without a password", withPassword(s, "postgres", ""))
	refused(ctx, t, "TCP with a wrong password", withPassword(s, "postgres", "guess"))
	socket := "postgres:///postgres?user=postgres&sslmode=disable&host=" + sock + "&port=" + strconv.Itoa(s.Port())
	refused(ctx, t, "the Unix socket without a password", socket)
	refused(ctx, t, "the template database without a password", withPassword(s, "template1", ""))

	for _, dsn := range []string{s.URL("postgres"), socket + "&password=" + s.password} {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("with the password: %v", err)
		}
		var method string
		if err := conn.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = current_user").Scan(&method); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(method, "SCRAM-SHA-256$") {
			t.Errorf("the role's password is kept as %.14q…, want a SCRAM-SHA-256 verifier", method)
		}
		_ = conn.Close(ctx)
	}
}

// TestTrustClusterIsUpgraded starts a data directory made the way pgserver
// made them before it used passwords (initdb --auth=trust): its data is kept,
// and afterwards only the password opens it.
func TestTrustClusterIsUpgraded(t *testing.T) {
	skipWithoutBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := reachableTempDir(t)
	dataDir := filepath.Join(dir, "data")
	cred, err := credential()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prepareDataDir(dataDir, cred); err != nil {
		t.Fatal(err)
	}
	binDir, err := findBinDir(ctx, debianRoot, "")
	if err != nil {
		t.Fatal(err)
	}
	out := &tail{}
	if err := initdb(ctx, binDir, dataDir, "trust", true, cred, out); err != nil {
		t.Fatal(err)
	}
	port, err := childproc.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	old, err := start(ctx, binDir, dataDir, "", port, "", true, nil, cred, out)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, old.URL("postgres"))
	if err != nil {
		_ = old.Stop()
		t.Fatalf("the trust server wants no password: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}

	s, err := Start(ctx, Options{DataDir: dataDir, Port: port, Ephemeral: true})
	if err != nil {
		t.Fatalf("starting the trust cluster: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	refused(ctx, t, "without a password after the upgrade", withPassword(s, "postgres", ""))
	conn, err = pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatalf("with the password: %v", err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "hello" {
		t.Fatalf("the table made before the upgrade: %q, %v", v, err)
	}
	hba, err := os.ReadFile(filepath.Join(dataDir, "pg_hba.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(hba), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") && f[len(f)-1] != "scram-sha-256" {
			t.Errorf("pg_hba.conf still has %q", line)
		}
	}
}
