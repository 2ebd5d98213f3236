package dashboard

import (
	"fmt"
	"net/http"
	"strconv"

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
// (Kind "") or those of one kind.
type releaseFilter struct {
	Kind, Label string
	// On is the filter the list shows.
	On bool
}

// releaseFilters are the release list's links, the one for kind on.
func releaseFilters(kind string) []releaseFilter {
	fs := []releaseFilter{{Label: "all"}, {Kind: apiclient.ReleaseKindDeploy, Label: "deploys"},
		{Kind: apiclient.ReleaseKindRollback, Label: "rollbacks"}, {Kind: apiclient.ReleaseKindConfig, Label: "config changes"}}
	for i := range fs {
		fs[i].On = fs[i].Kind == kind
	}
	return fs
}
