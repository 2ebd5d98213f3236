package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

// crashingServerJS is an app that answers "crashy v1" until it is asked
// /crash: then it leaves a file in its own directory (its container's
// writable /app, which outlives its processes) and exits with status 1.
// Every start that finds the file serves for a second and exits again.
const crashingServerJS = `const fs = require("fs");
if (fs.existsSync("crashed")) {
  setTimeout(() => { console.error("crashed before: exiting again"); process.exit(1); }, 1000);
}
require("http").createServer((req, res) => {
  if (req.url === "/crash") {
    fs.writeFileSync("crashed", "");
    res.end("crashing\n", () => process.exit(1));
    return;
  }
  res.end("crashy v1");
}).listen(process.env.PORT);
`

// pushApp creates the tenant's app name and releases v1 of what write
// puts in its repository.
func (s *platform) pushApp(t *testing.T, name string, write func(dir string)) {
	t.Helper()
	if out, err := s.bex("apps", "create", name); err != nil {
		t.Fatalf("bex apps create %s: %v\n%s", name, err, out)
	}
	dir := t.TempDir()
	platformtest.Git(t, dir, "init", "-q", "-b", "main")
	write(dir)
	platformtest.Git(t, dir, "add", ".")
	platformtest.Git(t, dir, "commit", "-q", "-m", name)
	remote, err := url.Parse(s.env["BEX_GIT"])
	if err != nil {
		t.Fatal(err)
	}
	remote.User = url.UserPassword("bex", s.env["BEX_TOKEN"])
	if out, err := platformtest.GitErr(dir, "push", remote.String()+"/dev/"+name+".git", "main"); err != nil || !strings.Contains(out, "Released v1") {
		t.Fatalf("pushing %s: %v\n%s", name, err, out)
	}
}

// appHost is the tenant's app's hostname behind the edge.
func (s *platform) appHost(name string) string {
	return name + "-dev." + strings.Split(s.env["BEX_DOMAIN"], ":")[0]
}

// appView is the tenant's app as the API (and so bex and the dashboard)
// shows it.
func (s *platform) appView(t *testing.T, name string) apiclient.App {
	t.Helper()
	code, body, err := s.api(http.MethodGet, "/api/v1/apps/"+name)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /api/v1/apps/%s = %d %s %v", name, code, body, err)
	}
	var a apiclient.App
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("GET /api/v1/apps/%s: %v\n%s", name, err, body)
	}
	return a
}

// prober asks an app for / over the edge until stopped, and counts.
type prober struct {
	mu       sync.Mutex
	ok       int
	failures []string
	stop     chan struct{}
	done     chan struct{}
}

func probe(ctx context.Context, c *http.Client, host, want string) *prober {
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			code, body, err := platformtest.GetApp(ctx, c, host)
			p.mu.Lock()
			if err != nil || code != http.StatusOK || body != want {
				p.failures = append(p.failures, fmt.Sprintf("%s: %d %q %v", time.Now().Format(time.TimeOnly), code, body, err))
			} else {
				p.ok++
			}
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *prober) finish() (int, []string) {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok, p.failures
}

// TestCrashLoop releases an app that serves, then crashes on a request and
// on every restart after it, next to another app of the tenant. The
// crashing app is restarted after 1s, 2s, 4s, 8s, 16s, as its log says;
// its status says it crash-loops, how often, and how it last exited; the
// other app answers every request over the edge the whole time.
func TestCrashLoop(t *testing.T) {
	bin := platformtest.BuildBinaries(t, "bex-embedded", "bex", "bex-static")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := start(ctx, t, bin, t.TempDir())
	s.pushApp(t, "steady", func(dir string) { platformtest.WriteNodeApp(t, dir, "steady v1", "") })
	s.pushApp(t, "crashy", func(dir string) {
		platformtest.WriteNodeApp(t, dir, "crashy v1", "")
		if err := os.WriteFile(filepath.Join(dir, "server.js"), []byte(crashingServerJS), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	c := platformtest.AppClient(t, s.env)
	if code, body, err := platformtest.GetApp(ctx, c, s.appHost("crashy")); err != nil || code != 200 || body != "crashy v1" {
		t.Fatalf("before the crash: GET %s = %d %q %v", s.appHost("crashy"), code, body, err)
	}
	steady := probe(ctx, c, s.appHost("steady"), "steady v1")

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+s.appHost("crashy")+"/crash", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	t.Run("the log shows restarts 1s, 2s, 4s, 8s, 16s apart", func(t *testing.T) {
		re := regexp.MustCompile(`web\.0: Process exited: exit status 1; restarting in (\S+)$`)
		var delays []string
		platformtest.Eventually(t, 15*time.Minute, "five restarts in crashy's log", func(context.Context) error {
			out, err := s.bex("logs", "crashy", "--tail", "1000")
			if err != nil {
				return fmt.Errorf("bex logs: %w: %s", err, platformtest.LastLine(out))
			}
			delays = nil
			for _, line := range strings.Split(out, "\n") {
				if m := re.FindStringSubmatch(line); m != nil {
					delays = append(delays, m[1])
				}
			}
			if len(delays) < 5 {
				return fmt.Errorf("restarts after %v; the log's last line: %s", delays, platformtest.LastLine(out))
			}
			return nil
		})
		if got, want := strings.Join(delays[:5], " "), "1s 2s 4s 8s 16s"; got != want {
			t.Errorf("restart delays %s, want %s", got, want)
		}
	})

	t.Run("the app's status says it crash-loops", func(t *testing.T) {
		re := regexp.MustCompile(`^release 1: web\.0 crashed (\d+) times; (restarting in \S+|restarted \S+ ago); last exit: exit status 1$`)
		var a apiclient.App
		platformtest.Eventually(t, 15*time.Minute, "crashy's status to say it crashed 5 times", func(context.Context) error {
			a = s.appView(t, "crashy")
			m := re.FindStringSubmatch(a.StatusMessage)
			if m != nil {
				if n, _ := strconv.Atoi(m[1]); n >= 5 {
					return nil
				}
			}
			return fmt.Errorf("status %q: %s", a.Status, a.StatusMessage)
		})
		if a.Status != "not ready" || a.CurrentRelease != 1 {
			t.Errorf("crashy: status %q, release %d; want not ready, still release 1", a.Status, a.CurrentRelease)
		}
		out, err := s.bex("apps", "info", "crashy")
		if err != nil || !strings.Contains(out, "not ready: release 1: web.0 crashed") {
			t.Errorf("bex apps info crashy: %v\n%s\nwant the status saying web.0 crashed", err, out)
		}
		if a := s.appView(t, "steady"); a.Status != "ready" {
			t.Errorf("steady: status %q (%s), want ready", a.Status, a.StatusMessage)
		}
	})

	t.Run("the other app answered every request", func(t *testing.T) {
		ok, failures := steady.finish()
		if len(failures) > 0 {
			t.Errorf("%d of %d requests to steady failed while crashy crash-looped; first: %s", len(failures), ok+len(failures), failures[0])
		}
		if ok < 50 {
			t.Errorf("only %d requests to steady answered", ok)
		}
	})
}
