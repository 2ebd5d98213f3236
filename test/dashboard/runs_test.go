package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard/dashboardtest"
)

// TestRunsOnAppPage: in Chromium, the app page lists the app's one-off
// runs that run under its instances — a detached run up, a run asked to
// stop as stopping and by whom — and a run that ends leaves the open page
// by itself; the operator's audit log then shows that run's end, how it
// ended and who stopped it.
func TestRunsOnAppPage(t *testing.T) {
	e := apitest.StartWith(t, cptest.Start(t), apitest.Options{RuntimeLogs: true})
	base := dashboardtest.Start(t, e).URL
	tenant, token := e.TenantToken(t, "acme")
	api, err := apiclient.New(e.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := api.CreateApp(ctx, apiclient.CreateAppRequest{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	e.SetCurrentRelease(t, "acme", "shop", 3)
	detached, err := api.RunDetached(ctx, "shop", apiclient.RunRequest{Command: []string{"sh", "-c", "exec sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	// A run another server records and runs, asked to stop: it stays
	// stopping here.
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
	const rows = `[...document.querySelectorAll('#run-list tr[data-run]')].map(tr => [...tr.cells].map(c => c.innerText.trim()).join(' | ')).join('\n')`
	got := eval[string](b, rows)
	want := []string{
		fmt.Sprintf("run.%d | up | sh -c exec sleep 600 | token:test | detached | v3 | ", detached.Number),
		fmt.Sprintf("run.%d | stopping asked by token:test | rake db:migrate | ann@acme.test | attached | v3 | ", held.Number),
	}
	lines := strings.Split(got, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], want[0]) || !strings.HasPrefix(lines[1], want[1]) {
		t.Errorf("the app page's runs:\n%s\nwant rows starting\n%s", got, strings.Join(want, "\n"))
	}
	if h := b.text("#runs"); h != "One-off runs (2)" {
		t.Errorf("the runs' heading %q", h)
	}
	b.screenshot("app-runs")

	// The run asked to stop has no Stop button; the other one's stops it,
	// and it leaves the page.
	if eval[bool](b, fmt.Sprintf(`!!document.querySelector('button[data-stop-run="%d"]')`, held.Number)) {
		t.Errorf("run.%d, asked to stop already, has a Stop button", held.Number)
	}
	if st := b.clickAndLoad("stopping the detached run", fmt.Sprintf(`button[data-stop-run="%d"]`, detached.Number)); st != http.StatusOK ||
		!strings.HasPrefix(b.text("#notice"), fmt.Sprintf("Stopping run.%d", detached.Number)) {
		t.Errorf("stopping run.%d from the page: status %d, notice %q", detached.Number, st, b.text("#notice"))
	}
	eval[bool](b, "window.__sameDocument = true")
	b.waitFor("the stopped run to leave the page", fmt.Sprintf(`!document.querySelector('#run-list tr[data-run="run.%d"]') && !!document.querySelector('#run-list tr[data-run="run.%d"]')`,
		detached.Number, held.Number), time.Minute)
	if !eval[bool](b, "window.__sameDocument === true") {
		t.Error("the page was reloaded: the runs did not update in place")
	}
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
