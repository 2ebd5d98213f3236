package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/security"
	"github.com/chromedp/chromedp"

	"bex.co/bex/internal/pgtest"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
)

// TestTenantDashboard: a tenant signs in, creates an app, watches the build
// log of a real git push arrive live, rolls back from the release list,
// restarts, sets a variable, scales, puts the app in maintenance mode and
// back, and sees its charts; another tenant gets 404 for that app and 403
// for the console.
func TestTenantDashboard(t *testing.T) {
	bin := platformtest.BuildBinaries(t, "bex-embedded")
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	state := t.TempDir()
	p := platformtest.Start(ctx, t, bin, state, pgtest.NewDatabase(t))
	env := p.WaitEnv(ctx, t)
	base := strings.TrimSuffix(env["BEX_DASHBOARD"], "/")
	token := env["BEX_TOKEN"]
	api, err := apiclient.New(env["BEX_API"], token, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)

	// Without a session, a page sends to the sign-in page; a wrong token
	// is refused there.
	b.open(base + "/apps")
	if loc := b.location(); loc != base+"/signin?next=%2Fapps" {
		t.Fatalf("an anonymous /apps landed on %s, want the sign-in page", loc)
	}
	if st := b.signIn(base, "bex_not-a-token"); st != 401 || !strings.Contains(b.text("#signin-error"), "refused") {
		t.Fatalf("signing in with a wrong token: status %d, page %q", st, b.text("main"))
	}
	if st := b.signIn(base, token); st != 200 || b.location() != base+"/apps" {
		t.Fatalf("signing in: status %d at %s, want 200 at /apps", st, b.location())
	}
	if cookies := eval[string](b, "document.cookie"); strings.Contains(cookies, "bex_session") {
		t.Errorf("the session cookie is readable by scripts: %q", cookies)
	}

	// Creating an app: a bad name is refused on the form, a good one
	// opens the app's page with its git remote.
	b.do("typing a bad name", chromedp.SetAttributeValue(chromedp.CSS(`#create-app input[name=name]`), "pattern", ".*"),
		chromedp.SetValue(chromedp.CSS(`#create-app input[name=name]`), "Bad_Name"))
	if st := b.clickAndLoad("creating a badly named app", "#create-app button"); st != 422 || b.text("#create-error") == "" {
		t.Fatalf("a bad app name: status %d, page %q", st, b.text("main"))
	}
	b.do("typing the name", chromedp.SetValue(chromedp.CSS(`#create-app input[name=name]`), "hello"))
	if st := b.clickAndLoad("creating the app", "#create-app button"); st != 200 || b.location() != base+"/apps/hello" {
		t.Fatalf("creating hello: status %d at %s", st, b.location())
	}
	remote := eval[string](b, `document.querySelector("#git-remote").value`)
	if !strings.HasSuffix(remote, "/dev/hello.git") {
		t.Fatalf("the app page shows the git remote %q", remote)
	}

	// A real push; the build waits for the test's go-ahead, so the build
	// page is open while it runs.
	repo := t.TempDir()
	gate := filepath.Join(platformtest.TenantBuildCache(state, "dev"), "go-ahead")
	platformtest.Git(t, repo, "init", "-q", "-b", "main")
	platformtest.WriteNodeApp(t, repo, "hello v1", platformtest.GoAheadBuildJS(gate, "hello v1"))
	platformtest.Git(t, repo, "add", ".")
	platformtest.Git(t, repo, "commit", "-q", "-m", "v1")
	pushURL, err := url.Parse(remote)
	if err != nil {
		t.Fatal(err)
	}
	pushURL.User = url.UserPassword("bex", token)
	pushed := make(chan error, 1)
	go func() {
		out, err := platformtest.GitErr(repo, "push", pushURL.String(), "main")
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, out)
		}
		pushed <- err
	}()
	platformtest.Eventually(t, 12*time.Minute, "build 1 to run", func(ctx context.Context) error {
		var log strings.Builder
		if err := api.BuildLog(ctx, "hello", 1, false, &log); err != nil {
			return err
		}
		if !strings.Contains(log.String(), "waiting for the go-ahead") {
			return fmt.Errorf("its log's last line: %s", platformtest.LastLine(log.String()))
		}
		return nil
	})
	if st := b.open(base + "/apps/hello/builds/1"); st != 200 {
		t.Fatalf("the build page: status %d", st)
	}
	if b.text("#build-status") != "running" || !strings.Contains(b.text("#log"), "waiting for the go-ahead") {
		t.Fatalf("the build page of a running build shows %q / %q", b.text("#build-status"), b.text("#log"))
	}
	eval[bool](b, "window.__sameDocument = true")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the build's end streamed into the page", `document.querySelector("#log").dataset.ended === "succeeded"`, 3*time.Minute)
	if log := b.text("#log"); !strings.Contains(log, "go-ahead received, hello v1 is ready") {
		t.Errorf("the live log lacks the build's last lines:\n%s", log)
	}
	b.waitFor("the build's facts to show its end", `document.querySelector("#build-status").innerText === "succeeded" && document.querySelector("#build-facts").innerText.includes("node")`, 30*time.Second)
	if !eval[bool](b, "window.__sameDocument === true") {
		t.Error("the page was reloaded: the log did not arrive in the open page")
	}
	b.screenshot("build-log-live")
	if err := <-pushed; err != nil {
		t.Fatalf("git push: %v", err)
	}

	// A second release, then a rollback to the first from the list.
	platformtest.WriteNodeApp(t, repo, "hello v2", platformtest.GoAheadBuildJS(gate, "hello v2"))
	platformtest.Git(t, repo, "commit", "-q", "-am", "v2")
	if out, err := platformtest.GitErr(repo, "push", pushURL.String(), "main"); err != nil {
		t.Fatalf("pushing v2: %v\n%s", err, out)
	}
	apps := platformtest.AppClient(t, env)
	host := "hello-dev." + strings.Split(env["BEX_DOMAIN"], ":")[0]
	serves := func(body string) func(context.Context) error {
		return func(ctx context.Context) error {
			code, got, err := platformtest.GetApp(ctx, apps, host)
			if err == nil && (code != http.StatusOK || got != body) {
				err = fmt.Errorf("GET %s: %d %q, want %q", host, code, got, body)
			}
			return err
		}
	}
	platformtest.Eventually(t, 12*time.Minute, "v2 to serve", serves("hello v2"))
	b.open(base + "/apps/hello")
	if st := b.clickAndLoad("rolling back to v1", `button[data-rollback="1"]`); st != 200 {
		t.Fatalf("rolling back: status %d", st)
	}
	if notice := b.text("#notice"); notice != "Rolled back: release v3 runs what v1 ran." {
		t.Fatalf("after the rollback the page says %q", notice)
	}
	platformtest.Eventually(t, 12*time.Minute, "v1 to serve again", serves("hello v1"))
	if rel := b.text(`tr[data-release="3"]`); !strings.Contains(rel, "serving") {
		t.Errorf("release v3 is not shown serving: %q", rel)
	}
	// A push and a rollback by the same token name the same author.
	byJS := `document.querySelector('tr[data-release="%d"]').cells[2].innerText`
	if pushed, rolled := eval[string](b, fmt.Sprintf(byJS, 1)), eval[string](b, fmt.Sprintf(byJS, 3)); pushed != "token:make-run" || rolled != pushed {
		t.Errorf("release authors: v1 (a push) %q, v3 (a rollback) %q; want token:make-run for both", pushed, rolled)
	}
	b.screenshot("app-after-rollback")

	// A restart from the app page: new instances of v3 serve what v3 runs.
	// Then a variable set from the form goes out at once as release v4,
	// which the list names by what changed.
	if st := b.clickAndLoad("restarting the app", "#restart-app button"); st != 200 {
		t.Fatalf("restarting: status %d: %q", st, b.text("main"))
	}
	if notice := b.text("#notice"); notice != "Restarted web: new instances of release v3." {
		t.Fatalf("after the restart the page says %q", notice)
	}
	platformtest.Eventually(t, time.Minute, "v1's body to serve after the restart", serves("hello v1"))
	b.do("typing a variable", chromedp.SetValue(chromedp.CSS(`#env-form input[name=name]`), "GREETING"),
		chromedp.SetValue(chromedp.CSS(`#env-form input[name=value]`), "hi"))
	if st := b.clickAndLoad("setting a variable", "#env-form button"); st != 200 {
		t.Fatalf("setting a variable: status %d: %q", st, b.text("main"))
	}
	if notice := b.text("#notice"); notice != "Environment changed: release v4 runs with it." {
		t.Fatalf("after setting a variable the page says %q", notice)
	}
	if rel := b.text(`tr[data-release="4"]`); !strings.Contains(rel, "Set GREETING") || !strings.Contains(rel, "serving") {
		t.Errorf("release v4 is not shown serving as the config release: %q", rel)
	}
	b.screenshot("app-config-release")

	// The runtime logs page follows the app's output: a request made
	// while it is open shows up in it.
	b.open(base + "/apps/hello/logs")
	eval[bool](b, "window.__sameDocument = true")
	marker := fmt.Sprintf("/seen-live-%d", time.Now().UnixNano())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+marker, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := apps.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	b.waitFor("the request's log line in the open logs page", fmt.Sprintf(`document.querySelector("#log").innerText.includes(%q)`, "served "+marker), time.Minute)
	if !eval[bool](b, "window.__sameDocument === true") {
		t.Error("the logs page was reloaded: the line did not arrive in the open page")
	}
	b.screenshot("runtime-logs-live")

	// On a phone's screen the page fits its width: wide tables scroll in
	// their own box.
	b.do("emulating a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.open(base + "/apps/hello")
	if w := eval[int](b, "document.documentElement.scrollWidth"); w > 390 {
		t.Errorf("on a 390-pixel-wide screen the app page is %d pixels wide", w)
	}
	b.screenshot("app-on-a-phone")
	// chromedp's EmulateReset overrides the metrics with zeros, which
	// leaves the page 390 pixels wide: the override is cleared instead.
	b.do("back to the laptop", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, emulation.ClearDeviceMetricsOverride, cdp.Empty{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, emulation.SetTouchEmulationEnabled, emulation.SetTouchEmulationEnabledParams{})
		return err
	}))
	if w := eval[int](b, "window.innerWidth"); w != 1280 {
		t.Fatalf("back on the laptop the window is %d pixels wide, want 1280", w)
	}

	// Scale from the app page: web goes to 2 instances of the current
	// release, which the API then reports up.
	b.open(base + "/apps/hello")
	b.do("typing 2 instances", chromedp.SetValue(chromedp.CSS(`#scale-app input[name=count]`), "2"))
	if st := b.clickAndLoad("scaling web to 2", "#scale-app button"); st != 200 {
		t.Fatalf("scaling: status %d: %q", st, b.text("main"))
	}
	if notice := b.text("#notice"); notice != "Scaled to web=2 on plan starter: release v4 runs it now." {
		t.Fatalf("after scaling the page says %q", notice)
	}
	webUp := func(n int) func(context.Context) error {
		return func(ctx context.Context) error {
			is, err := api.Instances(ctx, "hello")
			if err != nil {
				return err
			}
			var up []string
			for _, in := range is.Instances {
				if in.Process == "web" && in.State == apiclient.InstanceUp && in.Release == 4 {
					up = append(up, in.Name)
				}
			}
			if len(up) != n {
				return fmt.Errorf("web instances of v4 up: %v, want %d (%s)", up, n, is.Message)
			}
			return nil
		}
	}
	platformtest.Eventually(t, 2*time.Minute, "2 web instances up after the scale", webUp(2))
	b.waitFor("the page to show both instances", `document.querySelector("#app-status").parentElement.innerText.includes("release 4: 2 of 2 instances running")`, time.Minute)
	b.waitFor("the Instances table to list web.0 and web.1 up on v4",
		`["web.0", "web.1"].every(n => { const r = document.querySelector('#instance-list tr[data-instance="' + n + '"]'); return r && r.innerText.includes("up") && r.innerText.includes("v4"); })`, time.Minute)
	b.screenshot("app-scaled")

	// Maintenance mode from the Settings form: the app's URL, opened from
	// the page in the browser, answers the edge's maintenance page; turned
	// off, it serves the app again. The edge's certificate comes from the
	// platform's local CA, which this Chromium is not made to trust (the
	// Go client of serves checks it against BEX_CA).
	b.do("ticking maintenance mode", chromedp.Click(chromedp.CSS(`#app-settings input[name=maintenance]`)))
	if st := b.clickAndLoad("saving maintenance mode on", "#app-settings button"); st != 200 {
		t.Fatalf("turning maintenance on: status %d: %q", st, b.text("main"))
	}
	if notice := b.text("#notice"); notice != "Settings saved: maintenance mode on: nothing runs and the URL answers with a maintenance page." {
		t.Fatalf("after turning maintenance on the page says %q", notice)
	}
	appURL := eval[string](b, `document.querySelector("#app-url").href`)
	if u, err := url.Parse(appURL); err != nil || u.Hostname() != host {
		t.Fatalf("the app page links to %q, want https://%s:…", appURL, host)
	}
	b.do("trusting the edge's certificate", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true})
		return err
	}))
	opensTo := func(status int, text string) func(context.Context) error {
		return func(context.Context) error {
			if st := b.open(appURL); st != status || !strings.Contains(b.text("body"), text) {
				return fmt.Errorf("%s: %d %q, want %d and %q", appURL, st, b.text("body"), status, text)
			}
			return nil
		}
	}
	platformtest.Eventually(t, time.Minute, "the maintenance page in the browser", opensTo(http.StatusServiceUnavailable, "hello is down for maintenance"))
	b.screenshot("maintenance-page")
	b.open(base + "/apps/hello")
	if m := b.text("#app-maintenance"); !strings.HasPrefix(m, "on") {
		t.Errorf("the app page does not show maintenance mode on: %q", m)
	}
	b.do("unticking maintenance mode", chromedp.Click(chromedp.CSS(`#app-settings input[name=maintenance]`)))
	if st := b.clickAndLoad("saving maintenance mode off", "#app-settings button"); st != 200 {
		t.Fatalf("turning maintenance off: status %d: %q", st, b.text("main"))
	}
	if notice := b.text("#notice"); notice != "Settings saved: maintenance mode off: the current release runs again." {
		t.Fatalf("after turning maintenance off the page says %q", notice)
	}
	settingsPage := b.location()
	platformtest.Eventually(t, 2*time.Minute, "the app's body in the browser after maintenance", opensTo(http.StatusOK, "hello v1"))
	platformtest.Eventually(t, time.Minute, "2 web instances up after maintenance", webUp(2))
	b.open(settingsPage)
	b.waitFor("the page to show the app running again", `document.querySelector("#app-status").innerText === "ready" && document.querySelector("#app-maintenance").innerText === "off"`, time.Minute)
	b.screenshot("app-settings")

	// The app page's charts, after requests to the app: CPU, memory,
	// restarts and latency each draw a line through at least two of the
	// sampler's points (one every 10 s). The page refreshes them in place.
	b.open(base + "/apps/hello")
	const missingCharts = `(() => {
		const want = ["CPU (cores)", "Memory", "Restarts per interval", "Latency at the edge: p50 (blue) and p99 (red)"];
		const figs = [...document.querySelectorAll("#app-metrics figure")];
		return want.filter(c => {
			const f = figs.find(f => f.querySelector("figcaption").textContent === c);
			return !f || ![...f.querySelectorAll("svg polyline")].some(l => l.getAttribute("points").trim().split(/\s+/).length >= 2);
		}).join(", ");
	})()`
	platformtest.Eventually(t, 90*time.Second, "the four charts with points", func(ctx context.Context) error {
		if _, _, err := platformtest.GetApp(ctx, apps, host); err != nil {
			return err
		}
		if missing := eval[string](b, missingCharts); missing != "" {
			return fmt.Errorf("no line of two points yet in: %s (%s)", missing, b.text("#app-metrics-note"))
		}
		return nil
	})
	b.screenshot("app-metrics")

	// Another tenant: the app is not found, the console is refused.
	op, err := apiclient.New(env["BEX_API"], env["BEX_OPERATOR_TOKEN"], nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := op.CreateTenant(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	b.signOut()
	b.signIn(base, other.Token)
	if st := b.open(base + "/apps/hello"); st != 404 {
		t.Errorf("another tenant opening dev's app: status %d, want 404: %q", st, b.text("main"))
	}
	if st := b.open(base + "/apps/hello/builds/1"); st != 404 {
		t.Errorf("another tenant opening dev's build: status %d, want 404", st)
	}
	if st := b.open(base + "/console"); st != 403 {
		t.Errorf("a tenant opening the console: status %d, want 403", st)
	}
	b.screenshot("tenant-refused-console")
}
