package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apitest"
)

// jsonCase is one run of a bex command with -o json, and what it must
// print. Exactly one of fields, lines, raw and err says what: one JSON
// value with fields, a stream of JSON objects with lines' fields, output
// that is no JSON by design (raw says why), or a failure.
type jsonCase struct {
	// cmd is the command's path, as the command tree names it: "bex apps
	// delete". The case's args must run that command.
	cmd string
	// name tells apart the cases of one command.
	name string
	// as runs the command with this configuration and environment, as
	// it is when the case runs; nil: the tenant's admin token.
	as     *app.IO
	args   []string
	before func(t *testing.T)

	// fields are the fields the JSON value must have: of the object, or
	// of each element of an array (which must have one); "a.b" is field
	// b of the object in field a.
	fields []string
	// lines are the fields of each object of a stream, one a line.
	lines []string
	// raw says why the command prints no JSON with -o json; out is then
	// what it prints.
	raw, out string
	// err is the failure: stdout empty, the error object on stderr with
	// this kind (and quota or field, when set), the kind's exit code.
	err *app.Error
	// check checks more of what was printed on standard output.
	check func(t *testing.T, out []byte)
}

// TestEveryCommandSpeaksJSON walks bex's command tree and runs every
// command that runs something with -o json against the real API, in one
// environment: each prints one JSON value with the fields cli.md and
// api.md give it, a stream one object a line, or fails with its kind's
// exit code, nothing on standard output and the JSON error object on
// standard error. A command without a case fails the test, so that a new
// one gets its JSON, and a case that says why a command prints no JSON
// (bex run attached prints its command's output as it comes).
func TestEveryCommandSpeaksJSON(t *testing.T) {
	cp := cptest.Start(t)
	e := apitest.StartWith(t, cp, apitest.Options{LocalFleet: &apitest.LocalFleet{}})
	tenant, token := e.TenantToken(t, "clijson")
	ioOf := func(env map[string]string) app.IO {
		return app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string { return env[k] }}
	}
	admin := ioOf(map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token})
	operator := ioOf(map[string]string{"BEX_API": e.URL, "BEX_TOKEN": e.OperatorToken})
	fresh := ioOf(nil)
	var dev, gone app.IO // members of clijson, made by the cases that need them

	// What the API has to show: an app with a failed build and its log,
	// two releases, the second serving, and log lines.
	if _, stderr, code := bexRun(t, admin, "apps", "create", "shop"); code != 0 {
		t.Fatalf("creating shop: exit %d: %s", code, stderr)
	}
	buildAndReleases(t, e, tenant.ID, "shop")
	e.SetCurrentRelease(t, "clijson", "shop", 2)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e.Logs.Add("clijson", "shop",
		api.LogLine{Time: t0, Process: "web", Instance: "1", Text: "listening on :5000"},
		api.LogLine{Time: t0.Add(time.Second), Process: "web", Instance: "1", Text: "GET / 200"},
	)
	keyFile := filepath.Join(t.TempDir(), "id_ed25519.pub")
	if err := os.WriteFile(keyFile, []byte(publicKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.CreateCluster(t, "fleet-json", "canary", "v1.36.3", map[string]string{"fleet": "json"})
	var apiserver string
	if s := cp.APIServers(); len(s) > 0 {
		apiserver = s[0].URL()
	}

	app1 := []string{"name", "tenant", "gitRemote", "url", "branch", "currentRelease", "status", "placed", "createdAt", "plan", "maintenance"}
	release := []string{"number", "kind", "description", "image", "current", "status", "createdBy", "createdAt"}
	run := []string{"number", "release", "command", "terminal", "detached", "createdBy", "status", "startedAt"}
	quota := []string{"tenant", "quotas.apps", "quotas.concurrentRuns", "quotas.cpu", "quotas.memory", "overrides", "usage.apps", "usage.runningRuns", "buildMinutesSince"}
	members := []string{"members", "invitations"}
	invitation := []string{"id", "email", "role", "prefix", "invitedBy", "expiresAt", "code"}
	member := []string{"email", "role", "createdAt", "you"}
	removed := []string{"email", "invitation"}
	token1 := []string{"id", "name", "prefix", "scope", "createdAt", "expired", "current"}
	upgrade := []string{"name", "targetVersion", "maxParallelClusters", "soak", "wireMVP", "paused", "aborted", "conditions", "clusters", "createdAt"}
	change := []string{"upgrade.name", "upgrade.paused", "changed", "message"}
	cordon := []string{"name", "cordoned", "changed", "message"}
	route := []string{"hostname", "pathPrefix", "app", "tls", "ready", "status", "conditions", "dnsTarget.cname", "createdAt"}

	cases := []jsonCase{
		{cmd: "bex", name: "alone", args: []string{}, raw: "bex alone prints its help, for people", check: func(t *testing.T, out []byte) {
			if !bytes.HasPrefix(out, []byte("bex talks to a bex platform's API")) {
				t.Errorf("bex alone printed\n%s\nwant the help", out)
			}
		}},
		{cmd: "bex login", as: &fresh, args: []string{"login", "--api", e.URL, "--token", token}, fields: []string{"tenant", "operator", "token", "scope"},
			check: wantField("tenant", "clijson")},
		{cmd: "bex login", name: "refused token", as: &fresh, args: []string{"login", "--api", e.URL, "--token", "bex_wrong"},
			err: &app.Error{Kind: app.KindUnauthenticated, Status: 401}},

		{cmd: "bex apps create", args: []string{"apps", "create", "gone"}, fields: app1, check: wantField("name", "gone")},
		{cmd: "bex apps", args: []string{"apps"}, fields: app1},
		{cmd: "bex apps list", args: []string{"apps", "list"}, fields: app1},
		{cmd: "bex apps info", args: []string{"apps", "info", "shop"}, fields: app1, check: wantField("currentRelease", 2.0)},
		{cmd: "bex apps info", name: "not found", args: []string{"apps", "info", "nope"}, err: &app.Error{Kind: app.KindNotFound, Status: 404}},
		{cmd: "bex apps set", args: []string{"apps", "set", "gone", "--branch", "prod"}, fields: app1, check: wantField("branch", "prod")},
		{cmd: "bex apps delete", args: []string{"apps", "delete", "gone", "--confirm", "gone"}, fields: []string{"deleted"}, check: wantField("deleted", "gone")},
		{cmd: "bex apps delete", name: "unconfirmed", args: []string{"apps", "delete", "shop"}, err: &app.Error{Kind: app.KindUsage}},

		{cmd: "bex builds", args: []string{"builds", "shop"}, fields: []string{"app", "number", "commit", "status", "error", "startedAt", "finishedAt"}},
		{cmd: "bex builds log", args: []string{"builds", "log", "shop", "1"}, lines: []string{"text"}, check: func(t *testing.T, out []byte) {
			var got []string
			for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
				var l struct{ Text string }
				if err := dec.Decode(&l); err != nil {
					t.Fatal(err)
				}
				got = append(got, l.Text)
			}
			if want := []string{"-----> Go app detected", "main.go:3: syntax error"}; !slices.Equal(got, want) {
				t.Errorf("printed the lines %q, want %q", got, want)
			}
		}},
		{cmd: "bex builds log", name: "missing build", args: []string{"builds", "log", "shop", "7"}, err: &app.Error{Kind: app.KindNotFound, Status: 404}},

		{cmd: "bex env set", args: []string{"env", "set", "shop", "GREETING=<b>hello</b> & bye"}, fields: []string{"name", "value"}, check: func(t *testing.T, out []byte) {
			wantField("0.name", "GREETING")(t, out)
			// As typed: JSON needs no escape of <, > or & (Go's default
			// writes \u003c for HTML).
			if !bytes.Contains(out, []byte(`"<b>hello</b> & bye"`)) {
				t.Errorf("the value printed escaped:\n%s", out)
			}
		}},
		{cmd: "bex env set", name: "secret, stored", args: []string{"env", "set", "shop", "API_KEY=hunter2", "--secret", "--no-release"}, fields: []string{"name"},
			check: func(t *testing.T, out []byte) {
				if bytes.Contains(out, []byte("hunter2")) || !bytes.Contains(out, []byte(`"secret": true`)) {
					t.Errorf("printed a secret's value, or not that it is one:\n%s", out)
				}
			}},
		{cmd: "bex env set", name: "reserved", args: []string{"env", "set", "shop", "PORT=80"}, err: &app.Error{Kind: app.KindInvalid, Status: 422, Field: "set.PORT"}},
		{cmd: "bex env list", args: []string{"env", "list", "shop"}, fields: []string{"name"}},
		{cmd: "bex env unset", args: []string{"env", "unset", "shop", "GREETING"}, fields: []string{"name", "secret"}, check: wantField("0.name", "API_KEY")},

		{cmd: "bex releases", args: []string{"releases", "shop"}, fields: release, check: wantField("0.kind", "config")},
		{cmd: "bex releases info", args: []string{"releases", "info", "shop", "v2"}, fields: append(release, "env", "changes.previous", "changes.image"), check: wantField("number", 2.0)},
		{cmd: "bex rollback", args: []string{"rollback", "shop", "v1"}, fields: []string{"release", "rolledBackTo"}, check: wantField("rolledBackTo", 1.0)},
		{cmd: "bex restart", args: []string{"restart", "shop"}, fields: []string{"release", "processes"}},
		{cmd: "bex scale", args: []string{"scale", "shop", "web=2"}, fields: []string{"release", "processes.web", "plan"}, check: wantField("processes.web", 2.0)},
		{cmd: "bex scale", name: "quota", args: []string{"scale", "shop", "web=50"}, err: &app.Error{Kind: app.KindForbidden, Status: 403, Quota: "instancesPerProcess"}},
		{cmd: "bex ps", args: []string{"ps", "shop"}, fields: []string{"app", "release", "ready", "message", "instances", "runs"}},
		{cmd: "bex metrics", args: []string{"metrics", "shop"}, fields: []string{"app", "intervalSeconds", "sinceSeconds", "points"}},
		{cmd: "bex open", args: []string{"open", "shop"}, fields: app1, check: wantField("url", "https://shop-clijson."+apitest.AppDomain)},
		{cmd: "bex logs", args: []string{"logs", "shop"}, lines: []string{"time", "process", "instance", "text"}, check: func(t *testing.T, out []byte) {
			if n := bytes.Count(out, []byte("\n")); n != 2 {
				t.Errorf("printed %d lines, want the 2 of shop:\n%s", n, out)
			}
		}},

		// bex run attached: the command's own output, which no JSON can
		// hold as it comes; bex adds nothing.
		{cmd: "bex run", args: []string{"run", "shop", "--", "echo", "hello"}, raw: "an attached run prints its command's stdout as it comes and exits with its status", out: "hello\n"},
		{cmd: "bex admin quota set", as: &operator, args: []string{"admin", "quota", "set", "clijson", "concurrentRuns=1"}, fields: append(quota, "defaults", "overrides.concurrentRuns"),
			check: wantField("overrides.concurrentRuns", 1.0)},
		{cmd: "bex run", name: "detached", args: []string{"run", "-d", "shop", "--", "sleep", "600"}, fields: run, check: wantField("detached", true)},
		{cmd: "bex run", name: "over the concurrentRuns quota", args: []string{"run", "shop", "--", "echo", "hello"},
			err: &app.Error{Kind: app.KindForbidden, Status: 403, Quota: "concurrentRuns"}},
		{cmd: "bex runs", args: []string{"runs", "shop"}, fields: run},
		{cmd: "bex runs stop", args: []string{"runs", "stop", "shop", "run.2"}, fields: append(run, "stopRequestedAt", "stopRequestedBy")},
		{cmd: "bex quota", args: []string{"quota"}, fields: quota},

		{cmd: "bex keys add", args: []string{"keys", "add", keyFile}, fields: []string{"id", "name", "fingerprint", "publicKey", "createdAt"}, check: wantField("name", "dev@laptop")},
		{cmd: "bex keys list", args: []string{"keys", "list"}, fields: []string{"id", "name", "fingerprint"}},
		{cmd: "bex keys remove", args: []string{"keys", "remove", "dev@laptop"}, fields: []string{"id", "name", "fingerprint"}, check: wantField("name", "dev@laptop")},
		{cmd: "bex keys remove", name: "missing", args: []string{"keys", "remove", "dev@laptop"}, err: &app.Error{Kind: app.KindNotFound}},

		{cmd: "bex routes add", args: []string{"routes", "add", "www.clijson.test", "--app", "shop"}, fields: route},
		{cmd: "bex routes list", args: []string{"routes", "list", "--app", "shop"}, fields: route},
		{cmd: "bex routes remove", args: []string{"routes", "remove", "www.clijson.test", "--app", "shop"}, fields: []string{"removed", "pathPrefix", "app"},
			check: wantField("removed", "www.clijson.test")},

		{cmd: "bex members add", args: []string{"members", "add", "ann@clijson.test", "--role", "viewer"}, fields: invitation},
		{cmd: "bex members", args: []string{"members"}, fields: members, before: func(t *testing.T) {
			dev = ioOf(map[string]string{"BEX_API": e.URL, "BEX_TOKEN": e.Member(t, token, "dev@clijson.test", "developer")})
		}, check: wantField("members.0.email", "dev@clijson.test")},
		{cmd: "bex members list", args: []string{"members", "list"}, fields: append(members, "members.0.role", "invitations.0.email"),
			check: wantField("invitations.0.code", nil)},
		{cmd: "bex members set-role", args: []string{"members", "set-role", "dev@clijson.test", "viewer"}, fields: member, check: wantField("role", "viewer")},
		{cmd: "bex members remove", name: "an invitation", args: []string{"members", "remove", "ann@clijson.test"}, fields: removed, check: wantField("invitation", true)},
		{cmd: "bex members remove", args: []string{"members", "remove", "dev@clijson.test"}, fields: removed, check: wantField("invitation", false)},
		{cmd: "bex apps list", name: "the removed member's token", as: &dev, args: []string{"apps", "list"}, err: &app.Error{Kind: app.KindUnauthenticated, Status: 401}},
		{cmd: "bex members remove", name: "nobody", args: []string{"members", "remove", "ann@clijson.test"}, err: &app.Error{Kind: app.KindNotFound}},

		{cmd: "bex tokens create", args: []string{"tokens", "create", "ci", "--scope", "read"}, fields: []string{"secret", "token.id", "token.name", "token.scope"},
			check: wantField("token.scope", "read")},
		{cmd: "bex tokens", args: []string{"tokens"}, fields: token1},
		{cmd: "bex tokens list", args: []string{"tokens", "list"}, fields: token1},
		{cmd: "bex tokens revoke", args: []string{"tokens", "revoke", "ci"}, fields: token1, check: wantField("name", "ci")},
		{cmd: "bex tokens revoke", name: "unknown", args: []string{"tokens", "revoke", "ci"}, err: &app.Error{Kind: app.KindNotFound}},
		{cmd: "bex tokens revoke", name: "a name two tokens have", args: []string{"tokens", "revoke", "twin"}, err: &app.Error{Kind: app.KindUsage}, before: func(t *testing.T) {
			for range 2 {
				if _, stderr, code := bexRun(t, admin, "tokens", "create", "twin"); code != 0 {
					t.Fatalf("creating a token named twin: exit %d: %s", code, stderr)
				}
			}
		}},

		{cmd: "bex admin tenant create", as: &operator, args: []string{"admin", "tenant", "create", "clijson2"}, fields: []string{"tenant.name", "tenant.createdAt", "token"}},
		{cmd: "bex admin tenant create", name: "a tenant's token", args: []string{"admin", "tenant", "create", "x"}, err: &app.Error{Kind: app.KindForbidden, Status: 403}},
		{cmd: "bex admin tenant list", as: &operator, args: []string{"admin", "tenant", "list"}, fields: []string{"name", "createdAt"}},
		{cmd: "bex admin quota", as: &operator, args: []string{"admin", "quota", "clijson"}, fields: append(quota, "defaults.concurrentRuns")},
		{cmd: "bex admin quota", name: "unknown tenant", as: &operator, args: []string{"admin", "quota", "nope"}, err: &app.Error{Kind: app.KindNotFound, Status: 404}},
		{cmd: "bex admin members add", as: &operator, args: []string{"admin", "members", "add", "ops@clijson.test", "--tenant", "clijson"}, fields: invitation,
			check: wantField("role", "admin")},
		{cmd: "bex admin members list", as: &operator, args: []string{"admin", "members", "list", "--tenant", "clijson"}, fields: members, before: func(t *testing.T) {
			gone = ioOf(map[string]string{"BEX_API": e.URL, "BEX_TOKEN": e.Member(t, token, "gone@clijson.test", "developer")})
		}},
		{cmd: "bex admin members list", name: "without --tenant", as: &operator, args: []string{"admin", "members", "list"}, err: &app.Error{Kind: app.KindUsage, Field: "tenant"}},
		{cmd: "bex admin members set-role", as: &operator, args: []string{"admin", "members", "set-role", "gone@clijson.test", "viewer", "--tenant", "clijson"}, fields: member},
		{cmd: "bex admin members remove", as: &operator, args: []string{"admin", "members", "remove", "gone@clijson.test", "--tenant", "clijson"}, fields: removed,
			check: wantField("invitation", false)},
		{cmd: "bex apps list", name: "the member the operator removed", as: &gone, args: []string{"apps", "list"}, err: &app.Error{Kind: app.KindUnauthenticated, Status: 401}},
		{cmd: "bex admin members remove", name: "an invitation", as: &operator, args: []string{"admin", "members", "remove", "ops@clijson.test", "--tenant", "clijson"}, fields: removed,
			check: wantField("invitation", true)},

		{cmd: "bex fleet create", as: &operator, args: []string{"fleet", "create", "json-1", "--version", "v1.36.3"},
			fields: []string{"name", "version", "controlPlaneReplicas", "workerReplicas", "addressBlock", "endpoint", "message"}, check: wantField("name", "default/json-1")},
		{cmd: "bex fleet list", as: &operator, args: []string{"fleet", "list"}, fields: []string{"name", "version", "paused", "cordoned"}},
		{cmd: "bex fleet cordon", as: &operator, args: []string{"fleet", "cordon", "json-1"}, fields: cordon, check: wantField("cordoned", true)},
		{cmd: "bex fleet uncordon", as: &operator, args: []string{"fleet", "uncordon", "default/json-1"}, fields: cordon, check: wantField("cordoned", false)},
		{cmd: "bex fleet delete", as: &operator, args: []string{"fleet", "delete", "json-1"}, fields: []string{"name", "message"}, check: wantField("name", "default/json-1")},
		{cmd: "bex fleet delete", name: "missing", as: &operator, args: []string{"fleet", "delete", "json-9"}, err: &app.Error{Kind: app.KindNotFound, Status: 404}},

		{cmd: "bex upgrade plan", as: &operator, args: []string{"upgrade", "plan", "--to", "v1.37.2", "--selector", "fleet=json"},
			fields: []string{"targetVersion", "stages", "skipped", "refused"}, check: wantField("stages.0.clusters.0.name", "fleet-json/canary")},
		{cmd: "bex upgrade start", as: &operator, args: []string{"upgrade", "start", "json-137", "--to", "v1.37.2", "--selector", "fleet=json"}, fields: upgrade},
		{cmd: "bex upgrade status", as: &operator, args: []string{"upgrade", "status"}, fields: upgrade},
		{cmd: "bex upgrade status", name: "one", as: &operator, args: []string{"upgrade", "status", "json-137"}, fields: upgrade},
		{cmd: "bex upgrade pause", as: &operator, args: []string{"upgrade", "pause", "json-137"}, fields: change, check: wantField("upgrade.paused", true)},
		{cmd: "bex upgrade resume", as: &operator, args: []string{"upgrade", "resume", "json-137"}, fields: change, check: wantField("upgrade.paused", false)},
		{cmd: "bex upgrade abort", as: &operator, args: []string{"upgrade", "abort", "json-137"}, fields: change, check: wantField("upgrade.aborted", true)},
		{cmd: "bex upgrade pause", name: "missing", as: &operator, args: []string{"upgrade", "pause", "nope"}, err: &app.Error{Kind: app.KindNotFound, Status: 404}},
		{cmd: "bex upgrade verify", as: &fresh, args: []string{"upgrade", "verify", "--kubeconfig", cp.KubeconfigPath(), "--apiserver", apiserver, "--probe-apps=false"},
			fields: []string{"passed", "probes", "skewSets", "discovery", "metrics", "leases"}},
		{cmd: "bex upgrade verify", name: "no apiserver", as: &fresh, args: []string{"upgrade", "verify", "--kubeconfig", cp.KubeconfigPath()}, err: &app.Error{Kind: app.KindUsage}},
	}

	// Every command that runs something has a case, and each case runs
	// the command it names.
	root := app.NewCommand(app.IO{})
	var commands []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() {
			commands = append(commands, c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, c := range commands {
		if !slices.ContainsFunc(cases, func(tc jsonCase) bool { return tc.cmd == c }) {
			t.Errorf("%s has no case of its -o json: add one to TestEveryCommandSpeaksJSON", c)
		}
	}
	for _, tc := range cases {
		c, _, err := root.Find(tc.args)
		if err != nil || c.CommandPath() != tc.cmd {
			t.Errorf("case %q runs %v, not %s (%v)", tc.cmd, tc.args, tc.cmd, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	for _, tc := range cases {
		t.Run(strings.TrimSpace(strings.TrimPrefix(tc.cmd, "bex")+" "+tc.name), func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			io := admin
			if tc.as != nil {
				io = *tc.as
			}
			args := withJSON(tc.args)
			stdout, stderr, code := bexRun(t, io, args...)
			cmd := "bex " + strings.Join(args, " ")
			switch {
			case tc.err != nil:
				var got struct {
					Error *app.Error `json:"error"`
				}
				if err := json.Unmarshal([]byte(stderr), &got); err != nil || got.Error == nil || strings.Count(stderr, "\n") != 1 {
					t.Fatalf("%s: exit %d, stderr %q is not one line of a JSON error object (%v)", cmd, code, stderr, err)
				}
				g := got.Error
				if g.Kind != tc.err.Kind || g.Status != tc.err.Status || g.Quota != tc.err.Quota || tc.err.Field != "" && g.Field != tc.err.Field || g.Message == "" ||
					code != g.ExitCode() || stdout != "" {
					t.Errorf("%s: exit %d, stdout %q, error %+v; want exit %d, no stdout, an error %+v with a message", cmd, code, stdout, *g, tc.err.ExitCode(), *tc.err)
				}
				return
			case code != 0 || stderr != "":
				t.Fatalf("%s: exit %d, stderr %q", cmd, code, stderr)
			case tc.raw != "":
				if json.Valid([]byte(stdout)) && stdout != "" || tc.out != "" && stdout != tc.out {
					t.Errorf("%s printed %q; want %q, no JSON: %s", cmd, stdout, tc.out, tc.raw)
				}
			case tc.lines != nil:
				if stdout == "" {
					t.Fatalf("%s printed nothing; want JSON lines", cmd)
				}
				for _, line := range strings.SplitAfter(strings.TrimSuffix(stdout, "\n"), "\n") {
					v := oneJSON(t, cmd, line)
					if strings.Contains(strings.TrimSuffix(line, "\n"), "\n") {
						t.Errorf("%s: a line of the stream holds more than one line: %q", cmd, line)
					}
					hasFields(t, cmd, v, tc.lines)
				}
			default:
				hasFields(t, cmd, oneJSON(t, cmd, stdout), tc.fields)
			}
			if tc.check != nil {
				tc.check(t, []byte(stdout))
			}
		})
	}
}

// withJSON adds -o json to args, before a -- that ends bex's own flags.
func withJSON(args []string) []string {
	i := slices.Index(args, "--")
	if i < 0 {
		i = len(args)
	}
	return slices.Concat(args[:i], []string{"-o", "json"}, args[i:])
}

// oneJSON decodes out, which must be one JSON value and nothing else.
func oneJSON(t *testing.T, cmd, out string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s printed %q: not JSON: %v", cmd, out, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("%s printed more than one JSON value:\n%s", cmd, out)
	}
	return v
}

// hasFields checks that v has each field, or that v is an array whose
// elements all have them and that has one.
func hasFields(t *testing.T, cmd string, v any, fields []string) {
	t.Helper()
	items := []any{v}
	if a, ok := v.([]any); ok {
		if len(a) == 0 {
			t.Errorf("%s printed an empty array; the case wants one with %s", cmd, strings.Join(fields, ", "))
		}
		items = a
	}
	for _, item := range items {
		for _, f := range fields {
			if _, ok := field(item, f); !ok {
				b, _ := json.Marshal(item)
				t.Errorf("%s printed %s without the field %s", cmd, b, f)
			}
		}
	}
}

// field returns the field at path ("a.b", "0.name": an array's element)
// of v.
func field(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// wantField checks that the JSON printed has want at path; nil wants the
// field absent.
func wantField(path string, want any) func(t *testing.T, out []byte) {
	return func(t *testing.T, out []byte) {
		t.Helper()
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		got, ok := field(v, path)
		if want == nil && ok || want != nil && got != want {
			t.Errorf("%s = %v (present: %v), want %v, in\n%s", path, got, ok, want, out)
		}
	}
}
