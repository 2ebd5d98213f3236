package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/utils/ptr"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard/dashboardtest"
)

// TestRunsOnAppPage: in Chromium, the app page lists the app's newest
// runs, running and ended, as bex runs does — a run asked to stop as
// stopping and by whom, runs that exited with their status, a detached
// run running with its Stop button — says there are older ones, and lists
// an older run that runs still; a run stopped from the page turns to its
// end in the open page, without a reload; the operator's audit log then
// shows that run's end, how it ended and who stopped it.
func TestRunsOnAppPage(t *testing.T) {
	s := startShop(t, apitest.Options{RuntimeLogs: true})
	e, base, tenant, token, api, ctx := s.e, s.base, s.tenant, s.token, s.api, t.Context()
	e.SetCurrentRelease(t, "acme", "shop", 3)
	// Runs another server records and runs: run.1 runs on, older than the
	// page's newest ten; run.2 to run.8 exited 0.
	older, err := e.Store.CreateRun(ctx, store.NewRun{TenantID: tenant.ID, App: "shop", Release: 3, Command: []string{"worker", "--once"}, CreatedBy: "ann@acme.test"})
	if err != nil {
		t.Fatal(err)
	}
	for range 7 {
		r, err := e.Store.CreateRun(ctx, store.NewRun{TenantID: tenant.ID, App: "shop", Release: 3, Command: []string{"rake", "cache:warm"}, CreatedBy: "ann@acme.test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Store.FinishRun(ctx, r.ID, store.RunResult{ExitCode: ptr.To(0)}); err != nil {
			t.Fatal(err)
		}
	}
	// run.9 exits 3 on the process runtime.
	failed, err := api.RunDetached(ctx, "shop", apiclient.RunRequest{Command: []string{"sh", "-c", "exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, time.Minute, "run.9 to end", func(context.Context) error {
		runs, err := api.ListRuns(ctx, "shop", 1)
		if err != nil || len(runs) != 1 || runs[0].Number != failed.Number || runs[0].Status == string(store.RunRunning) {
			return fmt.Errorf("the newest run: %+v, %v", runs, err)
		}
		return nil
	})
	detached, err := api.RunDetached(ctx, "shop", apiclient.RunRequest{Command: []string{"sh", "-c", "exec sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	// A run another server runs, asked to stop: it stays stopping here.
	held, err := e.Store.CreateRun(ctx, store.NewRun{TenantID: tenant.ID, App: "shop", Release: 3, Command: []string{"rake", "db:migrate"}, CreatedBy: "ann@acme.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.StopRun(ctx, "shop", held.Number); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t)
	if st := b.signIn(base, token); st != http.StatusOK {
		t.Fatalf("signing in: status %d", st)
	}
	if st := b.open(base + "/apps/shop"); st != http.StatusOK {
		t.Fatalf("the app page: status %d", st)
	}
	// Run, Command, Release, By, How, Started, Took, Status, Stop.
	const rows = `[...document.querySelectorAll('#run-list tr[data-run]')].map(tr => [...tr.cells].map(c => c.innerText.trim()))`
	cells := eval[[][]string](b, rows)
	row := func(r int, started, took bool) string {
		c := slices.Clone(cells[r])
		if started {
			c[5] = "…"
		}
		if took {
			c[6] = "…"
		}
		return strings.Join(c, " | ")
	}
	var got []string
	for r := range cells {
		got = append(got, row(r, true, r >= 2 && r <= 9))
	}
	want := []string{
		fmt.Sprintf("run.%d | rake db:migrate | v3 | ann@acme.test | attached | … | - | stopping (asked by token:test) | ", held.Number),
		fmt.Sprintf("run.%d | sh -c exec sleep 600 | v3 | token:test | detached | … | - | running | Stop", detached.Number),
		fmt.Sprintf("run.%d | sh -c exit 3 | v3 | token:test | detached | … | … | exit 3 | ", failed.Number),
	}
	for n := failed.Number - 1; n > older.Number; n-- {
		want = append(want, fmt.Sprintf("run.%d | rake cache:warm | v3 | ann@acme.test | attached | … | … | exit 0 | ", n))
	}
	want = append(want, fmt.Sprintf("run.%d | worker --once | v3 | ann@acme.test | attached | … | - | running | Stop", older.Number))
	if !slices.Equal(got, want) {
		t.Errorf("the app page's runs:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if h, more := b.text("#runs"), b.text("#runs-more"); h != "Runs" || more != "The newest 10 runs, and any older one that runs; bex runs shop lists every run." {
		t.Errorf("the runs' heading %q and line %q", h, more)
	}
	b.screenshot("app-runs")

	// The run asked to stop has no Stop button; the detached one's stops
	// it, and its row turns to its end in the open page.
	if eval[bool](b, fmt.Sprintf(`!!document.querySelector('button[data-stop-run="%d"]')`, held.Number)) {
		t.Errorf("run.%d, asked to stop already, has a Stop button", held.Number)
	}
	if st := b.clickAndLoad("stopping the detached run", fmt.Sprintf(`button[data-stop-run="%d"]`, detached.Number)); st != http.StatusOK ||
		!strings.HasPrefix(b.text("#notice"), fmt.Sprintf("Stopping run.%d", detached.Number)) {
		t.Errorf("stopping run.%d from the page: status %d, notice %q", detached.Number, st, b.text("#notice"))
	}
	eval[bool](b, "window.__sameDocument = true")
	b.waitFor("the stopped run's end in the page", fmt.Sprintf(`(() => { const tr = document.querySelector('#run-list tr[data-run="run.%d"]');
		return !!tr && tr.cells[7].innerText.trim() === 'exit 143: stopped by token:test' && tr.cells[6].innerText.trim() !== '-' && !tr.querySelector('button') })()`,
		detached.Number), time.Minute)
	if !eval[bool](b, "window.__sameDocument === true") {
		t.Error("the page was reloaded: the runs did not update in place")
	}
	cells = eval[[][]string](b, rows)
	if got := row(1, true, true); got != fmt.Sprintf("run.%d | sh -c exec sleep 600 | v3 | token:test | detached | … | … | exit 143: stopped by token:test | ", detached.Number) {
		t.Errorf("the stopped run's row: %q", got)
	}
	b.screenshot("app-runs-ended")
	platformtest.Eventually(t, time.Minute, "the run's end recorded", func(context.Context) error {
		runs, err := api.ListRuns(ctx, "shop", 0)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.Number == detached.Number && r.Status == string(store.RunRunning) {
				return fmt.Errorf("run.%d is running", r.Number)
			}
		}
		return nil
	})

	// The operator's audit log shows how it ended.
	b.signOut()
	if st := b.signIn(base, e.OperatorToken); st != http.StatusOK {
		t.Fatalf("signing in as the operator: status %d", st)
	}
	b.open(base + "/console/audit?action=app.run.end")
	entry := b.text("#audit tbody tr")
	for _, part := range []string{"acme", "token:test", "app.run.end", "shop", "ended=stopped", "exitCode=143", fmt.Sprintf("run=%d", detached.Number), "stoppedBy=token:test"} {
		if !strings.Contains(entry, part) {
			t.Errorf("the audit log's app.run.end entry %q lacks %q", entry, part)
		}
	}
	b.screenshot("console-audit-run-end")
}

// TestRunConsoleOnAppPage: in Chromium, the app page's console runs a
// command line attached: the line typed after it is its input, its output
// (stderr apart) comes into the page as it comes, and its exit code ends
// it; the run is then listed under Runs.
func TestRunConsoleOnAppPage(t *testing.T) {
	s := startShop(t, apitest.Options{})
	s.e.SetCurrentRelease(t, "acme", "shop", 3)
	base, token := s.base, s.token

	b := newBrowser(t)
	if st := b.signIn(base, token); st != http.StatusOK {
		t.Fatalf("signing in: status %d", st)
	}
	if st := b.open(base + "/apps/shop"); st != http.StatusOK {
		t.Fatalf("the app page: status %d", st)
	}
	const command = `echo "Name?"; read name; echo "Hello, $name, from v$RUN_RELEASE"; echo "no mail sent" >&2; exit 4`
	b.do("running a command in the console",
		chromedp.SetValue(chromedp.CSS(`#console-form input[name=command]`), command),
		chromedp.Click(chromedp.CSS(`#console-form button[type=submit]`)))
	b.waitFor("the command's first line", `[...document.querySelectorAll('#console-output span:not(.console-echo)')].some(s => s.textContent.includes('Name?'))`, time.Minute)
	b.do("typing the command's input",
		chromedp.SetValue(chromedp.CSS(`#console-input input[name=line]`), "Ann"),
		chromedp.Click(chromedp.CSS(`#console-input button[type=submit]`)))
	b.waitFor("the command's end", `document.querySelector('#console-output').getAttribute('data-console-state') === 'exited'`, time.Minute)
	if code := eval[string](b, `document.querySelector('#console-output').getAttribute('data-exit-code')`); code != "4" {
		t.Errorf("the console's exit code %q, want 4", code)
	}
	out := b.text("#console-output")
	// stdout and stderr come apart: their order between each other is
	// not kept.
	for _, want := range []string{"$ " + command + "\n", "Name?\nAnn\n", "Hello, Ann, from v3\n", "no mail sent\n", "[run.1 on v3: exit 4]"} {
		if !strings.Contains(out, want) {
			t.Errorf("the console shows\n%s\nwithout %q", out, want)
		}
	}
	if got := b.text("#console-output .console-stderr"); got != "no mail sent\n" && got != "no mail sent" {
		t.Errorf("the console's stderr %q, want no mail sent", got)
	}
	b.screenshot("app-console")
	b.waitFor("the console's run under Runs", `(() => { const tr = document.querySelector('#run-list tr[data-run]');
		return !!tr && tr.cells[1].innerText.includes('read name') && tr.cells[4].innerText.trim() === 'attached' && tr.cells[7].innerText.trim() === 'exit 4' })()`, time.Minute)
}

// shop is what startShop made: the API's environment, the dashboard's
// URL, the tenant acme, its token and an API client acting with it.
type shop struct {
	e      *apitest.Env
	base   string
	tenant store.Tenant
	token  string
	api    *apiclient.Client
}

// startShop starts the API (with opts) and the dashboard in process on a
// real apiserver and Postgres, and makes acme's app shop through the API.
func startShop(t *testing.T, opts apitest.Options) shop {
	t.Helper()
	e := apitest.StartWith(t, cptest.Start(t), opts)
	s := shop{e: e, base: dashboardtest.Start(t, e).URL}
	s.tenant, s.token = e.TenantToken(t, "acme")
	var err error
	if s.api, err = apiclient.New(e.URL, s.token, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.api.CreateApp(t.Context(), apiclient.CreateAppRequest{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	return s
}
