package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/pgtest"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// bex runs the CLI in process with its configuration under dir and the
// given environment, and returns what it printed and its error.
func bex(t *testing.T, dir string, env map[string]string, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := app.NewCommand(app.IO{
		Out:       &out,
		Err:       &errOut,
		In:        strings.NewReader(stdin),
		ConfigDir: dir,
		Getenv:    func(k string) string { return env[k] },
	})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

const publicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl dev@laptop"

func TestCLI(t *testing.T) {
	cp := cptest.Start(t)
	e := apitest.Start(t, cp)
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "cliacme")
	dir := t.TempDir()
	configPath := filepath.Join(dir, "bex", "config.json")

	// Before login, commands say how to log in.
	if _, err := bex(t, dir, nil, "", "apps", "list"); err == nil || !strings.Contains(err.Error(), "not logged in: run `bex login --api URL --token TOKEN`") {
		t.Fatalf("apps list before login: err = %v", err)
	}
	// A refused token is not saved.
	if _, err := bex(t, dir, nil, "", "login", "--api", e.URL, "--token", "bex_wrong"); err == nil || !strings.Contains(err.Error(), "the token was refused: check it or ask your operator for a new one") {
		t.Fatalf("login with a wrong token: err = %v", err)
	}
	if _, err := os.Stat(configPath); !os.IsNotExist(err) {
		t.Fatalf("config after a refused login: %v", err)
	}
	out, err := bex(t, dir, nil, "", "login", "--api", e.URL+"/", "--token", token)
	if err != nil {
		t.Fatal(err)
	}
	if out != "Logged in to "+e.URL+" as tenant cliacme (token test).\n" {
		t.Errorf("login printed %q", out)
	}
	fi, err := os.Stat(configPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v, want 0600", fi.Mode().Perm())
	}
	var saved app.Config
	b, err := os.ReadFile(configPath)
	if err != nil || json.Unmarshal(b, &saved) != nil || saved != (app.Config{API: e.URL, Token: token}) {
		t.Errorf("saved config %s (%v)", b, err)
	}

	// What the API has to show: a failed build with its log, two releases,
	// runtime log lines.
	buildAndReleases(t, e, tenant.ID, "web")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e.Logs.Add("cliacme", "web",
		api.LogLine{Time: t0, Process: "web", Instance: "1", Text: "listening on :5000"},
		api.LogLine{Time: t0.Add(time.Second), Process: "web", Instance: "1", Text: "GET / 200"},
		api.LogLine{Time: t0.Add(2 * time.Second), Process: "worker", Text: "tick"},
	)
	keyFile := filepath.Join(t.TempDir(), "id_ed25519.pub")
	if err := os.WriteFile(keyFile, []byte(publicKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	operator := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": e.OperatorToken}

	for _, tc := range []cliCase{
		{name: "create app", args: []string{"apps", "create", "web"}, want: "Created app web.\n" +
			"  git remote: http://git.bex.test:7000/cliacme/web.git\n" +
			"  url:        https://web-cliacme.apps.bex.test\n\n" +
			"Deploy it with:\n  git remote add bex http://git.bex.test:7000/cliacme/web.git\n  git push bex main\n"},
		{name: "create app json", args: []string{"apps", "create", "api", "--branch", "prod", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var a apiclient.App
			if err := json.Unmarshal(out, &a); err != nil || a.Name != "api" || a.Branch != "prod" || a.GitRemote != apitest.GitBase+"/cliacme/api.git" {
				t.Errorf("app = %+v, %v", a, err)
			}
		}},
		{name: "invalid name", args: []string{"apps", "create", "Web_1"}, wantErr: "(field name)"},
		{name: "list apps", args: []string{"apps", "list"}, want: "" +
			"NAME  STATUS   RELEASE  URL\n" +
			"api   pending  -        https://api-cliacme.apps.bex.test\n" +
			"web   pending  -        https://web-cliacme.apps.bex.test\n"},
		{name: "apps alone lists", args: []string{"apps"}, match: `(?m)^web   pending`},
		{name: "list apps json", args: []string{"apps", "list", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var as []apiclient.App
			if err := json.Unmarshal(out, &as); err != nil || len(as) != 2 || as[1].URL != "https://web-cliacme.apps.bex.test" {
				t.Errorf("apps = %+v, %v", as, err)
			}
		}},
		{name: "app info", args: []string{"apps", "info", "web"},
			match: `(?s)^Name:       web\nGit remote: http://git\.bex\.test:7000/cliacme/web\.git\nURL:        https://web-cliacme\.apps\.bex\.test\nBranch:     main\nRelease:    -\nStatus:     pending\nCluster:    pending\nCreated:    \d{4}-\d\d-\d\d \d\d:\d\d\n$`},
		{name: "app info placed", before: func(t *testing.T) {
			e.PlaceApp(t, "cliacme", "web", "alpha", true, "placed on alpha/workers (score 80, BinPack)")
		}, args: []string{"apps", "info", "web"}, match: `(?m)^Cluster:    alpha \(placed on alpha/workers \(score 80, BinPack\)\)$`},
		{name: "app info placed json", args: []string{"apps", "info", "web", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var a apiclient.App
			if err := json.Unmarshal(out, &a); err != nil || a.Cluster != "alpha" || a.Placed != "placed" || a.Placement != "placed on alpha/workers (score 80, BinPack)" {
				t.Errorf("app = %s, %v", out, err)
			}
		}},
		{name: "app info not placed", before: func(t *testing.T) {
			e.PlaceApp(t, "cliacme", "web", "", false, "No workload cluster can take the app: no pool has 4 CPU free")
		}, args: []string{"apps", "info", "web"}, match: `(?m)^Cluster:    none \(No workload cluster can take the app: no pool has 4 CPU free\)$`},
		{name: "missing app", args: []string{"apps", "info", "nope"}, wantErr: `app "nope" not found`},
		{name: "bad output", args: []string{"apps", "list", "-o", "yaml"}, wantErr: "-o yaml: want table or json"},

		// Stored without releases, so that the releases below are the
		// pushes' (release_cli_test.go has the config releases).
		{name: "env set", args: []string{"env", "set", "web", "GREETING=hello world", "EMPTY=", "--no-release"}, want: "" +
			"Stored without a release: the change goes out with the next release of web.\n" +
			"NAME      VALUE\n" +
			"EMPTY     \n" +
			"GREETING  hello world\n"},
		{name: "env set secret", args: []string{"env", "set", "web", "DATABASE_URL=postgres://u:hunter2@db", "--secret", "--no-release"},
			match: `(?m)^DATABASE_URL  \(secret\)$`, absent: "hunter2"},
		{name: "env list json", args: []string{"env", "list", "web", "-o", "json"}, absent: "hunter2", json: func(t *testing.T, out []byte) {
			var vs []apiclient.EnvVar
			if err := json.Unmarshal(out, &vs); err != nil || len(vs) != 3 || vs[0].Name != "DATABASE_URL" || !vs[0].Secret || vs[0].Value != nil {
				t.Errorf("env = %s, %v", out, err)
			}
		}},
		{name: "env set bad", args: []string{"env", "set", "web", "NOEQUALS"}, wantErr: `"NOEQUALS": write variables as KEY=VALUE`},
		{name: "env set reserved", args: []string{"env", "set", "web", "PORT=80"}, wantErr: "PORT is set by the platform (field set.PORT)"},
		{name: "env unset", args: []string{"env", "unset", "web", "EMPTY", "GREETING", "--no-release"}, want: "" +
			"Stored without a release: the change goes out with the next release of web.\n" +
			"NAME          VALUE\n" +
			"DATABASE_URL  (secret)\n"},

		{name: "builds", args: []string{"builds", "web"}, match: `^APP  BUILD  COMMIT   STARTED +TOOK +STATUS\nweb  1      abc1234  \d{4}-\d\d-\d\d \d\d:\d\d  \d+s +failed: compilation failed\n$`},
		{name: "all builds json", args: []string{"builds", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var bs []apiclient.Build
			if err := json.Unmarshal(out, &bs); err != nil || len(bs) != 1 || bs[0].Status != "failed" || bs[0].Commit != "abc1234ffff" {
				t.Errorf("builds = %s, %v", out, err)
			}
		}},
		{name: "build log", args: []string{"builds", "log", "web", "1"}, want: "-----> Go app detected\nmain.go:3: syntax error\n"},
		{name: "latest build log followed", args: []string{"builds", "log", "web", "-f"}, want: "-----> Go app detected\nmain.go:3: syntax error\n"},
		{name: "missing build", args: []string{"builds", "log", "web", "7"}, wantErr: `build 7 of app "web" not found`},

		{name: "releases", args: []string{"releases", "web"}, match: `^RELEASE  KIND +STATUS +DESCRIPTION     BY   CREATED\nv2       deploy +\S+ +Deploy def5678  git  \d{4}.*\nv1       deploy +\S+ +Deploy abc1234  git  \d{4}.*\n$`},
		{name: "rollback", args: []string{"rollback", "web"}, want: "Rolling web back to v1: release v3.\n"},
		{name: "rollback to v2 json", args: []string{"rollback", "web", "v2", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var rb apiclient.Rollback
			if err := json.Unmarshal(out, &rb); err != nil || rb != (apiclient.Rollback{Release: 4, RolledBackTo: 2}) {
				t.Errorf("rollback = %s, %v", out, err)
			}
		}},
		{name: "rollback to a missing release", args: []string{"rollback", "web", "9"}, wantErr: `app "web" has no release v9 (field release)`},
		{name: "releases say their kind", args: []string{"releases", "web"},
			match: `^RELEASE  KIND +STATUS +DESCRIPTION     BY +CREATED\nv4       rollback +\S+ +Rollback to v2  token:test +\d{4}.*\nv3       rollback +\S+ +Rollback to v1  token:test +\d{4}.*\nv2       deploy +\S+ +Deploy def5678  git +\d{4}.*\n`},
		{name: "releases kind json", args: []string{"releases", "web", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var rs []map[string]any
			if err := json.Unmarshal(out, &rs); err != nil || len(rs) != 4 {
				t.Fatalf("releases = %s, %v", out, err)
			}
			var got []string
			for _, r := range rs {
				got = append(got, fmt.Sprintf("v%v %v %v", r["number"], r["kind"], r["rollbackTo"]))
			}
			if want := "v4 rollback 2, v3 rollback 1, v2 deploy <nil>, v1 deploy <nil>"; strings.Join(got, ", ") != want {
				t.Errorf("releases -o json = %s, want %s:\n%s", strings.Join(got, ", "), want, out)
			}
		}},
		{name: "releases of a kind", args: []string{"releases", "web", "--kind", "deploy"},
			match: `^RELEASE  KIND +STATUS +DESCRIPTION     BY   CREATED\nv2       deploy +\S+ +Deploy def5678  git  \d{4}.*\nv1       deploy +\S+ +Deploy abc1234  git  \d{4}.*\n$`},
		{name: "releases of kinds json", args: []string{"releases", "web", "--kind", "rollback", "--kind", "deploy", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var rs []map[string]any
			if err := json.Unmarshal(out, &rs); err != nil || len(rs) != 4 {
				t.Fatalf("releases = %s, %v", out, err)
			}
			if r := rs[3]; r["number"] != 1.0 || r["kind"] != "deploy" || r["description"] != "Deploy abc1234" || r["image"] == nil || r["createdBy"] != "git" {
				t.Errorf("releases --kind -o json, v1 = %v, want the release's fields as without --kind", r)
			}
		}},
		{name: "releases of kinds comma-separated json", args: []string{"releases", "web", "--kind", "rollback,deploy", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var rs []apiclient.Release
			if err := json.Unmarshal(out, &rs); err != nil || len(rs) != 4 || rs[0].Number != 4 || rs[3].Number != 1 {
				t.Errorf("releases --kind rollback,deploy -o json = %s, %v", out, err)
			}
		}},
		{name: "releases of a kind there is none of", args: []string{"releases", "web", "--kind", "config"}, want: "No config releases of web\n"},
		{name: "releases of an unknown kind", args: []string{"releases", "web", "--kind", "restart"},
			wantErr: `release kind "restart": want one of deploy, rollback, config (field kind)`},

		{name: "logs", args: []string{"logs", "web", "--tail", "2"}, want: "" +
			"2026-01-02T03:04:06.000Z web.1: GET / 200\n" +
			"2026-01-02T03:04:07.000Z worker: tick\n"},
		{name: "logs json", args: []string{"logs", "web", "--tail", "1", "-o", "json"}, want: `{"time":"2026-01-02T03:04:07Z","process":"worker","text":"tick"}` + "\n"},

		{name: "keys add", args: []string{"keys", "add", keyFile}, match: `^Added key dev@laptop \(SHA256:[A-Za-z0-9+/]+\)\.\n$`},
		{name: "keys list", args: []string{"keys", "list"}, match: `^ID +NAME +FINGERPRINT\n[0-9a-f-]{36}  dev@laptop  SHA256:\S+\n$`},
		{name: "keys add again", args: []string{"keys", "add", "-", "--name", "again"}, stdin: publicKey, wantErr: "already exists (field publicKey)"},
		{name: "keys remove", args: []string{"keys", "remove", "dev@laptop"}, match: `^Removed key dev@laptop`},
		{name: "keys list empty json", args: []string{"keys", "list", "-o", "json"}, want: "[]\n"},

		{name: "delete unconfirmed", args: []string{"apps", "delete", "api"}, wantErr: "run again with --confirm api"},
		{name: "delete", args: []string{"apps", "delete", "api", "--confirm", "api"}, want: "Deleted app api.\n"},

		{name: "admin with a tenant token", args: []string{"admin", "tenant", "create", "x"}, wantErr: "not allowed: this needs an operator's token"},
		{name: "admin create", env: operator, args: []string{"admin", "tenant", "create", "clinew"},
			match: `^Created tenant clinew\. Its API token, shown this once:\n\n  bex_[a-z2-7]{52}\n\nThe tenant logs in with:\n  bex login --api http://127\.0\.0\.1:\d+ --token bex_[a-z2-7]{52}\n$`},
		{name: "admin create json", env: operator, args: []string{"admin", "tenant", "create", "clinew2", "-o", "json"}, json: func(t *testing.T, out []byte) {
			var c apiclient.CreatedTenant
			if err := json.Unmarshal(out, &c); err != nil || c.Tenant.Name != "clinew2" || !strings.HasPrefix(c.Token, "bex_") {
				t.Errorf("created = %s, %v", out, err)
			}
		}},
		{name: "admin list", env: operator, args: []string{"admin", "tenant", "list"}, match: `(?m)^cliacme +\d{4}.*\nclinew +`},
		{name: "operator on apps", env: operator, args: []string{"apps", "list"}, wantErr: "not allowed: an operator's token acts for no tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, dir, nil) })
	}

	// The audit log saw each change, by the CLI's token.
	entries, err := e.Store.ListAudit(ctx, store.AuditFilter{TenantID: tenant.ID, Action: "app.rollback"})
	if err != nil || len(entries) != 2 || entries[0].Actor != "token:test" {
		t.Errorf("rollback audit entries = %+v, %v", entries, err)
	}

	// A revoked token gets the message that says what to do.
	toks, err := e.Store.ListTokens(ctx, tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		if err := e.Store.RevokeToken(ctx, tenant.ID, tok.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bex(t, dir, nil, "", "apps", "list"); err == nil || err.Error() != "the token was refused: check it or ask your operator for a new one, then run `bex login --api URL --token TOKEN`" {
		t.Errorf("apps list with a revoked token: err = %v", err)
	}
}

// buildAndReleases gives app of the tenant what the API has to show of
// a push: build 1, failed ("compilation failed") with a two-line log, and
// two deploy releases, v1 "Deploy abc1234" and v2 "Deploy def5678".
func buildAndReleases(t *testing.T, e *apitest.Env, tenantID, app string) {
	t.Helper()
	ctx := t.Context()
	b, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenantID, App: app, Commit: "abc1234ffff"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.AppendBuildLog(ctx, b.ID, "-----> Go app detected", "main.go:3: syntax error"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.FinishBuild(ctx, b.ID, store.BuildResult{Status: store.BuildFailed, Error: "compilation failed"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"Deploy abc1234", "Deploy def5678"} {
		if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenantID, App: app, Image: "r/" + app + "@sha256:" + d[7:], Kind: store.ReleaseKindDeploy,
			Description: d, CreatedBy: "git"}); err != nil {
			t.Fatal(err)
		}
	}
}

// cliCase is a run of bex and what it must print.
type cliCase struct {
	name  string
	env   map[string]string
	args  []string
	stdin string
	// want is the exact output; match a pattern it must match.
	want    string
	match   string
	absent  string
	wantErr string
	// json decodes -o json output and checks it.
	json func(t *testing.T, out []byte)
	// before, when set, runs first.
	before func(t *testing.T)
}

// run runs the case with its configuration under dir and its env, or env
// when it has none, and checks what it printed.
func (tc cliCase) run(t *testing.T, dir string, env map[string]string) {
	t.Helper()
	if tc.before != nil {
		tc.before(t)
	}
	if tc.env != nil {
		env = tc.env
	}
	out, err := bex(t, dir, env, tc.stdin, tc.args...)
	if !checkRun(t, tc.args, out, err, tc.wantErr, tc.want, tc.match) {
		return
	}
	if tc.absent != "" && strings.Contains(out, tc.absent) {
		t.Errorf("bex %s printed %q, which must not show", strings.Join(tc.args, " "), tc.absent)
	}
	if tc.json != nil {
		tc.json(t, []byte(out))
	}
}

// checkRun compares what a bex command printed and returned with a case's
// expectations: wantErr, when set, must be in the error; else the command
// must succeed, print exactly want (when set) and match the regular
// expression match (when set). It reports whether the command succeeded,
// so that the case's own checks of the output can follow.
func checkRun(t *testing.T, args []string, out string, err error, wantErr, want, match string) bool {
	t.Helper()
	cmd := strings.Join(args, " ")
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("bex %s: err = %v, want it to say %q", cmd, err, wantErr)
		}
		return false
	}
	if err != nil {
		t.Fatalf("bex %s: %v", cmd, err)
	}
	if want != "" && out != want {
		t.Errorf("bex %s printed\n%s\nwant\n%s", cmd, out, want)
	}
	if match != "" && !regexp.MustCompile(match).MatchString(out) {
		t.Errorf("bex %s printed\n%s\nwant it to match %s", cmd, out, match)
	}
	return true
}
