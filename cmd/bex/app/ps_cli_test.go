package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// gitCheckout makes a git repository whose remote named name has url.
func gitCheckout(t *testing.T, name, url string) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"remote", "add", name, url}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	return dir
}

// TestPsCLI: bex ps shows the instances the runtime runs, a crash counted
// as a restart, with the app named or found from the checkout's bex
// remote; -o json prints the API's answer; --watch follows the crash and
// the restart, as tables or JSON lines, until interrupted.
func TestPsCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	_, token := e.TenantToken(t, "clips")
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	io := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string { return env[k] }}
	run := func(io app.IO, args ...string) string {
		t.Helper()
		stdout, stderr, code := bexRun(t, io, args...)
		if code != 0 {
			t.Fatalf("bex %q: exit %d: %s", args, code, stderr)
		}
		return stdout
	}
	run(io, "apps", "create", "shop")
	if out := run(io, "ps", "shop"); out != "No instances of shop: shop has no release yet: push to its git remote\n" {
		t.Errorf("ps before any release printed %q", out)
	}

	e.RunTestApp(t, "clips", "shop", 1, "worker")
	// Two watchers follow the crash: one prints tables, one JSON lines.
	watchCtx, stopWatching := context.WithCancel(t.Context())
	defer stopWatching()
	type watcher struct {
		out  platformtest.SyncBuffer
		code chan int
	}
	watch := func(args ...string) *watcher {
		w := &watcher{code: make(chan int, 1)}
		wio := io
		wio.Out, wio.Err = &w.out, &w.out
		go func() {
			w.code <- app.Run(watchCtx, wio, append([]string{"ps", "shop", "--watch", "--interval", "1s"}, args...))
		}()
		return w
	}
	table, lines := watch(), watch("-o", "json")
	platformtest.Eventually(t, time.Minute, "both watchers print web.0 up", func(context.Context) error {
		if !regexp.MustCompile(`web\.0 +up .*v1 +0\n`).MatchString(table.out.String()) || !strings.Contains(lines.out.String(), `"state":"up"`) {
			return fmt.Errorf("table:\n%s\njson:\n%s", table.out.String(), lines.out.String())
		}
		return nil
	})
	e.CrashTestApp(t, "clips", "shop")
	platformtest.Eventually(t, time.Minute, "bex ps shows web.0 up again after one restart", func(context.Context) error {
		var is apiclient.Instances
		if err := json.Unmarshal([]byte(run(io, "ps", "shop", "-o", "json")), &is); err != nil {
			return err
		}
		if len(is.Instances) != 2 || is.Instances[0].Restarts != 1 || is.Instances[0].State != apiclient.InstanceUp {
			return fmt.Errorf("instances %+v", is.Instances)
		}
		return nil
	})
	// The watchers saw the crash and web.0 up again, restarted once, and
	// end with no error when interrupted.
	platformtest.Eventually(t, 30*time.Second, "both watchers print web.0 restarted", func(context.Context) error {
		if !regexp.MustCompile(`web\.0 +up .*v1 +1\n`).MatchString(table.out.String()) || !strings.Contains(lines.out.String(), `"restarts":1`) {
			return fmt.Errorf("table:\n%s\njson:\n%s", table.out.String(), lines.out.String())
		}
		return nil
	})
	stopWatching()
	for name, w := range map[string]*watcher{"table": table, "json": lines} {
		if code := <-w.code; code != 0 {
			t.Errorf("bex ps --watch (%s) interrupted: exit %d\n%s", name, code, w.out.String())
		}
	}
	if blocks := regexp.MustCompile(`(?m)^--- \d\d:\d\d:\d\d$`).FindAllString(table.out.String(), -1); len(blocks) < 2 {
		t.Errorf("bex ps --watch printed %d tables, want one before the crash and one after (more if it saw the crash itself):\n%s", len(blocks), table.out.String())
	}
	var restarts []int
	for _, line := range strings.Split(strings.TrimSpace(lines.out.String()), "\n") {
		var is apiclient.Instances
		if err := json.Unmarshal([]byte(line), &is); err != nil {
			t.Fatalf("bex ps --watch -o json printed a line that is no JSON object: %q: %v", line, err)
		}
		for _, i := range is.Instances {
			if i.Name == "web.0" {
				restarts = append(restarts, i.Restarts)
			}
		}
	}
	if len(restarts) < 2 || restarts[0] != 0 || restarts[len(restarts)-1] != 1 {
		t.Errorf("web.0's restarts in the JSON lines: %v, want 0 first and 1 last", restarts)
	}

	want := regexp.MustCompile(`^shop: release 1: 2 of 2 instances running\n` +
		`INSTANCE  STATE  SINCE +RELEASE  RESTARTS\n` +
		`web\.0     up     \d+s ago +v1       1\n` +
		`worker\.0  up     \d+s ago +v1       0\n$`)
	if out := run(io, "ps", "shop"); !want.MatchString(out) {
		t.Errorf("bex ps shop printed\n%s\nwant it to match %s", out, want)
	}

	// Without APP: the app of the checkout's bex remote.
	checkout := io
	checkout.Dir = gitCheckout(t, "bex", apitest.GitBase+"/clips/shop.git")
	if out := run(checkout, "ps"); !want.MatchString(out) {
		t.Errorf("bex ps in a checkout of shop printed\n%s\nwant it to match %s", out, want)
	}
	elsewhere := io
	elsewhere.Dir = gitCheckout(t, "origin", "https://github.com/acme/shop.git")
	if _, stderr, code := bexRun(t, elsewhere, "ps"); code != 2 || !regexp.MustCompile(`^bex: which app\? give APP, or run bex in a git checkout with a remote named bex`).MatchString(stderr) {
		t.Errorf("bex ps in a checkout without a bex remote: exit %d, %s", code, stderr)
	}
}

// TestOpenCLI: bex open opens the app's default URL, as heroku open does,
// even when the app has a custom hostname; --print, -o json and a machine
// without a browser print it instead.
func TestOpenCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	_, token := e.TenantToken(t, "cliopen")
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	var opened []string
	io := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string { return env[k] },
		OpenURL: func(_ context.Context, url string) error { opened = append(opened, url); return nil }}
	for _, args := range [][]string{{"apps", "create", "shop"}, {"routes", "add", "www.example.com", "--app", "shop"}} {
		if _, stderr, code := bexRun(t, io, args...); code != 0 {
			t.Fatalf("bex %q: exit %d: %s", args, code, stderr)
		}
	}
	const url = "https://shop-cliopen.apps.bex.test"

	checkout := io
	checkout.Dir = gitCheckout(t, "bex", "ssh://git@git.bex.test:2222/cliopen/shop.git")
	for _, tc := range []struct {
		name   string
		io     app.IO
		args   []string
		want   string
		opened bool
	}{
		{"open", io, []string{"open", "shop"}, "Opening " + url + " in the browser.\n", true},
		{"open in a checkout", checkout, []string{"open"}, "Opening " + url + " in the browser.\n", true},
		{"print", io, []string{"open", "shop", "--print"}, url + "\n", false},
		// The desktop's opener, with no display: the URL is printed.
		{"no browser", app.IO{ConfigDir: io.ConfigDir, Getenv: io.Getenv}, []string{"open", "shop"}, url + "\n", false},
	} {
		opened = nil
		stdout, stderr, code := bexRun(t, tc.io, tc.args...)
		if code != 0 || stdout != tc.want {
			t.Errorf("%s: bex %q: exit %d, printed %q (%s), want %q", tc.name, tc.args, code, stdout, stderr, tc.want)
		}
		var want []string
		if tc.opened {
			want = []string{url}
		}
		if !slices.Equal(opened, want) {
			t.Errorf("%s: opened %q, want %q", tc.name, opened, want)
		}
	}

	opened = nil
	stdout, _, code := bexRun(t, io, "open", "shop", "-o", "json")
	var a apiclient.App
	if err := json.Unmarshal([]byte(stdout), &a); err != nil || code != 0 || a.URL != url || a.Name != "shop" || len(opened) != 0 {
		t.Errorf("bex open -o json: exit %d, %s (%v), opened %q; want the app, nothing opened", code, stdout, err, opened)
	}
	if _, stderr, code := bexRun(t, io, "open", "nope"); code != 3 || stderr != "bex: app \"nope\" not found\n" || len(opened) != 0 {
		t.Errorf("bex open nope: exit %d, %s, opened %q", code, stderr, opened)
	}
}

// TestReleaseInfoCLI: bex releases info shows one release in full and
// never a value; a release the app does not have is not found (exit 3).
func TestReleaseInfoCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	ctx := t.Context()
	tenant, token := e.TenantToken(t, "clirelinfo")
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	io := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string { return env[k] }}
	if _, stderr, code := bexRun(t, io, "apps", "create", "shop"); code != 0 {
		t.Fatalf("creating shop: %s", stderr)
	}
	b, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "shop", Commit: "abc1234ffff"})
	if err != nil {
		t.Fatal(err)
	}
	if b, err = e.Store.FinishBuild(ctx, b.ID, store.BuildResult{Status: store.BuildSucceeded, Stack: "node", Image: "r/clirelinfo/shop@sha256:1"}); err != nil {
		t.Fatal(err)
	}
	one, two := "hunter1", "hunter2"
	secret := store.ConfigValue{SecretKeyRef: &store.SecretRef{Name: "shop-env", Key: "API_KEY"}}
	for _, nr := range []store.NewRelease{
		{Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git", Config: map[string]store.ConfigValue{"FOO": {Value: &one}}},
		{Kind: store.ReleaseKindConfig, Description: "Set API_KEY, FOO", CreatedBy: "token:test", Config: map[string]store.ConfigValue{"FOO": {Value: &two}, "API_KEY": secret}},
	} {
		nr.TenantID, nr.App, nr.BuildID, nr.Image = tenant.ID, "shop", b.ID, b.Image
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	e.SetCurrentRelease(t, "clirelinfo", "shop", 2)

	want := regexp.MustCompile(`^Release:     v2 \(current\)\n` +
		`Kind:        config\n` +
		`Description: Set API_KEY, FOO\n` +
		`By:          token:test\n` +
		`Created:     \d{4}-\d\d-\d\d \d\d:\d\d\n` +
		`Build:       1 \(commit abc1234, node\)\n` +
		`Image:       r/clirelinfo/shop@sha256:1\n` +
		`Env:         API_KEY \(secret\), FOO\n` +
		`Changes:     from v1: added API_KEY; changed FOO\n$`)
	checkout := io
	checkout.Dir = gitCheckout(t, "bex", apitest.GitBase+"/clirelinfo/shop.git")
	for _, c := range []struct {
		io   app.IO
		args []string
	}{{io, []string{"releases", "info", "shop", "v2"}}, {checkout, []string{"releases", "info", "2"}}} {
		stdout, stderr, code := bexRun(t, c.io, c.args...)
		if code != 0 || !want.MatchString(stdout) {
			t.Errorf("bex %q: exit %d (%s), printed\n%s\nwant it to match %s", c.args, code, stderr, stdout, want)
		}
	}
	stdout, _, code := bexRun(t, io, "releases", "info", "shop", "1", "-o", "json")
	var r apiclient.ReleaseInfo
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != 0 || r.Number != 1 || r.Kind != apiclient.ReleaseKindDeploy ||
		r.Status != apiclient.ReleaseSuperseded || r.Commit != "abc1234ffff" ||
		len(r.Env) != 1 || r.Env[0].Name != "FOO" || r.Changes.Previous != 0 {
		t.Errorf("bex releases info shop 1 -o json: exit %d, %s (%v)", code, stdout, err)
	}
	for _, args := range [][]string{{"releases", "info", "shop", "v2"}, {"releases", "info", "shop", "1", "-o", "json"}} {
		if stdout, _, _ := bexRun(t, io, args...); regexp.MustCompile("hunter").MatchString(stdout) {
			t.Errorf("bex %q shows a value: %s", args, stdout)
		}
	}
	if _, stderr, code := bexRun(t, io, "releases", "info", "shop", "v9"); code != 3 || stderr != "bex: app \"shop\" has no release v9: bex releases shop lists them\n" {
		t.Errorf("bex releases info shop v9: exit %d, %s", code, stderr)
	}
	if _, stderr, code := bexRun(t, io, "releases", "info", "shop", "latest"); code != 2 || stderr != "bex: release \"latest\": give a release as bex releases lists it, such as v2\n" {
		t.Errorf("bex releases info shop latest: exit %d, %s", code, stderr)
	}

	// A release whose rollout failed: listed failed, shown with why.
	failure := "instances of web never became healthy: exited with status 1; its last lines:\n  EADDRINUSE"
	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", BuildID: b.ID, Image: b.Image,
		Kind: store.ReleaseKindConfig, Description: "Set PORT", CreatedBy: "token:test", Failure: failure}); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := bexRun(t, io, "releases", "shop")
	if list := regexp.MustCompile(`^RELEASE +KIND +STATUS +DESCRIPTION +BY +CREATED\n` +
		`v3 +config +failed +Set PORT +token:test .*\n\*v2 +config +current +Set API_KEY, FOO .*\nv1 +deploy +superseded +Deploy abc1234 .*\n$`); code != 0 || !list.MatchString(stdout) {
		t.Errorf("bex releases shop: exit %d (%s), printed\n%s\nwant it to match %s", code, stderr, stdout, list)
	}
	stdout, stderr, code = bexRun(t, io, "releases", "info", "shop", "v3")
	if !strings.HasPrefix(stdout, "Release:     v3 (failed)\n") ||
		!strings.Contains(stdout, "Failure:     instances of web never became healthy: exited with status 1; its last lines:\n               EADDRINUSE\n") ||
		!strings.Contains(stdout, "Changes:     from v2: removed API_KEY, FOO\n") || code != 0 {
		t.Errorf("bex releases info shop v3: exit %d (%s), printed\n%s", code, stderr, stdout)
	}
	stdout, _, code = bexRun(t, io, "releases", "shop", "-o", "json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || code != 0 || len(list) != 3 ||
		list[0]["status"] != "failed" || list[0]["failure"] != failure || list[1]["status"] != "current" || list[1]["failure"] != nil {
		t.Errorf("bex releases shop -o json: exit %d, %s (%v)", code, stdout, err)
	}
	if _, stderr, code := bexRun(t, io, "rollback", "shop", "v3"); code == 0 || !strings.Contains(stderr, "v3 failed (") || !strings.Contains(stderr, "e.g. v2") {
		t.Errorf("bex rollback shop v3: exit %d, %s; want it refused naming v2", code, stderr)
	}
}

// TestPsRunsCLI: bex ps lists the app's one-off runs that run after its
// instances, in a group of their own: a detached run up, a run asked to
// stop as stopping and by whom; -o json gives them as runs; once a run
// has ended it leaves bex ps (bex runs keeps it), and with none running
// the group is not printed. An API whose runtime does not answer still
// gives the runs: bex ps prints them, says the instances could not be
// read, and exits 1 (kind unavailable).
func TestPsRunsCLI(t *testing.T) {
	e := apitest.StartWith(t, cptest.Start(t), apitest.Options{RuntimeLogs: true})
	tenant, token := e.TenantToken(t, "clipsruns")
	env := map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}
	if _, stderr, code := bexRunWith(t, env, "", "apps", "create", "shop"); code != 0 {
		t.Fatal(stderr)
	}
	e.SetCurrentRelease(t, "clipsruns", "shop", 2)
	if _, stderr, code := bexRunWith(t, env, "", "run", "-d", "shop", "--", "sleep", "600"); code != 0 {
		t.Fatal(stderr)
	}
	// Recorded by a server that does not run it here, asked to stop: it
	// stays stopping.
	held, err := e.Store.CreateRun(t.Context(), store.NewRun{TenantID: tenant.ID, App: "shop", Release: 2, Command: []string{"rake", "db:migrate"}, CreatedBy: "a@clipsruns.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := bexRunWith(t, env, "", "runs", "stop", "shop", fmt.Sprintf("run.%d", held.Number)); code != 0 {
		t.Fatal(stderr)
	}

	stdout, stderr, code := bexRunWith(t, env, "", "ps", "shop")
	group := regexp.MustCompile(`(?s)\n\nOne-off runs of shop \(2\):\nRUN +STATE +SINCE +RELEASE +BY +HOW +COMMAND\n` +
		`run\.1 +up +\d+s ago +v2 +token:test +detached +sleep 600\n` +
		`run\.2 +stopping \(asked by token:test\) +\d+s ago +v2 +a@clipsruns\.test +attached +rake db:migrate\n$`)
	if code != 0 || !group.MatchString(stdout) || !strings.HasPrefix(stdout, "No instances of shop") {
		t.Errorf("bex ps with two runs: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	stdout, _, code = bexRunWith(t, env, "", "ps", "shop", "-o", "json")
	var is apiclient.Instances
	if err := json.Unmarshal([]byte(stdout), &is); err != nil || code != 0 || len(is.Runs) != 2 {
		t.Fatalf("bex ps -o json: exit %d, %v:\n%s", code, err, stdout)
	}
	if r := is.Runs[0]; r.Name != "run.1" || r.Number != 1 || r.State != "up" || !r.Detached || r.CreatedBy != "token:test" || strings.Join(r.Command, " ") != "sleep 600" || r.Since.IsZero() {
		t.Errorf("run.1 in bex ps -o json: %+v", r)
	}
	if r := is.Runs[1]; r.Name != "run.2" || r.State != "stopping" || r.StopRequestedBy != "token:test" || r.StopRequestedAt == nil || r.Detached {
		t.Errorf("run.2 in bex ps -o json: %+v", r)
	}

	// An API whose runtime does not answer: the runs all the same, a line
	// that says the instances could not be read, and exit 1.
	down := map[string]string{"BEX_API": e.AnotherServerWith(t, func(o *api.Options) {
		o.Instances = api.RuntimeInstances{Driver: apitest.UnreachableRuntime(t)}
	}), "BEX_TOKEN": token}
	const why = `the runtime that runs app "shop" does not answer now: try again in a moment`
	stdout, stderr, code = bexRunWith(t, down, "", "ps", "shop")
	if want := "shop: the instances could not be read: " + why + "\n"; code != app.ExitError || !strings.HasPrefix(stdout, want) || !group.MatchString(stdout) ||
		stderr != "bex: the instances of shop could not be read: "+why+"\n" {
		t.Errorf("bex ps while the runtime does not answer: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	stdout, stderr, code = bexRunWith(t, down, "", "ps", "shop", "-o", "json")
	is = apiclient.Instances{}
	var failed struct{ Error app.Error }
	if err := json.Unmarshal([]byte(stdout), &is); err != nil || code != app.ExitError || is.InstancesError != why || len(is.Runs) != 2 {
		t.Errorf("bex ps -o json while the runtime does not answer: exit %d, %v:\n%s", code, err, stdout)
	}
	if err := json.Unmarshal([]byte(stderr), &failed); err != nil || failed.Error.Kind != app.KindUnavailable {
		t.Errorf("bex ps -o json's error while the runtime does not answer: %v: %s", err, stderr)
	}

	if _, stderr, code := bexRunWith(t, env, "", "runs", "stop", "shop", "run.1"); code != 0 {
		t.Fatal(stderr)
	}
	platformtest.Eventually(t, time.Minute, "run.1 to leave bex ps", func(context.Context) error {
		stdout, _, _ := bexRunWith(t, env, "", "ps", "shop")
		if strings.Contains(stdout, "run.1") || !strings.Contains(stdout, "One-off runs of shop (1):") {
			return fmt.Errorf("bex ps:\n%s", stdout)
		}
		return nil
	})
	if _, err := e.Store.FinishRun(t.Context(), held.ID, store.RunResult{ExitCode: ptr.To(143), Reason: "stopped by token:test", End: store.RunStopped}); err != nil {
		t.Fatal(err)
	}
	if stdout, _, _ := bexRunWith(t, env, "", "ps", "shop"); stdout != "No instances of shop: no instance of shop runs\n" {
		t.Errorf("bex ps once no run runs: %q", stdout)
	}
	if stdout, _, _ := bexRunWith(t, env, "", "runs", "shop"); !strings.Contains(stdout, "run.1") || !strings.Contains(stdout, "run.2") {
		t.Errorf("bex runs once both ended:\n%s", stdout)
	}
}
