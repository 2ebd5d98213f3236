package faults_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bex.co/bex/test/platformtest"
)

// platform is a running embedded platform on its private Postgres, with
// the first tenant's app "hello" released once.
type platform struct {
	ctx   context.Context
	bin   string
	state string
	p     *platformtest.Platform
	env   map[string]string
	repo  string
	home  string
}

func start(ctx context.Context, t *testing.T, bin, state string) *platform {
	t.Helper()
	// The private Postgres runs as the postgres user when root: it must
	// reach its data directory under the state directory.
	for _, d := range []string{state, filepath.Dir(state)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	p := platformtest.Start(ctx, t, bin, state, "")
	return &platform{ctx: ctx, bin: bin, state: state, p: p, env: p.WaitEnv(ctx, t), home: t.TempDir()}
}

func (s *platform) bex(args ...string) (string, error) {
	cmd := exec.CommandContext(s.ctx, filepath.Join(s.bin, "bex"), args...)
	cmd.Env = append(os.Environ(), "BEX_API="+s.env["BEX_API"], "BEX_TOKEN="+s.env["BEX_TOKEN"], "HOME="+s.home, "XDG_CONFIG_HOME="+s.home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s *platform) push() (string, error) {
	remote, err := url.Parse(s.env["BEX_GIT"])
	if err != nil {
		return "", err
	}
	remote.User = url.UserPassword("bex", s.env["BEX_TOKEN"])
	return platformtest.GitErr(s.repo, "push", remote.String()+"/dev/hello.git", "main")
}

func (s *platform) host() string {
	return "hello-dev." + strings.Split(s.env["BEX_DOMAIN"], ":")[0]
}

// commit writes the app answering body, with build as its build step.
func (s *platform) commit(t *testing.T, body, build string) {
	t.Helper()
	platformtest.WriteNodeApp(t, s.repo, body, build)
	platformtest.Git(t, s.repo, "add", ".")
	platformtest.Git(t, s.repo, "commit", "-q", "-m", body)
}

// firstRelease creates the app and releases v1 of it.
func (s *platform) firstRelease(t *testing.T) {
	t.Helper()
	if out, err := s.bex("apps", "create", "hello"); err != nil {
		t.Fatalf("bex apps create: %v\n%s", err, out)
	}
	s.repo = t.TempDir()
	platformtest.Git(t, s.repo, "init", "-q", "-b", "main")
	s.commit(t, "hello v1", "")
	if out, err := s.push(); err != nil || !strings.Contains(out, "Released v1") {
		t.Fatalf("first push: %v\n%s", err, out)
	}
}

// getFresh fetches the app over a new TLS connection each time, so that
// every request makes the edge find a certificate again.
func (s *platform) getFresh(t *testing.T) (int, string, error) {
	t.Helper()
	c := platformtest.AppClient(t, s.env)
	c.Transport.(*http.Transport).DisableKeepAlives = true
	return platformtest.GetApp(s.ctx, c, s.host())
}

// api calls the platform's API as the tenant.
func (s *platform) api(method, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(s.ctx, method, s.env["BEX_API"]+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.env["BEX_TOKEN"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// database connects to the private Postgres as its superuser.
func (s *platform) database(t *testing.T) *pgx.Conn {
	t.Helper()
	pw, err := os.ReadFile(filepath.Join(s.state, "postgres.password"))
	if err != nil {
		t.Fatal(err)
	}
	port, err := os.ReadFile(filepath.Join(s.state, "postgres.port"))
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", strings.TrimSpace(string(pw))),
		Host: "127.0.0.1:" + strings.TrimSpace(string(port)), Path: "/bex", RawQuery: "sslmode=disable"}
	conn, err := pgx.Connect(s.ctx, u.String())
	if err != nil {
		t.Fatalf("connecting to the platform's database: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// builds returns the status and error of each build of hello, in order.
// It closes its connection, so that a wait can call it often.
func (s *platform) builds(t *testing.T) [][2]string {
	t.Helper()
	conn := s.database(t)
	defer conn.Close(context.Background())
	rows, err := conn.Query(s.ctx, "SELECT status, error FROM builds WHERE app = 'hello' ORDER BY number")
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for rows.Next() {
		var st, e string
		if err := rows.Scan(&st, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]string{st, e})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitOutput waits until the platform has printed want.
func (s *platform) waitOutput(t *testing.T, want string) {
	t.Helper()
	platformtest.Eventually(t, 15*time.Minute, fmt.Sprintf("the platform to print %q", want), func(context.Context) error {
		if out := s.p.Output(); !strings.Contains(out, want) {
			return fmt.Errorf("its last line: %s", platformtest.LastLine(out))
		}
		return nil
	})
}

// answers is a condition for platformtest.Eventually: the app answers
// want over a new connection.
func answers(t *testing.T, s *platform, want string) func(context.Context) error {
	return func(context.Context) error {
		code, body, err := s.getFresh(t)
		if err == nil && (code != http.StatusOK || body != want) {
			err = fmt.Errorf("GET %s: %d %q, want %q", s.host(), code, body, want)
		}
		return err
	}
}

// postgresPID is the postmaster's process id, from its pid file.
func postgresPID(t *testing.T, state string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "postgres", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	return pid
}

// TestDatabaseOutage kills the platform's private Postgres and keeps it
// down (its data directory closed to the postgres user, so that the
// supervisor's restarts fail) while a tenant's app is called, the API is
// asked and a push is tried.
func TestDatabaseOutage(t *testing.T) {
	bin := platformtest.BuildBinaries(t, "bex-embedded", "bex", "bex-static")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := start(ctx, t, bin, t.TempDir())
	s.firstRelease(t)
	if code, body, err := s.getFresh(t); err != nil || code != 200 || body != "hello v1" {
		t.Fatalf("before the outage: GET %s = %d %q %v", s.host(), code, body, err)
	}
	s.commit(t, "hello v2", "")

	// Close the data directory first, then kill: every restart the
	// supervisor tries fails until the directory is opened again.
	pid := postgresPID(t, s.state)
	data := filepath.Join(s.state, "postgres")
	if err := os.Chmod(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "the private Postgres is down")

	t.Run("running apps keep answering over new TLS connections", func(t *testing.T) {
		for i := range 20 {
			if code, body, err := s.getFresh(t); err != nil || code != 200 || body != "hello v1" {
				t.Fatalf("request %d during the outage: %d %q %v", i, code, body, err)
			}
		}
	})
	t.Run("the API answers 503 and says why", func(t *testing.T) {
		code, body, err := s.api(http.MethodGet, "/api/v1/apps")
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "database is unavailable") {
			t.Fatalf("GET /api/v1/apps during the outage = %d %s %v, want 503 saying the database is unavailable", code, body, err)
		}
	})
	t.Run("a push is refused and says why", func(t *testing.T) {
		out, err := s.push()
		if err == nil || !strings.Contains(out, "database is unavailable") {
			t.Fatalf("push during the outage: %v\n%s\nwant a refusal saying the database is unavailable", err, out)
		}
	})

	if err := os.Chmod(data, 0o700); err != nil {
		t.Fatal(err)
	}
	s.waitOutput(t, "the private Postgres is back")
	t.Run("afterwards the platform takes pushes again", func(t *testing.T) {
		var out string
		// The pool finds the server back on its next connection.
		platformtest.Eventually(t, 15*time.Minute, "the API to answer again", func(context.Context) error {
			code, body, err := s.api(http.MethodGet, "/api/v1/apps")
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("GET /api/v1/apps: %d %s", code, strings.TrimSpace(body))
			}
			return err
		})
		out, err := s.push()
		if err != nil || !strings.Contains(out, "Released v2") {
			t.Fatalf("push after the outage: %v\n%s", err, out)
		}
		if code, body, err := s.getFresh(t); err != nil || code != 200 || body != "hello v2" {
			t.Fatalf("after the outage: GET %s = %d %q %v", s.host(), code, body, err)
		}
		for i, b := range s.builds(t) {
			if b[0] != "succeeded" {
				t.Errorf("build %d is %s (%s), want every build succeeded: the refused push made none", i+1, b[0], b[1])
			}
		}
	})
}

// TestKilledMidBuild SIGKILLs bex-embedded while a build runs and starts
// it again on the same state directory.
func TestKilledMidBuild(t *testing.T) {
	bin := platformtest.BuildBinaries(t, "bex-embedded", "bex", "bex-static")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	state := t.TempDir()
	s := start(ctx, t, bin, state)
	s.firstRelease(t)
	v1 := strings.TrimSpace(platformtest.Git(t, s.repo, "rev-parse", "HEAD"))

	gate := filepath.Join(platformtest.TenantBuildCache(state, "dev"), "go-ahead")
	s.commit(t, "hello v2", platformtest.GoAheadBuildJS(gate, "hello v2"))
	pushed := make(chan string, 1)
	go func() { out, _ := s.push(); pushed <- out }()
	platformtest.Eventually(t, 15*time.Minute, "the build to wait for its go-ahead", func(context.Context) error {
		out := s.p.Output()
		if strings.Contains(out, "waiting for the go-ahead") {
			return nil
		}
		if b := s.builds(t); len(b) != 2 {
			return fmt.Errorf("%d builds, the platform's last line: %s", len(b), platformtest.LastLine(out))
		}
		return nil
	})
	if err := s.p.Kill(); err != nil {
		t.Fatal(err)
	}
	<-pushed

	// The killed platform left its env file; the next one removes it as it
	// starts, but WaitEnv could read it before that.
	if err := os.Remove(filepath.Join(state, "env")); err != nil {
		t.Fatal(err)
	}
	s2 := start(ctx, t, bin, state)
	s2.repo = s.repo
	t.Run("the build is failed with the reason", func(t *testing.T) {
		b := s2.builds(t)
		if len(b) != 2 || b[1][0] != "failed" || !strings.Contains(b[1][1], "platform stopped during this build") {
			t.Fatalf("builds after the restart: %q, want v2's failed saying the platform stopped during it", b)
		}
		if !strings.Contains(s2.p.Output(), "1 build(s) cut short") {
			t.Errorf("the platform did not say it ended the build:\n%s", s2.p.Output())
		}
	})
	t.Run("the branch did not move and v1 serves again", func(t *testing.T) {
		remote, _ := url.Parse(s2.env["BEX_GIT"])
		remote.User = url.UserPassword("bex", s2.env["BEX_TOKEN"])
		refs := platformtest.Git(t, s2.repo, "ls-remote", remote.String()+"/dev/hello.git", "refs/heads/main")
		if !strings.HasPrefix(refs, v1) {
			t.Fatalf("main on the platform = %q, want v1 %s", refs, v1)
		}
		platformtest.Eventually(t, 15*time.Minute, "v1 to answer again", answers(t, s2, "hello v1"))
	})
	t.Run("the next push works", func(t *testing.T) {
		s2.commit(t, "hello v3", "")
		out, err := s2.push()
		if err != nil || !strings.Contains(out, "Released v2") {
			t.Fatalf("push after the restart: %v\n%s", err, out)
		}
		platformtest.Eventually(t, 15*time.Minute, "v3 to answer", answers(t, s2, "hello v3"))
	})
}
