package gitserver

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"bex.co/bex/test/platformtest"
)

// shallowClone makes a repository of three commits on main and returns it
// with a clone of it at depth 1, the usual CI checkout: the clone holds
// the last commit only, and git sends it as a "shallow" line with every
// push from the clone.
func (e *env) shallowClone() (full, clone string) {
	e.t.Helper()
	full = e.workTree()
	e.commit(full, "a.txt", "a\n")
	e.commit(full, "b.txt", "b\n")
	clone = e.t.TempDir()
	e.mustGit(clone, "clone", "-q", "--depth", "1", "file://"+full, ".")
	if s := e.mustGit(clone, "rev-parse", "--is-shallow-repository"); s != "true" {
		e.t.Fatalf("clone is not shallow: %s", s)
	}
	return full, clone
}

// TestShallowPushWithoutHistoryRefused: a first push from a shallow clone
// would leave the app's repository without the history below the clone's
// boundary; it is refused as git refuses it, with what to do, and nothing
// is deployed. Once sent, git once failed with "decoding update request:
// malformed request: invalid shallow line length".
func TestShallowPushWithoutHistoryRefused(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t)
			_, clone := e.shallowClone()
			head := e.mustGit(clone, "rev-parse", "HEAD")
			url := e.remote(transport, "web")
			out, err := e.git(clone, "push", url, "main")
			if err == nil {
				t.Fatalf("push from a shallow clone the server has no history of succeeded:\n%s", out)
			}
			assertContains(t, out, "main -> main (shallow update not allowed)",
				"remote: This push comes from a shallow clone and the app's repository does not have the history below "+head[:7]+
					": run `git fetch --unshallow` and push again.")
			if n := len(e.deployer.pushes()); n != 0 {
				t.Errorf("Deploy called %d times for a refused shallow push", n)
			}
			if refs := e.lsRemote(url); len(refs) != 0 {
				t.Errorf("refs = %v after a refused shallow push, want none", refs)
			}
		})
	}
}

// TestShallowPushOnPushedHistoryDeploys: a CI job's depth-1 clone of a
// repository whose history was pushed before adds a commit and pushes it:
// the app's repository stays complete, and the commit deploys.
func TestShallowPushOnPushedHistoryDeploys(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t)
			full, clone := e.shallowClone()
			url := e.remote(transport, "web")
			base := e.mustGit(full, "rev-parse", "HEAD")
			e.mustGit(full, "push", "-q", url, "main")

			head := e.commit(clone, "c.txt", "c\n")
			out, err := e.git(clone, "push", url, "main")
			if err != nil {
				t.Fatalf("push from a shallow clone on pushed history: %v\n%s", err, out)
			}
			assertContains(t, out, "remote: Released v2:")
			if p := e.deployer.pushes(); len(p) != 2 || p[1].Old != base || p[1].New != head {
				t.Errorf("deploys = %+v, want the second from %s to %s", p, base, head)
			}
			if got := e.lsRemote(url)["refs/heads/main"]; got != head {
				t.Errorf("server main = %s, want %s", got, head)
			}
			e.mustGit(e.srv.RepoDir("acme", "web"), "fsck", "--no-progress")
		})
	}
}

// TestShallowPushUpToDate: a shallow clone pushing what the server has
// sends its shallow lines and a flush, which is git's "Everything
// up-to-date" and exit 0, and builds nothing. Over SSH git sends its
// shallow lines and a flush, which once failed with "invalid shallow line
// length"; over HTTP git 2.39 sends no request then, and the receiver's
// log tells whether one that came was served (TestShallowLinesAloneAnswered
// sends it).
func TestShallowPushUpToDate(t *testing.T) {
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			var logs platformtest.SyncBuffer
			e := newEnv(t, func(o *Options) {
				o.Log = funcr.New(func(_, args string) { _, _ = logs.Write([]byte(args + "\n")) }, funcr.Options{})
			})
			full, clone := e.shallowClone()
			url := e.remote(transport, "web")
			e.mustGit(full, "push", "-q", url, "main")
			out, err := e.git(clone, "push", url, "main")
			if err != nil {
				t.Fatalf("pushing from a shallow clone what the server has: %v\n%s", err, out)
			}
			assertContains(t, out, "Everything up-to-date")
			if n := len(e.deployer.pushes()); n != 1 {
				t.Errorf("Deploy called %d times, want 1 (the first push)", n)
			}
			if l := logs.String(); strings.Contains(l, `"error"`) {
				t.Errorf("the receiver logged an error:\n%s", l)
			}
		})
	}
}

// TestShallowLinesAloneAnswered: a smart-HTTP push request of a shallow
// clone's lines and a flush (what git's send-pack sends over HTTP with
// nothing to update) is served: nothing answered, nothing changed, no
// error. It once failed with "decoding update request: malformed request:
// invalid shallow line length: expected 48, got 49".
func TestShallowLinesAloneAnswered(t *testing.T) {
	fr := sharedFuzzRepo(t)
	q := newFuzzRequest(t, fr)
	var logs platformtest.SyncBuffer
	q.srv.log = funcr.New(func(_, args string) { _, _ = logs.Write([]byte(args + "\n")) }, funcr.Options{})
	body := "0035shallow " + fr.main + "\n" + "0034shallow " + fr.main + "0000"
	rec := q.post(serviceReceivePack, []byte(body))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("answer %d %q, want 200 and nothing", rec.Code, rec.Body)
	}
	if d := diffSnapshots(q.before, snapshot(t, q.dir)); len(d) > 0 {
		t.Errorf("the repository changed: %v", d)
	}
	if l := logs.String(); strings.Contains(l, `"error"`) {
		t.Errorf("the receiver logged an error:\n%s", l)
	}
}

func TestReadShallow(t *testing.T) {
	oid := strings.Repeat("ab", 20)
	command := "0074" + strings.Repeat("0", 40) + " " + oid + " refs/heads/main\x00report-status\n0000"
	for _, tc := range []struct {
		name, body string
		shallow    int
		rest       string // "" for none
		err        string
	}{
		{name: "nothing", body: ""},
		{name: "flush alone", body: "0000"},
		{name: "shallow and flush", body: "0035shallow " + oid + "\n0000", shallow: 1},
		{name: "command", body: command + "PACK", rest: command + "PACK"},
		{name: "shallow lines and command", body: "0035shallow " + oid + "\n0034shallow " + oid + command + "PACK",
			shallow: 2, rest: command + "PACK"},
		{name: "short oid", body: "0034shallow " + oid[:39] + "\n0000", err: `invalid shallow line "shallow ` + oid[:39] + `\n": want "shallow" and a commit's 40 hex digits`},
		{name: "not hex", body: "0035shallow " + strings.Repeat("g", 40) + "\n0000", err: "invalid shallow line"},
		{name: "bad length", body: "00zz", err: `invalid pkt-line length "00zz"`},
		{name: "short length", body: "0002", err: `invalid pkt-line length "0002"`},
		{name: "cut in a line", body: "0035shallow ab", err: "unexpected EOF"},
		{name: "cut after a line", body: "0035shallow " + oid + "\n", err: "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shallow, rest, err := readShallow(strings.NewReader(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(shallow) != tc.shallow {
				t.Errorf("%d shallow lines, want %d", len(shallow), tc.shallow)
			}
			for _, h := range shallow {
				if h.String() != oid {
					t.Errorf("shallow %s, want %s", h, oid)
				}
			}
			got := ""
			if rest != nil {
				b, _ := io.ReadAll(rest)
				got = string(b)
				if got == "" {
					t.Error("rest is empty, want nil")
				}
			}
			if got != tc.rest {
				t.Errorf("rest %q, want %q", got, tc.rest)
			}
		})
	}
}
