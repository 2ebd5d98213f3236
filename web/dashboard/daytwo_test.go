package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard/dashboardtest"
)

// withShop starts the dashboard, signs a new user of a new tenant named
// name in and creates the app shop from the apps page.
func withShop(t *testing.T, name string) (*apitest.Env, *user, store.Tenant) {
	t.Helper()
	e, srv := startDashboard(t)
	tenant, token := e.TenantToken(t, name)
	u := newUser(t, srv.URL)
	signIn(t, u, token)
	p := u.get("/apps")
	if p := u.post("/apps", url.Values{"csrf": {p.csrf(t)}, "name": {"shop"}}); p.status != http.StatusSeeOther {
		t.Fatalf("creating shop: %d\n%s", p.status, p.body)
	}
	return e, u, tenant
}

// TestRestartAndConfigRelease: the app page offers a restart once the app
// has a release, and the button restarts it; the env form releases the
// change and says which release runs it, or with "don't release yet" only
// stores it; a restart the API refuses shows why.
func TestRestartAndConfigRelease(t *testing.T) {
	e, u, tenant := withShop(t, "dashrel")
	ctx := t.Context()
	p := u.get("/apps/shop")
	if strings.Contains(p.body, `id="restart-app"`) || !strings.Contains(p.body, "Nothing to restart yet") {
		t.Errorf("the page of an app without a release offers a restart:\n%s", p.body)
	}
	csrf := p.csrf(t)

	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", Image: "r/dashrel/shop@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git"}); err != nil {
		t.Fatal(err)
	}
	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "dashrel", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	app.Status.CurrentRelease = 1
	if err := e.Kube.Status().Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	if p := u.get("/apps/shop"); !strings.Contains(p.body, `id="restart-app"`) {
		t.Errorf("the page of an app with a release offers no restart:\n%s", p.body)
	}

	notice := func(p page) string {
		t.Helper()
		if p.status != http.StatusSeeOther {
			t.Fatalf("status %d, want a redirect:\n%s", p.status, p.body)
		}
		loc, err := url.Parse(p.header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		return loc.Query().Get("notice")
	}
	if got := notice(u.post("/apps/shop/restart", url.Values{"csrf": {csrf}})); got != "Restarted web: new instances of release v1." {
		t.Errorf("after a restart the page says %q", got)
	}
	if calls := e.Releaser.Restarts(); len(calls) != 1 || calls[0].App != "shop" || calls[0].Process != "" {
		t.Errorf("restarts asked = %+v", calls)
	}
	if got := notice(u.post("/apps/shop/env", url.Values{"csrf": {csrf}, "name": {"FOO"}, "value": {"1"}})); got != "Environment changed: release v2 runs with it." {
		t.Errorf("after setting a variable the page says %q", got)
	}
	if got := notice(u.post("/apps/shop/env", url.Values{"csrf": {csrf}, "name": {"BAR"}, "value": {"1"}, "norelease": {"1"}})); got != "Environment changed: it goes out with the next release." {
		t.Errorf("after setting a variable without a release the page says %q", got)
	}
	if p := u.get("/apps/shop"); !strings.Contains(p.body, "Set FOO") || strings.Contains(p.body, "Set BAR") {
		t.Errorf("the release list does not show the config release alone:\n%s", p.body)
	}

	e.Releaser.FailRollouts(errors.New("web.0 failed its health check GET /healthz: 500 (3 of 3)"))
	p = u.post("/apps/shop/restart", url.Values{"csrf": {csrf}, "process": {"web"}})
	if p.status != http.StatusConflict || !strings.Contains(p.body, "the old instances keep running: web.0 failed its health check") {
		t.Errorf("a failed restart: %d\n%s", p.status, p.body)
	}
}

// TestScaleForm: the app page's Scale form sets a process's instances and
// the plan, says what runs now, and shows a refusal with what to fix.
func TestScaleForm(t *testing.T) {
	e, u, tenant := withShop(t, "dashscale")
	ctx := t.Context()
	p := u.get("/apps/shop")
	if !strings.Contains(p.body, `id="scale-app"`) {
		t.Fatalf("the app page has no Scale form:\n%s", p.body)
	}
	csrf := p.csrf(t)
	notice := func(p page) string {
		t.Helper()
		if p.status != http.StatusSeeOther {
			t.Fatalf("status %d, want a redirect:\n%s", p.status, p.body)
		}
		loc, err := url.Parse(p.header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		return loc.Query().Get("notice")
	}
	if got := notice(u.post("/apps/shop/scale", url.Values{"csrf": {csrf}, "process": {"web"}, "count": {"2"}})); got != "Stored web=2 on plan starter: the first push runs it." {
		t.Errorf("after scaling an app without a release the page says %q", got)
	}
	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", Image: "r/dashscale/shop@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy abc1234", CreatedBy: "git"}); err != nil {
		t.Fatal(err)
	}
	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "dashscale", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	app.Status.CurrentRelease = 1
	if err := e.Kube.Status().Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	if got := notice(u.post("/apps/shop/scale", url.Values{"csrf": {csrf}, "process": {"web"}, "count": {"3"}, "plan": {"standard"}})); got != "Scaled to web=3 on plan standard: release v1 runs it now." {
		t.Errorf("after a scale the page says %q", got)
	}
	p = u.post("/apps/shop/scale", url.Values{"csrf": {csrf}, "process": {"web"}, "count": {"30"}})
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "instancesPerProcess quota (20)") {
		t.Errorf("a scale over the limit: %d\n%s", p.status, p.body)
	}
	p = u.post("/apps/shop/scale", url.Values{"csrf": {csrf}, "process": {"web"}, "count": {"two"}})
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "give a whole number, 0 to 20") {
		t.Errorf("a count that is no number: %d\n%s", p.status, p.body)
	}
}

// TestSettingsForm: the app page's Settings form, filled with the app's
// settings, sets the health check, the deploy branch and maintenance mode
// and says what changed; the page then shows them; unchecking maintenance
// turns it off; a bad value shows the API's refusal and changes nothing.
func TestSettingsForm(t *testing.T) {
	e, u, _ := withShop(t, "dashset")
	ctx := t.Context()
	p := u.get("/apps/shop")
	if !strings.Contains(p.body, `id="app-settings"`) || !strings.Contains(p.body, `name="branch" value="main"`) {
		t.Fatalf("the app page has no Settings form with the branch:\n%s", p.body)
	}
	csrf := p.csrf(t)
	notice := func(p page) string {
		t.Helper()
		if p.status != http.StatusSeeOther {
			t.Fatalf("status %d, want a redirect:\n%s", p.status, p.body)
		}
		loc, err := url.Parse(p.header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		return loc.Query().Get("notice")
	}
	got := notice(u.post("/apps/shop/settings", url.Values{"csrf": {csrf}, "healthpath": {"/healthz"}, "healthport": {"8081"}, "healthtimeout": {"3"},
		"healthinterval": {"20"}, "healthsuccess": {"2"}, "healthfailure": {"4"}, "branch": {"prod"}, "maintenance": {"on"}}))
	if got != "Settings saved: health check; branch prod; maintenance mode on: nothing runs and the URL answers with a maintenance page." {
		t.Errorf("after saving the page says %q", got)
	}
	app := &platformv1alpha1.App{}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "dashset", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	if hc := app.Spec.HealthCheck; !app.Spec.Suspended || app.Spec.Source.Branch != "prod" || hc == nil || hc.Path != "/healthz" || hc.TimeoutSeconds != 3 ||
		hc.Port == nil || *hc.Port != 8081 || hc.IntervalSeconds != 20 || hc.SuccessThreshold != 2 || hc.FailureThreshold != 4 {
		t.Errorf("the App's spec: %+v, health check %+v", app.Spec, app.Spec.HealthCheck)
	}
	p = u.get("/apps/shop")
	for _, want := range []string{`name="healthpath" value="/healthz"`, `name="healthport" type="number" min="1" max="65535" value="8081"`,
		`name="healthinterval" type="number" min="1" max="300" value="20"`, `name="healthsuccess" type="number" min="1" max="10" value="2"`,
		`name="healthfailure" type="number" min="1" max="10" value="4"`, "GET <code>/healthz</code> on port 8081, timeout 3s, every 20s, healthy after 2, unhealthy after 4 in a row",
		`name="branch" value="prod"`, `value="on" checked`, "the URL answers 503 with a maintenance page"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the app page lacks %s", want)
		}
	}
	if got := notice(u.post("/apps/shop/settings", url.Values{"csrf": {csrf}, "healthpath": {"/healthz"}, "healthtimeout": {"3"}, "branch": {"prod"}})); got != "Settings saved: maintenance mode off: the current release runs again." {
		t.Errorf("after turning maintenance off the page says %q", got)
	}
	p = u.post("/apps/shop/settings", url.Values{"csrf": {csrf}, "healthpath": {"/healthz"}, "healthtimeout": {"90"}, "branch": {"prod"}, "maintenance": {"on"}})
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "1 to 60") {
		t.Errorf("a timeout of 90 s: %d\n%s", p.status, p.body)
	}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "dashset", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.Suspended || app.Spec.HealthCheck.TimeoutSeconds != 3 {
		t.Errorf("a refused change changed the spec: %+v", app.Spec)
	}
	for field, v := range map[string]string{"healthinterval": "often", "healthfailure": "11"} {
		p = u.post("/apps/shop/settings", url.Values{"csrf": {csrf}, "healthpath": {"/healthz"}, field: {v}, "branch": {"prod"}, "maintenance": {"on"}})
		if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "1 to 10") && !strings.Contains(p.body, "1 to 300") {
			t.Errorf("%s %q: %d\n%s", field, v, p.status, p.body)
		}
	}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "dashset", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	if hc := app.Spec.HealthCheck; app.Spec.Suspended || hc.IntervalSeconds != 20 || hc.FailureThreshold != 4 {
		t.Errorf("a refused change changed the spec: %+v, %+v", app.Spec, hc)
	}

	// The maintenance page: a browser sends the textarea's lines ended by
	// CRLF; the page is stored with LF, and sent again unchanged it
	// changes nothing.
	pageForm := func(page string) url.Values {
		return url.Values{"csrf": {csrf}, "healthpath": {"/healthz"}, "branch": {"prod"}, "maintenancepage": {page}}
	}
	sent := "<h1>Back soon</h1>\r\n<p style=\"color:teal\">Stock-taking & more.</p>\r\n"
	stored := strings.ReplaceAll(sent, "\r\n", "\n")
	if got := notice(u.post("/apps/shop/settings", pageForm(sent))); got != fmt.Sprintf("Settings saved: maintenance page (%d bytes).", len(stored)) {
		t.Errorf("after setting a maintenance page the page says %q", got)
	}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "dashset", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.MaintenancePage != stored {
		t.Errorf("the App's maintenance page is %q, want %q", app.Spec.MaintenancePage, stored)
	}
	if p := u.get("/apps/shop"); !strings.Contains(p.body, "spellcheck=\"false\">\n&lt;h1&gt;Back soon&lt;/h1&gt;\n&lt;p style=&#34;color:teal&#34;&gt;Stock-taking &amp; more.&lt;/p&gt;\n</textarea>") {
		t.Errorf("the Settings form does not show the page in its textarea:\n%s", p.body)
	}
	if got := notice(u.post("/apps/shop/settings", pageForm(sent))); got != "Nothing changed." {
		t.Errorf("the same page again: the page says %q", got)
	}
	p = u.post("/apps/shop/settings", pageForm(strings.Repeat("x", 65537)))
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "at most 65536 bytes") {
		t.Errorf("a page of 65537 bytes: %d\n%s", p.status, p.body)
	}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "dashset", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.MaintenancePage != stored {
		t.Errorf("a refused page changed the App's: %.80q", app.Spec.MaintenancePage)
	}
	if got := notice(u.post("/apps/shop/settings", pageForm(""))); got != "Settings saved: maintenance page removed: the platform's is served." {
		t.Errorf("after emptying the maintenance page the page says %q", got)
	}
	if err := e.Kube.Get(ctx, client.ObjectKey{Namespace: "dashset", Name: "shop"}, app); err != nil {
		t.Fatal(err)
	}
	if app.Spec.MaintenancePage != "" {
		t.Errorf("the App keeps a maintenance page of %d bytes", len(app.Spec.MaintenancePage))
	}
}

// TestAppPageInstances: the app page lists what runs of the app, as bex
// ps does: each instance with its state, release and restarts, and the
// runtime's sentence; a crash shows as a restart; each release links to
// the build whose image it runs.
func TestAppPageInstances(t *testing.T) {
	e, u, tenant := withShop(t, "dashps")
	ctx := t.Context()
	if p := u.get("/apps/shop"); !strings.Contains(p.body, `id="instances"`) || strings.Contains(p.body, `id="instance-list"`) {
		t.Fatalf("before anything runs the page should have the section without a table:\n%s", p.body)
	}
	b, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "shop", Commit: strings.Repeat("a", 40)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", BuildID: b.ID, Image: "r/dashps/shop@sha256:1", Kind: store.ReleaseKindDeploy, Description: "Deploy aaaaaaa", CreatedBy: "git"}); err != nil {
		t.Fatal(err)
	}
	e.SetCurrentRelease(t, "dashps", "shop", 1)
	e.RunTestApp(t, "dashps", "shop", 1, "worker")

	p := u.get("/apps/shop")
	for _, want := range []string{
		`<tr data-instance="web.0"><td>web.0</td><td><span class="badge ready">up</span></td><td>v1</td><td>0</td>`,
		`<tr data-instance="worker.0"><td>worker.0</td>`,
		`<p id="instances-message">Release v1: `,
		fmt.Sprintf(`<a href="/apps/shop/builds/%d" data-release-build="%d">#%d</a>`, b.Number, b.Number, b.Number),
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the app page lacks %s:\n%s", want, p.body)
		}
	}
	e.CrashTestApp(t, "dashps", "shop")
	platformtest.Eventually(t, time.Minute, "web.0 restarted once and up", func(context.Context) error {
		p := u.get("/apps/shop")
		if !strings.Contains(p.body, `<tr data-instance="web.0"><td>web.0</td><td><span class="badge ready">up</span></td><td>v1</td><td>1</td>`) {
			return errors.New("web.0 is not up after one restart yet")
		}
		return nil
	})
}

// TestAppPageRuntimeDown: when the runtime does not answer, the app page
// says the instances could not be read, and lists the app's runs all the
// same (they come from the store).
func TestAppPageRuntimeDown(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	tenant, token := e.TenantToken(t, "dashdown")
	c, err := apiclient.New(e.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateApp(t.Context(), apiclient.CreateAppRequest{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	run, err := e.Store.CreateRun(t.Context(), store.NewRun{TenantID: tenant.ID, App: "shop", Release: 1, Command: []string{"rake", "db:migrate"}, CreatedBy: "ann@dashdown.test"})
	if err != nil {
		t.Fatal(err)
	}
	down := e.AnotherServerWith(t, func(o *api.Options) { o.Instances = api.RuntimeInstances{Driver: apitest.UnreachableRuntime(t)} })
	u := newUser(t, dashboardtest.StartAt(t, down).URL)
	signIn(t, u, token)
	p := u.get("/apps/shop")
	for _, want := range []string{
		`<p id="instances-message" class="error">the instances could not be read: the runtime that runs app &#34;shop&#34; does not answer now: try again in a moment</p>`,
		fmt.Sprintf(`<tr data-run="run.%d" data-run-status="running"><td>run.%d</td><td><code>rake db:migrate</code></td>`, run.Number, run.Number),
		fmt.Sprintf(`data-stop-run="%d"`, run.Number),
	} {
		if p.status != http.StatusOK || !strings.Contains(p.body, want) {
			t.Errorf("the app page while the runtime does not answer (%d) lacks %s:\n%s", p.status, want, p.body)
		}
	}
}
