package dashboard

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/httpserve"
	"bex.co/bex/web/api/apiclient"
)

// appsPage lists the tenant's apps with their status, and a form to
// create one.
func (d *Dashboard) appsPage(c echo.Context) error {
	return d.renderApps(c, http.StatusOK, nil)
}

func (d *Dashboard) renderApps(c echo.Context, status int, formErr *apiclient.Error) error {
	apps, err := d.client(c).ListApps(c.Request().Context())
	if err != nil {
		return err
	}
	data := map[string]any{"Title": "Apps", "Apps": apps}
	if formErr != nil {
		data["FormError"] = formErr.Message
		data["Name"] = c.FormValue("name")
		data["Branch"] = c.FormValue("branch")
	}
	return d.render(c, status, "apps", data)
}

// createApp creates an app; the API's refusal is shown on the form.
func (d *Dashboard) createApp(c echo.Context) error {
	req := apiclient.CreateAppRequest{Name: strings.TrimSpace(c.FormValue("name")), Branch: strings.TrimSpace(c.FormValue("branch"))}
	app, err := d.client(c).CreateApp(c.Request().Context(), req)
	var ae *apiclient.Error
	if asAPIError(err, &ae) && ae.Status/100 == 4 && ae.Status != http.StatusUnauthorized {
		return d.renderApps(c, ae.Status, ae)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/apps/"+url.PathEscape(app.Name))
}

// releasesPerPage is how many releases the app page lists at once.
const releasesPerPage = 50

// appPage shows one app: status, how to push, releases with rollback,
// builds, charts, environment and routes.
func (d *Dashboard) appPage(c echo.Context) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	name := c.Param("app")
	app, err := cl.GetApp(ctx, name)
	if err != nil {
		return err
	}
	// ?kind= and ?status= narrow the release list to one kind or status
	// or several, separated by commas; the API refuses one it does not
	// know, which the error page says.
	kinds, statuses := releaseValues(c.QueryParam("kind")), releaseValues(c.QueryParam("status"))
	// ?before= pages the list back, as bex releases --before does; what
	// is no release number is refused on the error page.
	page := apiclient.ReleasePage{Kinds: kinds, Statuses: statuses, Limit: releasesPerPage}
	if b := c.QueryParam("before"); b != "" {
		n, ok := apiclient.ParseReleaseNumber(b)
		if !ok {
			return echo.NewHTTPError(http.StatusUnprocessableEntity, fmt.Sprintf("before %q is not a release number: give one such as 51", b))
		}
		page.Before = n
	}
	releases, err := cl.ListReleasesPage(ctx, name, page)
	if err != nil {
		return err
	}
	builds, err := cl.ListBuilds(ctx, name)
	if err != nil {
		return err
	}
	var env []apiclient.EnvVar
	if can(d.who(c).Role, "developer") {
		// A viewer may not read env values: the API answers 403.
		if env, err = cl.ListEnv(ctx, name); err != nil {
			return err
		}
	}
	routes, err := cl.ListRoutes(ctx, name)
	if err != nil {
		return err
	}
	set := newReleaseSet(kinds, statuses)
	byKind, byStatus := releaseFilters(kinds, statuses)
	data := map[string]any{
		"Title": app.Name, "App": app, "Releases": releases, "Builds": builds, "Env": env, "Routes": routes,
		"ReleaseSet": set, "ReleaseNames": releaseNames(set),
		"ReleaseFilters": byKind, "ReleaseStatusFilters": byStatus,
		"ReleasesBefore": page.Before, "OlderReleases": apiclient.OlderReleases(releases, releasesPerPage),
		"BuildChart": buildChart(builds, d.now()),
		"Notice":     c.QueryParam("notice"),
	}
	if d.traffic != nil {
		data["TrafficChart"] = trafficChart(d.traffic.Traffic(sessionOf(c).Tenant, app.Name))
	}
	// What runs is an extra too: a runtime that cannot say (an API
	// without it) leaves the section out, not the page.
	var running []apiclient.RunningRun
	if is, err := cl.Instances(ctx, name); err == nil {
		data["Instances"], running = is, is.Runs
	}
	// So are the runs: the newest, and any older one that runs still.
	if runs, err := cl.ListRuns(ctx, name, recentRuns+1); err == nil {
		data["Runs"] = appRuns(runs, running, recentRuns)
	}
	// The charts are extras: a server without the series (501) or a
	// series being cut short leaves them out, not the page.
	if m, err := cl.Metrics(ctx, name, ""); err == nil {
		data["MetricsCharts"], data["MetricsNote"] = metricsCharts(m), m.Note
	}
	return d.render(c, http.StatusOK, "app", data)
}

// rollback rolls the app back to the release the form names.
func (d *Dashboard) rollback(c echo.Context) error {
	name := c.Param("app")
	to, err := strconv.Atoi(c.FormValue("release"))
	if err != nil || to < 1 {
		return &pageError{status: http.StatusBadRequest, title: "Bad request", message: "The form names no release to roll back to."}
	}
	httpserve.AwaitRollout(c.Response())
	rb, err := d.client(c).Rollback(c.Request().Context(), name, to)
	if err != nil {
		return err
	}
	notice := fmt.Sprintf("Rolled back: release v%d runs what v%d ran.", rb.Release, rb.RolledBackTo)
	return c.Redirect(http.StatusSeeOther, "/apps/"+url.PathEscape(name)+"?notice="+url.QueryEscape(notice)+"#releases")
}

// setEnv sets or unsets one variable and, unless the form says not to,
// releases the change at once.
func (d *Dashboard) setEnv(c echo.Context) error {
	name := c.Param("app")
	key := strings.TrimSpace(c.FormValue("name"))
	req := apiclient.PatchEnvRequest{}
	if c.FormValue("unset") != "" {
		req.Unset = []string{key}
	} else {
		req.Set = map[string]string{key: c.FormValue("value")}
		req.Secret = c.FormValue("secret") != ""
	}
	req.NoRelease = c.FormValue("norelease") != ""
	httpserve.AwaitRollout(c.Response())
	_, release, err := d.client(c).PatchEnv(c.Request().Context(), name, req)
	if err != nil {
		return err
	}
	notice := "Environment changed: it goes out with the next release."
	if release > 0 {
		notice = fmt.Sprintf("Environment changed: release v%d runs with it.", release)
	}
	return c.Redirect(http.StatusSeeOther, "/apps/"+url.PathEscape(name)+"?notice="+url.QueryEscape(notice)+"#env")
}

// restart restarts the app's current release, every process or the one
// the form names.
func (d *Dashboard) restart(c echo.Context) error {
	name := c.Param("app")
	httpserve.AwaitRollout(c.Response())
	r, err := d.client(c).Restart(c.Request().Context(), name, strings.TrimSpace(c.FormValue("process")))
	if err != nil {
		return err
	}
	notice := fmt.Sprintf("Restarted %s: new instances of release v%d.", strings.Join(r.Processes, ", "), r.Release)
	return c.Redirect(http.StatusSeeOther, "/apps/"+url.PathEscape(name)+"?notice="+url.QueryEscape(notice))
}

// stopRun asks the one-off run the path names to stop, as bex runs stop
// does: its command gets SIGTERM, then SIGKILL.
func (d *Dashboard) stopRun(c echo.Context) error {
	name := c.Param("app")
	n, err := strconv.Atoi(c.Param("run"))
	if err != nil || n <= 0 {
		return &pageError{status: http.StatusNotFound, title: "No such run", message: fmt.Sprintf("Run %q: runs are numbered from 1.", c.Param("run"))}
	}
	r, err := d.client(c).StopRun(c.Request().Context(), name, n)
	if err != nil {
		return err
	}
	notice := fmt.Sprintf("Stopping run.%d: its command gets SIGTERM, then SIGKILL; its row under Runs says how it ended.", r.Number)
	return c.Redirect(http.StatusSeeOther, "/apps/"+url.PathEscape(name)+"?notice="+url.QueryEscape(notice))
}

// scale sets the instances of the process the form names, and the plan
// it picks, applied to the current release.
func (d *Dashboard) scale(c echo.Context) error {
	name := c.Param("app")
	counts := map[string]int{}
	if count := strings.TrimSpace(c.FormValue("count")); count != "" {
		n, err := strconv.Atoi(count)
		if err != nil {
			return &pageError{status: http.StatusUnprocessableEntity, title: "Not scaled", message: fmt.Sprintf("Instances %q: give a whole number, 0 to %d.", count, apiclient.MaxInstancesPerProcess)}
		}
		counts[strings.TrimSpace(c.FormValue("process"))] = n
	}
	httpserve.AwaitRollout(c.Response())
	r, err := d.client(c).Scale(c.Request().Context(), name, counts, c.FormValue("plan"))
	if err != nil {
		return err
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(r.Processes)) {
		parts = append(parts, fmt.Sprintf("%s=%d", p, r.Processes[p]))
	}
	notice := fmt.Sprintf("Scaled to %s on plan %s: release v%d runs it now.", strings.Join(parts, " "), r.Plan, r.Release)
	if r.Release == 0 {
		notice = fmt.Sprintf("Stored %s on plan %s: the first push runs it.", strings.Join(parts, " "), r.Plan)
	}
	return c.Redirect(http.StatusSeeOther, "/apps/"+url.PathEscape(name)+"?notice="+url.QueryEscape(notice)+"#scale")
}

// settings changes the health check (path, port, timeout, interval,
// thresholds), the deploy branch, maintenance mode and the maintenance
// page as the Settings form says; an empty path removes the health check,
// an empty page the app's page. A page that differs from the app's only
// in line endings (a browser sends a textarea's lines ended by CRLF) is
// left as it is.
func (d *Dashboard) settings(c echo.Context) error {
	name := c.Param("app")
	on := c.FormValue("maintenance") != ""
	req := apiclient.UpdateAppRequest{Branch: strings.TrimSpace(c.FormValue("branch")), Maintenance: &on}
	if path := strings.TrimSpace(c.FormValue("healthpath")); path == "" {
		req.RemoveHealthCheck = true
	} else {
		hc := &apiclient.HealthCheck{Path: path}
		// Empty fields keep the API's defaults; the API bounds each.
		for _, f := range []struct {
			form, what string
			to         *int
		}{
			{"healthport", "Port: give a port number, 1 to 65535, or leave it empty for the process's PORT", &hc.Port},
			{"healthtimeout", "Timeout: give a whole number of seconds, 1 to 60", &hc.TimeoutSeconds},
			{"healthinterval", "Interval: give a whole number of seconds, 1 to 300", &hc.IntervalSeconds},
			{"healthsuccess", "Healthy after: give a number of checks in a row, 1 to 10", &hc.SuccessThreshold},
			{"healthfailure", "Unhealthy after: give a number of checks in a row, 1 to 10", &hc.FailureThreshold},
		} {
			v := strings.TrimSpace(c.FormValue(f.form))
			if v == "" {
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return &pageError{status: http.StatusUnprocessableEntity, title: "Settings not saved", message: fmt.Sprintf("%q: %s.", v, f.what)}
			}
			*f.to = n
		}
		req.HealthCheck = hc
	}
	cl := d.client(c)
	before, err := cl.GetApp(c.Request().Context(), name)
	if err != nil {
		return err
	}
	if _, given := c.Request().PostForm["maintenancepage"]; given {
		page := strings.ReplaceAll(c.FormValue("maintenancepage"), "\r\n", "\n")
		if strings.TrimSpace(page) == "" {
			page = ""
		}
		if page != strings.ReplaceAll(before.MaintenancePage, "\r\n", "\n") {
			req.MaintenancePage = &page
		}
	}
	httpserve.AwaitRollout(c.Response())
	after, err := cl.UpdateApp(c.Request().Context(), name, req)
	if err != nil {
		return err
	}
	var changed []string
	if !reflect.DeepEqual(before.HealthCheck, after.HealthCheck) {
		changed = append(changed, "health check")
	}
	if before.Branch != after.Branch {
		changed = append(changed, "branch "+after.Branch)
	}
	switch {
	case before.MaintenancePage == after.MaintenancePage:
	case after.MaintenancePage == "":
		changed = append(changed, "maintenance page removed: the platform's is served")
	default:
		changed = append(changed, fmt.Sprintf("maintenance page (%d bytes)", after.MaintenancePageBytes))
	}
	switch {
	case after.Maintenance && !before.Maintenance:
		changed = append(changed, "maintenance mode on: nothing runs and the URL answers with a maintenance page")
	case !after.Maintenance && before.Maintenance:
		changed = append(changed, "maintenance mode off: the current release runs again")
	}
	notice := "Nothing changed."
	if len(changed) > 0 {
		notice = "Settings saved: " + strings.Join(changed, "; ") + "."
	}
	return c.Redirect(http.StatusSeeOther, "/apps/"+url.PathEscape(name)+"?notice="+url.QueryEscape(notice)+"#settings")
}

// deleteApp deletes the app once its name was typed again.
func (d *Dashboard) deleteApp(c echo.Context) error {
	name := c.Param("app")
	if c.FormValue("confirm") != name {
		return &pageError{status: http.StatusUnprocessableEntity, title: "Not deleted", message: fmt.Sprintf("Type the app's name, %s, to delete it.", name)}
	}
	if err := d.client(c).DeleteApp(c.Request().Context(), name); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/apps")
}

// buildPage shows a build and its log so far; the script follows the log.
func (d *Dashboard) buildPage(c echo.Context) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	name := c.Param("app")
	n, err := buildNumber(c)
	if err != nil {
		return err
	}
	app, err := cl.GetApp(ctx, name)
	if err != nil {
		return err
	}
	b, err := cl.GetBuild(ctx, name, n)
	if err != nil {
		return err
	}
	var log bytes.Buffer
	if err := cl.BuildLog(ctx, name, b.Number, false, &log); err != nil {
		return err
	}
	return d.render(c, http.StatusOK, "build", map[string]any{
		"Title": fmt.Sprintf("%s build %d", app.Name, b.Number), "App": app, "Build": b, "Log": log.String(),
	})
}

func buildNumber(c echo.Context) (int, error) {
	n, err := strconv.Atoi(c.Param("build"))
	if err != nil || n < 1 {
		return 0, &pageError{status: http.StatusNotFound, title: "Not found", message: fmt.Sprintf("There is no build %q.", c.Param("build"))}
	}
	return n, nil
}

// buildLogStream sends the build's log as server-sent events, one "line"
// per line, until the build ends; then one "end" with its status.
func (d *Dashboard) buildLogStream(c echo.Context) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	name := c.Param("app")
	n, err := buildNumber(c)
	if err != nil {
		return err
	}
	if _, err := cl.GetBuild(ctx, name, n); err != nil {
		return err
	}
	ev := startEvents(c)
	lw := &lineWriter{send: func(line string) error { return ev.send("line", line) }}
	if err := cl.BuildLog(ctx, name, n, true, lw); err != nil {
		return ev.fail(err)
	}
	if err := lw.flush(); err != nil {
		return nil
	}
	b, err := cl.GetBuild(ctx, name, n)
	if err != nil {
		return ev.fail(err)
	}
	return ev.send("end", b.Status)
}

// logsPage shows the app's recent runtime output; the script follows it.
func (d *Dashboard) logsPage(c echo.Context) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	app, err := cl.GetApp(ctx, c.Param("app"))
	if err != nil {
		return err
	}
	var lines []string
	if err := cl.Logs(ctx, app.Name, 200, false, func(l apiclient.LogLine) error {
		lines = append(lines, formatLogLine(l))
		return nil
	}); err != nil {
		return err
	}
	return d.render(c, http.StatusOK, "logs", map[string]any{"Title": app.Name + " logs", "App": app, "Log": strings.Join(lines, "\n")})
}

// logsStream sends the app's runtime output as server-sent events, the
// last 200 lines then new ones, until the page goes away.
func (d *Dashboard) logsStream(c echo.Context) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	name := c.Param("app")
	if _, err := cl.GetApp(ctx, name); err != nil {
		return err
	}
	ev := startEvents(c)
	err := cl.Logs(ctx, name, 200, true, func(l apiclient.LogLine) error { return ev.send("line", formatLogLine(l)) })
	if err != nil && ctx.Err() == nil {
		return ev.fail(err)
	}
	return nil
}

func formatLogLine(l apiclient.LogLine) string {
	who := l.Process
	if l.Instance != "" {
		who += "." + l.Instance
	}
	return l.Time.UTC().Format("15:04:05") + " " + who + ": " + l.Text
}

// currentRelease returns the release that serves, if any.
func currentRelease(rs []apiclient.Release) (apiclient.Release, bool) {
	i := slices.IndexFunc(rs, func(r apiclient.Release) bool { return r.Current })
	if i < 0 {
		return apiclient.Release{}, false
	}
	return rs[i], true
}
