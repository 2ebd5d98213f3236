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

// releaseSet is what an app page's release list is filtered by, as ?kind=
// and ?status= carry it: kinds and statuses, each separated by commas in
// the order of the list's links; "" for every one.
type releaseSet struct{ Kinds, Statuses string }

// releaseFilter is one link above an app's release list: every release
// (Value "") or a kind or a status toggled in or out of those the list
// shows.
type releaseFilter struct {
	Value, Label string
	// On: the list shows Value (every one, for Value "").
	On bool
	// Set is what the link's list is filtered by: the list's with Value
	// toggled.
	Set releaseSet
}

// filterOption is one value the release list filters by, and its link's
// label.
type filterOption struct{ value, label string }

// releaseFilterKinds are the kinds the release list filters by, in the
// order of its links.
func releaseFilterKinds() []filterOption {
	return []filterOption{{apiclient.ReleaseKindDeploy, "deploys"}, {apiclient.ReleaseKindRollback, "rollbacks"}, {apiclient.ReleaseKindConfig, "config changes"}}
}

// releaseFilterStatuses are the statuses the release list filters by, in
// the order of its links.
func releaseFilterStatuses() []filterOption {
	return []filterOption{{apiclient.ReleaseSucceeded, "succeeded"}, {apiclient.ReleaseFailed, "failed"}}
}

// releaseValues reads ?kind= or ?status=: values separated by commas, as
// the API and bex releases --kind and --status take them. It does not
// check them: the API refuses an empty or unknown one saying which ones
// there are.
func releaseValues(q string) []string {
	if q == "" {
		return nil
	}
	var values []string
	for v := range strings.SplitSeq(q, ",") {
		if v = strings.TrimSpace(v); !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	return values
}

// inFilterOrder returns the values of options among values, separated by
// commas in the order of the release list's links, so that a set has one
// ?kind= or ?status=.
func inFilterOrder(values []string, options []filterOption) string {
	var set []string
	for _, o := range options {
		if slices.Contains(values, o.value) {
			set = append(set, o.value)
		}
	}
	return strings.Join(set, ",")
}

// newReleaseSet is the release list's set of kinds and statuses.
func newReleaseSet(kinds, statuses []string) releaseSet {
	return releaseSet{Kinds: inFilterOrder(kinds, releaseFilterKinds()), Statuses: inFilterOrder(statuses, releaseFilterStatuses())}
}

// releaseNames names the releases of set for people: "failed deploy or
// config"; "" for every release.
func releaseNames(set releaseSet) string {
	var words []string
	for _, list := range []string{set.Statuses, set.Kinds} {
		if list != "" {
			words = append(words, strings.ReplaceAll(list, ",", " or "))
		}
	}
	return strings.Join(words, " ")
}

// releasesHref links to app's release list of set before release number
// before (0: the newest). The commas stay as they are, as a user types
// them.
func releasesHref(app string, set releaseSet, before int) string {
	var q []string
	if set.Kinds != "" {
		q = append(q, "kind="+strings.ReplaceAll(url.QueryEscape(set.Kinds), "%2C", ","))
	}
	if set.Statuses != "" {
		q = append(q, "status="+strings.ReplaceAll(url.QueryEscape(set.Statuses), "%2C", ","))
	}
	if before > 0 {
		q = append(q, "before="+strconv.Itoa(before))
	}
	h := "/apps/" + url.PathEscape(app)
	if len(q) > 0 {
		h += "?" + strings.Join(q, "&")
	}
	return h + "#releases"
}

// releaseFilters are the release list's links, by kind and by status:
// each group's "all" clears its set, each value's link adds it to the
// set or removes it; a link keeps the other group's set.
func releaseFilters(kinds, statuses []string) (byKind, byStatus []releaseFilter) {
	set := newReleaseSet(kinds, statuses)
	byKind = toggleLinks(releaseFilterKinds(), kinds, func(ks string) releaseSet { return releaseSet{Kinds: ks, Statuses: set.Statuses} })
	byStatus = toggleLinks(releaseFilterStatuses(), statuses, func(sts string) releaseSet { return releaseSet{Kinds: set.Kinds, Statuses: sts} })
	return byKind, byStatus
}

// toggleLinks are the links of one group of options whose set is on:
// "all", then each option toggled; with makes a link's set of the group's.
func toggleLinks(options []filterOption, on []string, with func(string) releaseSet) []releaseFilter {
	fs := []releaseFilter{{Label: "all", On: len(on) == 0, Set: with("")}}
	for _, o := range options {
		isOn := slices.Contains(on, o.value)
		toggled := slices.DeleteFunc(slices.Clone(on), func(v string) bool { return v == o.value })
		if !isOn {
			toggled = append(toggled, o.value)
		}
		fs = append(fs, releaseFilter{Value: o.value, Label: o.label, On: isOn, Set: with(inFilterOrder(toggled, options))})
	}
	return fs
}
