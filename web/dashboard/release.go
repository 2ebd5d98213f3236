package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

// releasePage shows one release as bex releases info prints it: status,
// who and when, what made it (its kind: a push, a rollback and to what, a
// config change), the image, the build, the variables by name (never a
// value), what it changed from the release before, the instances that run
// it, and the rollback form when it can run again.
func (d *Dashboard) releasePage(c echo.Context) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	n, err := releaseNumber(c)
	if err != nil {
		return err
	}
	app, err := cl.GetApp(ctx, c.Param("app"))
	if err != nil {
		return err
	}
	r, err := cl.GetRelease(ctx, app.Name, n)
	if err != nil {
		return err
	}
	data := map[string]any{
		"Title": fmt.Sprintf("%s v%d", app.Name, r.Number), "App": app, "Release": r, "Env": releaseEnv(r),
	}
	// What runs is an extra, as on the app page: a runtime that cannot
	// say leaves the section out, not the page.
	if is, err := cl.Instances(ctx, app.Name); err == nil {
		var of []apiclient.Instance
		for _, in := range is.Instances {
			if in.Release == r.Number {
				of = append(of, in)
			}
		}
		data["Instances"] = of
	}
	return d.render(c, http.StatusOK, "release", data)
}

// releaseNumber reads the release's number from the path: a page that
// names none is not found, as one the app does not have.
func releaseNumber(c echo.Context) (int, error) {
	n, err := strconv.Atoi(c.Param("release"))
	if err != nil || n < 1 {
		return 0, &pageError{status: http.StatusNotFound, title: "Not found", message: fmt.Sprintf("There is no release %q: releases are numbered 1, 2, 3...", c.Param("release"))}
	}
	return n, nil
}

// envRow is a variable on a release's page: its name, whether it is a
// secret, and what the release did to it (added, changed, removed, or
// nothing).
type envRow struct {
	Name   string
	Secret bool
	Change string
}

// releaseEnv lists r's variables by name with what r changed of each,
// then the ones it removed. Values are not in r: the API never gives one.
func releaseEnv(r apiclient.ReleaseInfo) []envRow {
	change := map[string]string{}
	for _, ch := range []struct {
		what  string
		names []string
	}{{"added", r.Changes.Added}, {"changed", r.Changes.Changed}} {
		for _, name := range ch.names {
			change[name] = ch.what
		}
	}
	rows := make([]envRow, 0, len(r.Env)+len(r.Changes.Removed))
	for _, v := range r.Env {
		rows = append(rows, envRow{Name: v.Name, Secret: v.Secret, Change: change[v.Name]})
	}
	for _, name := range r.Changes.Removed {
		rows = append(rows, envRow{Name: name, Change: "removed"})
	}
	return rows
}

// releaseFilter is one link above an app's release list: every release
// (Kind "") or a kind toggled in or out of the kinds the list shows.
type releaseFilter struct {
	Kind, Label string
	// On: the list shows Kind (every release, for Kind "").
	On bool
	// Kinds is the link's ?kind=: the list's kinds with Kind toggled,
	// separated by commas; "" for every release.
	Kinds string
}

// releaseFilterKinds are the kinds the release list filters by, in the
// order of its links.
var releaseFilterKinds = []struct{ kind, label string }{
	{apiclient.ReleaseKindDeploy, "deploys"}, {apiclient.ReleaseKindRollback, "rollbacks"}, {apiclient.ReleaseKindConfig, "config changes"},
}

// releaseKinds reads ?kind=: kinds separated by commas, as the API and
// bex releases --kind take them. It does not check them: the API refuses
// an empty or unknown kind saying which ones there are.
func releaseKinds(q string) []string {
	if q == "" {
		return nil
	}
	var kinds []string
	for k := range strings.SplitSeq(q, ",") {
		if k = strings.TrimSpace(k); !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// inFilterOrder returns the known kinds of kinds in the order of the
// release list's links, so that a set has one ?kind=.
func inFilterOrder(kinds []string) []string {
	var set []string
	for _, f := range releaseFilterKinds {
		if slices.Contains(kinds, f.kind) {
			set = append(set, f.kind)
		}
	}
	return set
}

// releasesHref links to app's release list of kinds (separated by commas;
// "" for every kind) before release number before (0: the newest). The
// commas stay as they are, as a user types them.
func releasesHref(app, kinds string, before int) string {
	q := url.Values{}
	if before > 0 {
		q.Set("before", strconv.Itoa(before))
	}
	h := "/apps/" + url.PathEscape(app)
	if kinds != "" {
		h += "?kind=" + strings.ReplaceAll(url.QueryEscape(kinds), "%2C", ",")
		if before > 0 {
			h += "&" + q.Encode()
		}
	} else if before > 0 {
		h += "?" + q.Encode()
	}
	return h + "#releases"
}

// releaseFilters are the release list's links for the list of kinds: "all"
// clears the set, each kind's link adds it to the set or removes it.
func releaseFilters(kinds []string) []releaseFilter {
	fs := []releaseFilter{{Label: "all", On: len(kinds) == 0}}
	for _, f := range releaseFilterKinds {
		on := slices.Contains(kinds, f.kind)
		toggled := slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k == f.kind })
		if !on {
			toggled = append(toggled, f.kind)
		}
		fs = append(fs, releaseFilter{Kind: f.kind, Label: f.label, On: on, Kinds: strings.Join(inFilterOrder(toggled), ",")})
	}
	return fs
}
