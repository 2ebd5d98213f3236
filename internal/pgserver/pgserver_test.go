package pgserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// reachableTempDir returns a temporary directory that the postgres user can
// enter when the test runs as root (t.TempDir's are mode 0700).
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func skipWithoutBinaries(t *testing.T) {
	t.Helper()
	if _, err := findBinDir(t.Context(), debianRoot, ""); err != nil {
		t.Skipf("no PostgreSQL server binaries: %v", err)
	}
}

func TestRestartKeepsData(t *testing.T) {
	skipWithoutBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := reachableTempDir(t)
	opts := Options{
		DataDir:   filepath.Join(dir, "data"),
		SocketDir: filepath.Join(dir, "sock"),
		Ephemeral: true,
	}

	first, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	t.Cleanup(func() { _ = first.Stop() })
	conn, err := pgx.Connect(ctx, first.URL("postgres"))
	if err != nil {
		t.Fatalf("connecting over TCP: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)

	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(opts.DataDir, "PG_VERSION"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10); got != u.Uid {
			t.Errorf("PG_VERSION is owned by uid %s, want the postgres user's %s", got, u.Uid)
		}
	}

	if err := first.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := first.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	select {
	case <-first.Done():
	default:
		t.Fatal("Done is open after Stop returned")
	}
	if c, err := pgx.Connect(ctx, first.URL("postgres")+"&connect_timeout=2"); err == nil {
		_ = c.Close(ctx)
		t.Fatal("the stopped server still accepts connections")
	}

	second, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("second start: %v", err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	// Over the Unix socket this time.
	conn, err = pgx.Connect(ctx, "postgres:///postgres?user=postgres&host="+opts.SocketDir+"&port="+strconv.Itoa(second.Port())+"&password="+second.password)
	if err != nil {
		t.Fatalf("connecting over the socket: %v", err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil {
		t.Fatalf("reading the table made before the restart: %v", err)
	}
	if v != "hello" {
		t.Fatalf("kept.v = %q, want hello", v)
	}
	if err := second.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func TestStartRefusesForeignDirectory(t *testing.T) {
	skipWithoutBinaries(t)
	dir := reachableTempDir(t)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Start(t.Context(), Options{DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "holds no PostgreSQL cluster") {
		t.Fatalf("Start on a non-empty directory: err = %v, want one saying it holds no cluster", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatalf("the directory's content was touched: %v", err)
	}
}

func TestStartAsRootNeedsReachableDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root hands the server to the postgres user")
	}
	skipWithoutBinaries(t)
	private := t.TempDir() // mode 0700, owned by root
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Start(t.Context(), Options{DataDir: filepath.Join(private, "data")})
	if err == nil || !strings.Contains(err.Error(), "cannot enter "+private) {
		t.Fatalf("err = %v, want one naming %s as unreachable", err, private)
	}
}

func TestFindBinDir(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "16"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 17 has no initdb: not a candidate.
	if err := os.MkdirAll(filepath.Join(root, "17", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "17", "bin", "postgres"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())

	tests := []struct {
		want    string
		dir     string
		errPart string
	}{
		{want: "", dir: filepath.Join(root, "16", "bin")},
		{want: "15", dir: filepath.Join(root, "15", "bin")},
		{want: "9.6", dir: filepath.Join(root, "9.6", "bin")},
		{want: "14", errPart: "apt-get install postgresql-14"},
	}
	for _, tt := range tests {
		dir, err := findBinDir(t.Context(), root, tt.want)
		if tt.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errPart) {
				t.Errorf("findBinDir(%q) = %q, %v; want an error containing %q", tt.want, dir, err, tt.errPart)
			}
			continue
		}
		if err != nil || dir != tt.dir {
			t.Errorf("findBinDir(%q) = %q, %v; want %q", tt.want, dir, err, tt.dir)
		}
	}

	_, err := findBinDir(t.Context(), t.TempDir(), "")
	if err == nil || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Errorf("with no binaries anywhere: err = %v, want the package to install", err)
	}
}

func TestMajorOf(t *testing.T) {
	for in, want := range map[string]string{"15.20": "15", "9.6.24": "9.6", "16": "16"} {
		if got := majorOf(in); got != want {
			t.Errorf("majorOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// helperEnv makes the test binary a process that starts a server on the data
// directory it names, prints the port and waits to be killed.
const helperEnv = "PGSERVER_TEST_HELPER_DATADIR"

func TestHelperProcess(t *testing.T) {
	dataDir := os.Getenv(helperEnv)
	if dataDir == "" {
		t.Skip("run by TestServerDiesWithParent")
	}
	s, err := Start(t.Context(), Options{DataDir: dataDir, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("port=%d\n", s.Port())
	<-t.Context().Done() // until killed
}

func TestServerDiesWithParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux ties the server to its parent")
	}
	skipWithoutBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := reachableTempDir(t)

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), helperEnv+"="+filepath.Join(dir, "data"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var port int
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		if _, err := fmt.Sscanf(scanner.Text(), "port=%d", &port); err == nil {
			break
		}
	}
	if port == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the helper printed no port; stderr:\n%s", stderr.String())
	}
	password, err := os.ReadFile(filepath.Join(dir, "data.password"))
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", strings.TrimSpace(string(password)), port)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("the helper's server is not up: %v", err)
	}
	_ = conn.Close(ctx)

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			break
		}
		_ = conn.Close(ctx)
		select {
		case <-ctx.Done():
			t.Fatal("the server still runs after its parent was killed")
		case <-ticker.C:
		}
	}
	// The postmaster must be gone, not merely refusing connections.
	pidFile := filepath.Join(dir, "data", "postmaster.pid")
	for {
		if _, err := os.Stat(pidFile); errors.Is(err, os.ErrNotExist) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s is still there after the parent was killed", pidFile)
		case <-ticker.C:
		}
	}
}
