package dashboard_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// TestReleasePage: each release of the app page links to its page and
// shows its kind; the page shows what bex releases info prints: status,
// what made it by its kind, whatever the description says (a push and its
// commit, a config change, a rollback and to what), who, the image,
// the build, the variables by name with what changed, never a value, and
// the instances that run it; a developer rolls back from it, a viewer is
// offered no rollback; an unknown release and another tenant's app are
// not found.
func TestReleasePage(t *testing.T) {
	e, srv := startDashboard(t)
	ctx := t.Context()
	tenant, admin := e.TenantToken(t, "dashrelpage")
	api, err := apiclient.New(e.URL, admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateApp(ctx, apiclient.CreateAppRequest{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	u := newUser(t, srv.URL)
	signIn(t, u, admin)

	// v1 a push, v2 a config change; the values, plain and secret, must
	// never reach a page.
	commit := "0123456789abcdef0123456789abcdef01234567"
	b, err := e.Store.CreateBuild(ctx, store.NewBuild{TenantID: tenant.ID, App: "shop", Commit: commit, Stack: "go"})
	if err != nil {
		t.Fatal(err)
	}
	image := "registry.bex.test/dashrelpage/shop@sha256:" + strings.Repeat("ab", 32)
	plain := func(v string) store.ConfigValue { return store.ConfigValue{Value: &v} }
	apiKey := store.ConfigValue{SecretKeyRef: &store.SecretRef{Name: "shop-env", Key: "API_KEY"}}
	for _, nr := range []store.NewRelease{
		{Kind: store.ReleaseKindDeploy, Description: "Deploy 0123456", CreatedBy: "git", Config: map[string]store.ConfigValue{
			"DATABASE_URL": plain("postgres://shop:hunter2@db/shop"), "OLD_FLAG": plain("on"), "API_KEY": apiKey}},
		{Kind: store.ReleaseKindConfig, Description: "Set GREETING, DATABASE_URL; unset OLD_FLAG", CreatedBy: "token:ann", Config: map[string]store.ConfigValue{
			"DATABASE_URL": plain("postgres://shop:hunter3@db/shop"), "GREETING": plain("hi-from-the-value"), "API_KEY": apiKey}},
	} {
		nr.TenantID, nr.App, nr.BuildID, nr.Image = tenant.ID, "shop", b.ID, image
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	e.SetCurrentRelease(t, "dashrelpage", "shop", 2)
	// v3: a secret's new value under the same name, from the env form.
	csrf := u.get("/apps/shop").csrf(t)
	if p := u.post("/apps/shop/env", url.Values{"csrf": {csrf}, "name": {"API_KEY"}, "value": {"sk_live_topsecret"}, "secret": {"1"}}); p.status != http.StatusSeeOther {
		t.Fatalf("setting API_KEY: %d\n%s", p.status, p.body)
	}
	e.RunTestApp(t, "dashrelpage", "shop", 3)

	app := u.get("/apps/shop")
	for n := 1; n <= 3; n++ {
		if want := fmt.Sprintf(`<a href="/apps/shop/releases/%d" data-release-link="%d">v%d</a>`, n, n, n); !strings.Contains(app.body, want) {
			t.Errorf("the app page's release list lacks %s", want)
		}
	}
	// The list says each release's kind, from the API's kind field.
	for _, want := range []string{
		`<span class="badge" data-release-kind="deploy">deploy</span> Deploy 0123456`,
		`<span class="badge" data-release-kind="config">config</span> Set GREETING, DATABASE_URL; unset OLD_FLAG`,
		`<span class="badge" data-release-kind="config">config</span> Set API_KEY`,
	} {
		if !strings.Contains(app.body, want) {
			t.Errorf("the app page's release list lacks %s", want)
		}
	}
	secrets := []string{"hunter2", "hunter3", "hi-from-the-value", "sk_live_topsecret"}
	check := func(n int, want, unwanted []string) page {
		t.Helper()
		p := u.get(fmt.Sprintf("/apps/shop/releases/%d", n))
		if p.status != http.StatusOK {
			t.Fatalf("the page of v%d = %d:\n%s", n, p.status, p.body)
		}
		for _, w := range want {
			if !strings.Contains(p.body, w) {
				t.Errorf("the page of v%d lacks %s", n, w)
			}
		}
		for _, w := range append(unwanted, secrets...) {
			if strings.Contains(p.body, w) {
				t.Errorf("the page of v%d shows %s", n, w)
			}
		}
		if t.Failed() {
			t.Fatalf("the page of v%d:\n%s", n, p.body)
		}
		return p
	}
	build := fmt.Sprintf(`<a href="/apps/shop/builds/%d">#%d</a> of commit <code title="%s">01234567</code>, go`, b.Number, b.Number, commit)
	check(1, []string{
		`<h1>Release v1</h1>`, `id="release-status">superseded</span>`,
		`<dd id="release-origin" data-release-kind="deploy">a push of commit <code title="` + commit + `">01234567</code>`,
		`<code id="release-image">` + image + `</code>`, build,
		`the app's first release; added <code>API_KEY</code>, <code>DATABASE_URL</code>, <code>OLD_FLAG</code>`,
		`<tr data-env="API_KEY"><td><code>API_KEY</code></td><td>secret</td>`,
		`id="release-rollback"`, `<input type="hidden" name="release" value="1">`,
	}, nil)
	check(2, []string{
		`id="release-by">token:ann</dd>`,
		`<dd id="release-origin" data-release-kind="config">a config change: Set GREETING, DATABASE_URL; unset OLD_FLAG`,
		`from <a href="/apps/shop/releases/1" data-release-link="1">v1</a>: the same image; added <code>GREETING</code>; changed <code>DATABASE_URL</code>; removed <code>OLD_FLAG</code>`,
		`<tr data-env="DATABASE_URL"><td><code>DATABASE_URL</code></td><td>plain</td><td><span class="badge running">changed</span>`,
		`<tr data-env="OLD_FLAG"><td><code>OLD_FLAG</code></td><td></td><td><span class="badge failed">removed</span>`,
		`<code id="release-image">` + image + `</code>`, `id="release-rollback"`,
	}, []string{`id="release-instances"`})
	// The current release: what runs it, and no rollback to itself.
	check(3, []string{
		`id="release-status">current</span>`, `a config change: Set API_KEY`,
		`from <a href="/apps/shop/releases/2" data-release-link="2">v2</a>: the same image</dd>`,
		`<tr data-instance="web.0"><td>web.0</td><td><span class="badge ready">up</span>`,
	}, []string{`id="release-rollback"`})

	// A rollback from v1's page makes v4, whose page says to what.
	p := u.post("/apps/shop/rollback", url.Values{"csrf": {csrf}, "release": {"1"}})
	if loc, _ := url.Parse(p.header.Get("Location")); p.status != http.StatusSeeOther || loc == nil || loc.Query().Get("notice") != "Rolled back: release v4 runs what v1 ran." {
		t.Fatalf("rolling back to v1: %d to %q", p.status, p.header.Get("Location"))
	}
	check(4, []string{
		`<dd id="release-origin" data-release-kind="rollback">a rollback to <a href="/apps/shop/releases/1" data-release-link="1">v1</a>: its image and variables again`,
		`added <code>OLD_FLAG</code>; changed <code>DATABASE_URL</code>; removed <code>GREETING</code>`,
	}, nil)
	if !strings.Contains(u.get("/apps/shop").body, `<span class="badge" data-release-kind="rollback">rollback</span> Rollback to v1`) {
		t.Errorf("the app page's release list does not show v4 as a rollback")
	}

	// The kind says what made a release, whatever its description: v5, a
	// push whose description reads like a rollback, is a push of its
	// commit; its page has no link to a release it does not roll back to.
	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", Kind: store.ReleaseKindDeploy,
		BuildID: b.ID, Image: image, Description: "Rollback to v2, by hand", CreatedBy: "git"}); err != nil {
		t.Fatal(err)
	}
	check(5, []string{
		`<dd id="release-origin" data-release-kind="deploy">a push of commit <code title="` + commit + `">01234567</code>`,
	}, []string{"a rollback to", `data-release-link="2"`})

	// v6 failed: the list and its page say so and why, and offer no
	// rollback to it.
	failure := "the release phase (./migrate) exited with status 3; its last lines:\n  relation users already exists"
	if _, err := e.Store.CreateRelease(ctx, store.NewRelease{TenantID: tenant.ID, App: "shop", Kind: store.ReleaseKindDeploy,
		BuildID: b.ID, Image: image, Description: "Deploy 0123456", CreatedBy: "git", Failure: failure}); err != nil {
		t.Fatal(err)
	}
	check(6, []string{
		`<span class="badge failed" id="release-status">failed</span>`,
		`its rollout failed, so it never served and cannot be rolled back to`,
		`<div class="release-failure" id="release-failure">the release phase (./migrate) exited with status 3; its last lines:` + "\n" + `  relation users already exists</div>`,
	}, []string{`id="release-rollback"`})
	list := u.get("/apps/shop").body
	for _, want := range []string{
		`<tr data-release="6" data-release-status="failed">`,
		`<span class="badge failed" title="its rollout failed; the release before kept serving">failed</span>`,
		`<div class="release-failure" data-release-failure="6">the release phase (./migrate) exited with status 3`,
		`data-rollback="5"`,
	} {
		if !strings.Contains(list, want) {
			t.Errorf("the app page's release list lacks %s", want)
		}
	}
	if strings.Contains(list, `data-rollback="6"`) {
		t.Errorf("the app page offers a rollback to failed v6")
	}

	// Not found: a release the app does not have, a page that names no
	// release, another tenant's app; the image does not show.
	for path, want := range map[string]string{
		"/apps/shop/releases/99":   `app &#34;shop&#34; has no release v99`,
		"/apps/shop/releases/0":    "There is no release &#34;0&#34;",
		"/apps/shop/releases/v1x":  "There is no release &#34;v1x&#34;",
		"/apps/nope/releases/1":    "nope",
		"/apps/shop/releases/1e99": "There is no release",
	} {
		if p := u.get(path); p.status != http.StatusNotFound || !strings.Contains(p.body, want) {
			t.Errorf("GET %s = %d, want 404 saying %s:\n%s", path, p.status, want, p.body)
		}
	}
	_, other := e.TenantToken(t, "dashrelother")
	o := newUser(t, srv.URL)
	signIn(t, o, other)
	if p := o.get("/apps/shop/releases/1"); p.status != http.StatusNotFound || strings.Contains(p.body, image) {
		t.Errorf("another tenant opening shop's v1 = %d:\n%s", p.status, p.body)
	}

	// A viewer sees the page without the rollback form.
	v := newUser(t, srv.URL)
	signIn(t, v, e.Member(t, admin, "vic@dashrelpage.test", "viewer"))
	if p := v.get("/apps/shop/releases/1"); p.status != http.StatusOK || !strings.Contains(p.body, image) || strings.Contains(p.body, `id="release-rollback"`) {
		t.Errorf("a viewer's page of v1 = %d:\n%s", p.status, p.body)
	}
}

// TestReleaseListPages: the app page lists the newest 50 releases and,
// when there are older ones, links to the page before its last one, kinds
// filtered by kept; that page lists them and links back to the newest; a
// before that is no release number is refused.
func TestReleaseListPages(t *testing.T) {
	e, srv := startDashboard(t)
	ctx := t.Context()
	tenant, admin := e.TenantToken(t, "dashrelpages")
	api, err := apiclient.New(e.URL, admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateApp(ctx, apiclient.CreateAppRequest{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	// v1 to v52: odd ones deploys, even ones config changes.
	for n := 1; n <= 52; n++ {
		nr := store.NewRelease{TenantID: tenant.ID, App: "shop", Image: "r/dashrelpages/shop@sha256:1", Kind: store.ReleaseKindDeploy,
			Description: fmt.Sprintf("Deploy %d", n), CreatedBy: "git"}
		if n%2 == 0 {
			nr.Kind, nr.Description = store.ReleaseKindConfig, fmt.Sprintf("Set N%d", n)
		}
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	u := newUser(t, srv.URL)
	signIn(t, u, admin)
	listed := func(p page) []int {
		var ns []int
		for n := 1; n <= 52; n++ {
			if strings.Contains(p.body, fmt.Sprintf(`data-release-link="%d">v%d</a>`, n, n)) {
				ns = append(ns, n)
			}
		}
		return ns
	}
	for _, tc := range []struct {
		path              string
		first, last       int
		count             int
		older, newest     string
		noOlder, noNewest bool
	}{
		{path: "/apps/shop", first: 3, last: 52, count: 50, older: `href="/apps/shop?before=3#releases" data-release-page="older"`, noNewest: true},
		{path: "/apps/shop?before=3", first: 1, last: 2, count: 2, newest: `href="/apps/shop#releases" data-release-page="newest"`, noOlder: true},
		{path: "/apps/shop?before=v3", first: 1, last: 2, count: 2, noOlder: true},
		{path: "/apps/shop?kind=config&before=52", first: 2, last: 50, count: 25, newest: `href="/apps/shop?kind=config#releases"`, noOlder: true},
		// Several kinds: the pages keep the set, in the filter's order.
		{path: "/apps/shop?kind=config,deploy", first: 3, last: 52, count: 50, older: `href="/apps/shop?kind=deploy,config&amp;before=3#releases" data-release-page="older"`, noNewest: true},
		{path: "/apps/shop?kind=deploy,config&before=3", first: 1, last: 2, count: 2, newest: `href="/apps/shop?kind=deploy,config#releases" data-release-page="newest"`, noOlder: true},
	} {
		p := u.get(tc.path)
		if p.status != http.StatusOK {
			t.Errorf("%s: %d", tc.path, p.status)
			continue
		}
		ns := listed(p)
		if len(ns) != tc.count || ns[0] != tc.first || ns[len(ns)-1] != tc.last {
			t.Errorf("%s lists %v, want %d releases from v%d to v%d", tc.path, ns, tc.count, tc.first, tc.last)
		}
		for _, want := range []string{tc.older, tc.newest} {
			if want != "" && !strings.Contains(p.body, want) {
				t.Errorf("%s lacks the link %s", tc.path, want)
			}
		}
		if tc.noOlder && strings.Contains(p.body, `data-release-page="older"`) {
			t.Errorf("%s links to older releases: it lists the oldest", tc.path)
		}
		if tc.noNewest && strings.Contains(p.body, `data-release-page="newest"`) {
			t.Errorf("%s links to the newest releases: it lists them", tc.path)
		}
	}
	if p := u.get("/apps/shop?before=latest"); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "is not a release number") {
		t.Errorf("before=latest: %d, want 422 saying it is not a release number\n%s", p.status, p.body)
	}
}

// TestReleaseListFilters: the links above the release list toggle kinds,
// several at once: each kind's link adds it to the kinds shown or removes
// it, "all" clears them; the list shows the kinds of the set, says when
// there is none of them, and an unknown kind among them is refused as the
// API refuses it.
func TestReleaseListFilters(t *testing.T) {
	e, srv := startDashboard(t)
	ctx := t.Context()
	tenant, admin := e.TenantToken(t, "dashrelfilters")
	api, err := apiclient.New(e.URL, admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"shop", "quiet"} {
		if _, err := api.CreateApp(ctx, apiclient.CreateAppRequest{Name: app}); err != nil {
			t.Fatal(err)
		}
	}
	// v1 a deploy, v2 a config change, v3 a rollback to v1.
	for _, nr := range []store.NewRelease{
		{Kind: store.ReleaseKindDeploy, Description: "Deploy 1"},
		{Kind: store.ReleaseKindConfig, Description: "Set N2"},
		{Kind: store.ReleaseKindRollback, Description: "Rollback to v1", RollbackTo: 1},
	} {
		nr.TenantID, nr.App, nr.Image, nr.CreatedBy = tenant.ID, "shop", "r/dashrelfilters/shop@sha256:1", "git"
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	u := newUser(t, srv.URL)
	signIn(t, u, admin)
	link := func(filter, href string, on bool) string {
		l := fmt.Sprintf(`<a href="%s" data-release-filter="%s"`, href, filter)
		if on {
			l += ` aria-current="true" class="on"`
		}
		return l + ">"
	}
	for _, tc := range []struct {
		path   string
		listed []int
		links  []string
	}{
		{path: "/apps/shop", listed: []int{1, 2, 3}, links: []string{
			link("all", "/apps/shop#releases", true),
			link("deploy", "/apps/shop?kind=deploy#releases", false),
			link("rollback", "/apps/shop?kind=rollback#releases", false),
			link("config", "/apps/shop?kind=config#releases", false),
		}},
		{path: "/apps/shop?kind=deploy", listed: []int{1}, links: []string{
			link("all", "/apps/shop#releases", false),
			link("deploy", "/apps/shop#releases", true),
			link("rollback", "/apps/shop?kind=deploy,rollback#releases", false),
			link("config", "/apps/shop?kind=deploy,config#releases", false),
		}},
		{path: "/apps/shop?kind=config,deploy", listed: []int{1, 2}, links: []string{
			link("all", "/apps/shop#releases", false),
			link("deploy", "/apps/shop?kind=config#releases", true),
			link("rollback", "/apps/shop?kind=deploy,rollback,config#releases", false),
			link("config", "/apps/shop?kind=deploy#releases", true),
		}},
		{path: "/apps/shop?kind=rollback,config,rollback", listed: []int{2, 3}, links: []string{
			link("deploy", "/apps/shop?kind=deploy,rollback,config#releases", false),
			link("rollback", "/apps/shop?kind=config#releases", true),
			link("config", "/apps/shop?kind=rollback#releases", true),
		}},
	} {
		p := u.get(tc.path)
		if p.status != http.StatusOK {
			t.Errorf("%s: %d", tc.path, p.status)
			continue
		}
		var listed []int
		for n := 1; n <= 3; n++ {
			if strings.Contains(p.body, fmt.Sprintf(`data-release-link="%d">v%d</a>`, n, n)) {
				listed = append(listed, n)
			}
		}
		if fmt.Sprint(listed) != fmt.Sprint(tc.listed) {
			t.Errorf("%s lists %v, want %v", tc.path, listed, tc.listed)
		}
		for _, want := range tc.links {
			if !strings.Contains(p.body, want) {
				t.Errorf("%s lacks the filter link %s", tc.path, want)
			}
		}
	}
	if p := u.get("/apps/quiet?kind=deploy,rollback"); p.status != http.StatusOK || !strings.Contains(p.body, `<p id="release-none">No deploy or rollback release.</p>`) {
		t.Errorf("an app without deploys nor rollbacks, showing them: %d, want it to say there is none:\n%s", p.status, p.body)
	}
	for _, q := range []string{"deploy,restart", "deploy,"} {
		if p := u.get("/apps/shop?kind=" + q); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "deploy, rollback, config") {
			t.Errorf("kind=%s: %d, want 422 naming the kinds there are:\n%s", q, p.status, p.body)
		}
	}
}

// TestReleaseListStatusFilters: the status links above the release list
// toggle succeeded and failed as the kind links toggle kinds, each link
// keeping the other group's set; the list shows the releases of both
// sets, the pages keep them, the list says when there is none of them,
// and an unknown status is refused as the API refuses it.
func TestReleaseListStatusFilters(t *testing.T) {
	e, srv := startDashboard(t)
	ctx := t.Context()
	tenant, admin := e.TenantToken(t, "dashrelstatus")
	api, err := apiclient.New(e.URL, admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateApp(ctx, apiclient.CreateAppRequest{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	// v1 a deploy, v2 a failed one, v3 a config change, v4 a failed one.
	for _, nr := range []store.NewRelease{
		{Kind: store.ReleaseKindDeploy, Description: "Deploy 1"},
		{Kind: store.ReleaseKindDeploy, Description: "Deploy 2", Failure: "web.0 exited during start-up"},
		{Kind: store.ReleaseKindConfig, Description: "Set N3"},
		{Kind: store.ReleaseKindConfig, Description: "Set N4", Failure: "web.0 never became healthy"},
	} {
		nr.TenantID, nr.App, nr.Image, nr.CreatedBy = tenant.ID, "shop", "r/dashrelstatus/shop@sha256:1", "git"
		if _, err := e.Store.CreateRelease(ctx, nr); err != nil {
			t.Fatal(err)
		}
	}
	u := newUser(t, srv.URL)
	signIn(t, u, admin)
	link := func(attr, filter, href string, on bool) string {
		l := fmt.Sprintf(`<a href="%s" data-release-%s="%s"`, href, attr, filter)
		if on {
			l += ` aria-current="true" class="on"`
		}
		return l + ">"
	}
	for _, tc := range []struct {
		path   string
		listed []int
		links  []string
	}{
		{path: "/apps/shop", listed: []int{1, 2, 3, 4}, links: []string{
			link("status-filter", "all", "/apps/shop#releases", true),
			link("status-filter", "succeeded", "/apps/shop?status=succeeded#releases", false),
			link("status-filter", "failed", "/apps/shop?status=failed#releases", false),
		}},
		{path: "/apps/shop?status=failed", listed: []int{2, 4}, links: []string{
			link("status-filter", "all", "/apps/shop#releases", false),
			link("status-filter", "succeeded", "/apps/shop?status=succeeded,failed#releases", false),
			link("status-filter", "failed", "/apps/shop#releases", true),
			link("filter", "all", "/apps/shop?status=failed#releases", true),
			link("filter", "deploy", "/apps/shop?kind=deploy&amp;status=failed#releases", false),
		}},
		{path: "/apps/shop?status=failed,succeeded", listed: []int{1, 2, 3, 4}, links: []string{
			link("status-filter", "succeeded", "/apps/shop?status=failed#releases", true),
			link("status-filter", "failed", "/apps/shop?status=succeeded#releases", true),
		}},
		{path: "/apps/shop?kind=config&status=succeeded", listed: []int{3}, links: []string{
			link("status-filter", "all", "/apps/shop?kind=config#releases", false),
			link("status-filter", "failed", "/apps/shop?kind=config&amp;status=succeeded,failed#releases", false),
			link("filter", "config", "/apps/shop?status=succeeded#releases", true),
			link("filter", "deploy", "/apps/shop?kind=deploy,config&amp;status=succeeded#releases", false),
		}},
		{path: "/apps/shop?status=failed&before=4", listed: []int{2}, links: []string{
			`<a href="/apps/shop?status=failed#releases" data-release-page="newest">`,
		}},
	} {
		p := u.get(tc.path)
		if p.status != http.StatusOK {
			t.Errorf("%s: %d", tc.path, p.status)
			continue
		}
		var listed []int
		for n := 1; n <= 4; n++ {
			if strings.Contains(p.body, fmt.Sprintf(`data-release-link="%d">v%d</a>`, n, n)) {
				listed = append(listed, n)
			}
		}
		if fmt.Sprint(listed) != fmt.Sprint(tc.listed) {
			t.Errorf("%s lists %v, want %v", tc.path, listed, tc.listed)
		}
		for _, want := range tc.links {
			if !strings.Contains(p.body, want) {
				t.Errorf("%s lacks the link %s", tc.path, want)
			}
		}
	}
	if p := u.get("/apps/shop?status=failed&kind=rollback"); p.status != http.StatusOK || !strings.Contains(p.body, `<p id="release-none">No failed rollback release.</p>`) {
		t.Errorf("failed rollbacks: %d, want the page to say there is none:\n%s", p.status, p.body)
	}
	for _, q := range []string{"pending", "failed,"} {
		if p := u.get("/apps/shop?status=" + q); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "succeeded, failed") {
			t.Errorf("status=%s: %d, want 422 naming the statuses there are:\n%s", q, p.status, p.body)
		}
	}
}
