package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

// consoleSession is what a console's WebSocket brought: the output of
// each stream and its last message.
type consoleSession struct {
	stdout, stderr strings.Builder
	end            struct {
		Exit  *apiclient.RunExit `json:"exit"`
		Error string             `json:"error"`
	}
}

// openConsole opens the run console of app for command as the page's
// script does, with origin as the page's origin ("" sends none).
func openConsole(t *testing.T, u *user, app, command, csrf, origin string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	q := url.Values{"command": {command}, "csrf": {csrf}}
	wsURL := "ws" + strings.TrimPrefix(u.base, "http") + "/apps/" + app + "/console?" + q.Encode()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	d := websocket.Dialer{Jar: u.c.Jar, HandshakeTimeout: 10 * time.Second}
	return d.DialContext(t.Context(), wsURL, h)
}

// readConsole reads conn's messages until the last one.
func readConsole(t *testing.T, conn *websocket.Conn) *consoleSession {
	t.Helper()
	s := &consoleSession{}
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	for {
		kind, p, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("the console ended without its last message (stdout %q, stderr %q): %v", s.stdout.String(), s.stderr.String(), err)
		}
		if kind == websocket.TextMessage {
			if err := json.Unmarshal(p, &s.end); err != nil {
				t.Fatalf("the console's last message %q: %v", p, err)
			}
			return s
		}
		switch p[0] {
		case 1:
			s.stdout.Write(p[1:])
		case 2:
			s.stderr.Write(p[1:])
		default:
			t.Fatalf("output message of stream %d", p[0])
		}
	}
}

// TestRunConsole: the app page's console runs a command line attached:
// its output comes as it comes, stdout and stderr apart, the lines sent are
// its input, "eof" closes it, and its exit code ends the session; leaving
// the console ends the run; the API's refusal ends it with the API's
// words. Without the script the form runs the command in the background.
// A handshake from another origin, or without the session's CSRF secret,
// runs nothing.
func TestRunConsole(t *testing.T) {
	e, u, tenant := withShop(t, "dashcon")
	ctx := t.Context()
	p := u.get("/apps/shop")
	if strings.Contains(p.body, `id="console-form"`) || !strings.Contains(p.body, "Nothing to run a command in yet") {
		t.Errorf("the page of an app without a release offers a console:\n%s", p.body)
	}
	csrf := p.csrf(t)
	origin := u.base

	// Without a release the API refuses the run, and the console says why.
	conn, _, err := openConsole(t, u, "shop", "echo hi", csrf, origin)
	if err != nil {
		t.Fatal(err)
	}
	if s := readConsole(t, conn); s.end.Exit != nil || !strings.Contains(s.end.Error, "has no release") {
		t.Errorf("a console of an app without a release ended with %+v, want the API's refusal", s.end)
	}
	conn.Close()

	e.SetCurrentRelease(t, "dashcon", "shop", 1)
	if p := u.get("/apps/shop"); !strings.Contains(p.body, `data-console="/apps/shop/console"`) {
		t.Errorf("the page of an app with a release offers no console:\n%s", p.body)
	}

	t.Run("Attached", func(t *testing.T) {
		conn, _, err := openConsole(t, u, "shop", `read x; echo "got $x in v$RUN_RELEASE"; echo oops >&2; exit 3`, csrf, origin)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.WriteMessage(websocket.BinaryMessage, []byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		s := readConsole(t, conn)
		if s.end.Exit == nil || s.end.Exit.ExitCode != 3 || s.end.Exit.Release != 1 || s.end.Exit.Run == 0 || s.end.Error != "" {
			t.Errorf("the run ended with %+v, want exit 3 in v1", s.end)
		}
		if got := s.stdout.String(); got != "got hello in v1\n" {
			t.Errorf("stdout %q, want %q", got, "got hello in v1\n")
		}
		if got := s.stderr.String(); got != "oops\n" {
			t.Errorf("stderr %q, want %q", got, "oops\n")
		}
	})

	t.Run("EndOfInput", func(t *testing.T) {
		conn, _, err := openConsole(t, u, "shop", "cat; echo done", csrf, origin)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, m := range []string{"one\n", "two\n"} {
			if err := conn.WriteMessage(websocket.BinaryMessage, []byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		if err := conn.WriteMessage(websocket.TextMessage, []byte("eof")); err != nil {
			t.Fatal(err)
		}
		s := readConsole(t, conn)
		if s.end.Exit == nil || s.end.Exit.ExitCode != 0 || s.stdout.String() != "one\ntwo\ndone\n" {
			t.Errorf("cat's run: stdout %q, end %+v; want one, two, done and exit 0", s.stdout.String(), s.end)
		}
	})

	runs := func() []store.Run {
		t.Helper()
		rs, err := e.Store.ListRuns(ctx, tenant.ID, "shop", 100)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}

	t.Run("LeavingEndsTheRun", func(t *testing.T) {
		conn, _, err := openConsole(t, u, "shop", "echo started; sleep 600", csrf, origin)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
		if _, p, err := conn.ReadMessage(); err != nil || string(p[1:]) != "started\n" {
			t.Fatalf("the first output %q, %v", p, err)
		}
		conn.Close()
		platformtest.Eventually(t, 30*time.Second, "the run's end after its console closed", func(context.Context) error {
			rs := runs()
			if len(rs) == 0 || rs[0].Command[len(rs[0].Command)-1] != "echo started; sleep 600" {
				return fmt.Errorf("runs %+v", rs)
			}
			if rs[0].Status == store.RunRunning {
				return errors.New("run." + fmt.Sprint(rs[0].Number) + " still runs after its console closed")
			}
			return nil
		})
	})

	t.Run("Detached", func(t *testing.T) {
		p := u.post("/apps/shop/runs", url.Values{"csrf": {csrf}, "command": {"echo in the background"}})
		if p.status != http.StatusSeeOther {
			t.Fatalf("the form without the script: %d\n%s", p.status, p.body)
		}
		rs := runs()
		if len(rs) == 0 || !rs[0].Detached || strings.Join(rs[0].Command, " ") != "/bin/sh -c echo in the background" {
			t.Fatalf("the newest run is %+v, want the form's command detached", rs)
		}
		loc, _ := url.Parse(p.header.Get("Location"))
		if want := fmt.Sprintf("Started run.%d in the background", rs[0].Number); !strings.HasPrefix(loc.Query().Get("notice"), want) {
			t.Errorf("the notice %q does not start with %q", loc.Query().Get("notice"), want)
		}
		for form, want := range map[string]string{"": "The command is empty", strings.Repeat("x", 17<<10): "at most 16368"} {
			if p := u.post("/apps/shop/runs", url.Values{"csrf": {csrf}, "command": {form}}); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, want) {
				t.Errorf("a command of %d bytes: %d, want 422 saying %q", len(form), p.status, want)
			}
		}
	})

	t.Run("RefusedHandshakes", func(t *testing.T) {
		before := len(runs())
		for name, tc := range map[string]struct{ csrf, origin string }{
			// A tenant's app on a sibling hostname is same-site: the
			// browser sends the session cookie with its handshake.
			"another origin": {csrf, "https://evil.apps.bex.test"},
			"no origin":      {csrf, ""},
			"no CSRF secret": {"", origin},
			"a wrong secret": {"x" + csrf, origin},
		} {
			conn, resp, err := openConsole(t, u, "shop", "echo pwned", tc.csrf, tc.origin)
			if err == nil {
				conn.Close()
				t.Errorf("%s: the console opened", name)
				continue
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: %v, %+v; want 403", name, err, resp)
			}
		}
		if after := len(runs()); after != before {
			t.Errorf("refused handshakes made %d runs", after-before)
		}
	})
}
