package app

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

// appsSetFlags are the flags of bex apps set.
type appsSetFlags struct {
	healthPath                    string
	healthTimeout, healthInterval time.Duration
	healthPort                    int
	healthSuccess, healthFailure  int
	noHealthCheck                 bool
	plan, branch, maintenance     string
	// maintenancePage is the file of --maintenance-page ("-": standard
	// input).
	maintenancePage   string
	noMaintenancePage bool
}

func newAppsSetCommand(st *state) *cobra.Command {
	var f appsSetFlags
	cmd := &cobra.Command{
		Use: "set APP [PROCESS=COUNT...] [--health-path P] [--health-timeout D] [--health-interval D] [--health-port N] " +
			"[--health-success N] [--health-failure N] [--no-health-check] " +
			"[--plan NAME] [--branch B] [--maintenance on|off] [--maintenance-page FILE] [--no-maintenance-page]",
		Short: "Change an app's settings: instance counts, plan, health check, maintenance mode and page apply at once; the deploy branch from the next push",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			counts, err := parseCounts(args[1:])
			if err != nil {
				return err
			}
			req, err := f.request(cmd, counts)
			if err != nil {
				return err
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			before, err := c.GetApp(cmd.Context(), args[0])
			if err != nil {
				return explain(err)
			}
			after, err := c.UpdateApp(cmd.Context(), args[0], req)
			if err != nil {
				return explain(err)
			}
			return st.render(after, func(w io.Writer) error { return renderSettingsChange(w, before, after) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.healthPath, "health-path", "", "The path of the HTTP health check, such as /healthz")
	fl.DurationVar(&f.healthTimeout, "health-timeout", 0, "How long one health check may take, in whole seconds (1s to 60s)")
	fl.DurationVar(&f.healthInterval, "health-interval", 0, "The time between two health checks, in whole seconds (1s to 300s)")
	fl.IntVar(&f.healthPort, "health-port", 0, "The port the health check calls (1 to 65535); the process's PORT unless given")
	fl.IntVar(&f.healthSuccess, "health-success", 0, "How many checks in a row make an unhealthy instance healthy (1 to 10)")
	fl.IntVar(&f.healthFailure, "health-failure", 0, "How many checks in a row make a healthy instance unhealthy (1 to 10)")
	fl.BoolVar(&f.noHealthCheck, "no-health-check", false, "Remove the health check: an instance is healthy once its port accepts connections")
	fl.StringVar(&f.plan, "plan", "", "The plan each instance runs on: starter, standard or pro")
	fl.StringVar(&f.branch, "branch", "", "The git branch whose pushes deploy")
	fl.StringVar(&f.maintenance, "maintenance", "", "on: stop every instance and answer with a maintenance page; off: run the current release again")
	fl.StringVar(&f.maintenancePage, "maintenance-page", "", "An HTML file (- reads standard input), at most 64 KiB of UTF-8, that browsers get while the app is in maintenance mode; "+
		"it runs no script and loads nothing from elsewhere: inline its styles, images as data: URLs")
	fl.BoolVar(&f.noMaintenancePage, "no-maintenance-page", false, "Remove the app's maintenance page: the platform's is served")
	return cmd
}

// request turns the flags that were given, and counts, into the API's
// request.
func (f appsSetFlags) request(cmd *cobra.Command, counts map[string]int) (apiclient.UpdateAppRequest, error) {
	req := apiclient.UpdateAppRequest{Plan: f.plan, Branch: f.branch}
	if len(counts) > 0 {
		req.Processes = counts
	}
	changed := cmd.Flags().Changed
	seconds := func(flag string, d time.Duration) (int, error) {
		if d < time.Second || d%time.Second != 0 {
			return 0, usagef("--%s %s: give whole seconds, such as 5s", flag, d)
		}
		return int(d / time.Second), nil
	}
	hc := &apiclient.HealthCheck{Path: f.healthPath}
	var err error
	if changed("health-timeout") {
		if hc.TimeoutSeconds, err = seconds("health-timeout", f.healthTimeout); err != nil {
			return req, err
		}
	}
	if changed("health-interval") {
		if hc.IntervalSeconds, err = seconds("health-interval", f.healthInterval); err != nil {
			return req, err
		}
	}
	for _, n := range []struct {
		flag   string
		v, max int
		to     *int
	}{
		{"health-port", f.healthPort, 65535, &hc.Port},
		{"health-success", f.healthSuccess, 10, &hc.SuccessThreshold},
		{"health-failure", f.healthFailure, 10, &hc.FailureThreshold},
	} {
		if !changed(n.flag) {
			continue
		}
		if n.v < 1 || n.v > n.max {
			return req, usagef("--%s %d: give 1 to %d", n.flag, n.v, n.max)
		}
		*n.to = n.v
	}
	if changed("health-path") && f.healthPath == "" {
		return req, usagef("--health-path is empty: give a path such as /healthz, or --no-health-check to remove the check")
	}
	switch {
	case f.noHealthCheck && *hc != apiclient.HealthCheck{}:
		return req, usagef("--no-health-check removes the health check: give it without the other --health flags")
	case f.noHealthCheck:
		req.RemoveHealthCheck = true
	case *hc != apiclient.HealthCheck{}:
		req.HealthCheck = hc
	}
	switch f.maintenance {
	case "":
	case "on", "off":
		on := f.maintenance == "on"
		req.Maintenance = &on
	default:
		return req, usagef("--maintenance %q: give on or off", f.maintenance)
	}
	if changed("plan") && f.plan == "" || changed("branch") && f.branch == "" {
		return req, usagef("--plan and --branch need a value")
	}
	switch {
	case f.noMaintenancePage && changed("maintenance-page"):
		return req, usagef("--no-maintenance-page removes the maintenance page: give it without --maintenance-page")
	case f.noMaintenancePage:
		none := ""
		req.MaintenancePage = &none
	case changed("maintenance-page"):
		page, err := readMaintenancePage(cmd.InOrStdin(), f.maintenancePage)
		if err != nil {
			return req, err
		}
		req.MaintenancePage = &page
	}
	if req.HealthCheck == nil && !req.RemoveHealthCheck && req.Processes == nil && req.Plan == "" && req.Branch == "" && req.Maintenance == nil && req.MaintenancePage == nil {
		return req, usagef("nothing to change: give PROCESS=COUNT (web=2), --health-path, --health-timeout, --health-interval, --health-port, --health-success, --health-failure, --no-health-check, --plan, --branch, --maintenance, --maintenance-page or --no-maintenance-page")
	}
	return req, nil
}

// readMaintenancePage reads the maintenance page of --maintenance-page
// from the file name, or from stdin for "-": at most
// apiclient.MaxMaintenancePage bytes of UTF-8, checked before anything is
// sent.
func readMaintenancePage(stdin io.Reader, name string) (string, error) {
	var r io.Reader
	switch name {
	case "":
		return "", usagef("--maintenance-page is empty: give an HTML file (- for standard input), or --no-maintenance-page to remove the page")
	case "-":
		r = stdin
	default:
		f, err := os.Open(name)
		if err != nil {
			return "", usagef("--maintenance-page: %v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, apiclient.MaxMaintenancePage+1))
	if err != nil {
		return "", fmt.Errorf("reading the maintenance page %s: %w", name, err)
	}
	switch {
	case len(b) > apiclient.MaxMaintenancePage:
		return "", usagef("--maintenance-page %s is over %d bytes (64 KiB): inline its styles and keep images small", name, apiclient.MaxMaintenancePage)
	case len(b) == 0:
		return "", usagef("--maintenance-page %s is empty: give an HTML page, or --no-maintenance-page to remove the page", name)
	case !utf8.Valid(b):
		return "", usagef("--maintenance-page %s is not valid UTF-8: save it as UTF-8", name)
	}
	return string(b), nil
}

// renderSettingsChange says which settings of the app changed, from what
// to what, and when each takes effect.
func renderSettingsChange(w io.Writer, before, after apiclient.App) error {
	type change struct{ name, from, to string }
	var changes []change
	add := func(name, from, to string) {
		if from != to {
			changes = append(changes, change{name, from, to})
		}
	}
	add("Health check", healthCheckWords(before.HealthCheck), healthCheckWords(after.HealthCheck))
	add("Processes", formation(before.Processes), formation(after.Processes))
	add("Plan", before.Plan, after.Plan)
	add("Branch", before.Branch, after.Branch)
	add("Maintenance", onOff(before.Maintenance), onOff(after.Maintenance))
	pageChanged := before.MaintenancePage != after.MaintenancePage
	if pageChanged {
		to := pageWords(after.MaintenancePageBytes)
		if before.MaintenancePageBytes == after.MaintenancePageBytes {
			to = fmt.Sprintf("another of its own (%d bytes)", after.MaintenancePageBytes)
		}
		changes = append(changes, change{"Page", pageWords(before.MaintenancePageBytes), to})
	}
	if len(changes) == 0 {
		_, err := fmt.Fprintf(w, "Nothing changed: %s has these settings already.\n", after.Name)
		return err
	}
	if _, err := fmt.Fprintf(w, "Changed %s:\n", after.Name); err != nil {
		return err
	}
	for _, c := range changes {
		if _, err := fmt.Fprintf(w, "  %-14s%s -> %s\n", c.name+":", c.from, c.to); err != nil {
			return err
		}
	}
	var notes []string
	switch {
	case after.CurrentRelease == 0:
		notes = append(notes, "It has no release yet: its first push runs with these settings.")
	case after.Maintenance && !before.Maintenance:
		notes = append(notes, fmt.Sprintf("Maintenance mode is on: %s runs no instance and its URL answers 503 with a maintenance page; `bex apps set %s --maintenance off` brings release v%d back.",
			after.Name, after.Name, after.CurrentRelease))
	case !after.Maintenance && before.Maintenance:
		notes = append(notes, fmt.Sprintf("Maintenance mode is off: release v%d runs and serves again.", after.CurrentRelease))
	case after.Maintenance:
		notes = append(notes, "The app is in maintenance mode: new counts and plan run when it ends.")
	}
	switch {
	case pageChanged && after.Maintenance && after.MaintenancePageBytes == 0:
		notes = append(notes, "Browsers get the platform's maintenance page now.")
	case pageChanged && after.Maintenance:
		notes = append(notes, "Browsers get the new maintenance page now.")
	case pageChanged && after.MaintenancePageBytes > 0:
		notes = append(notes, "Browsers get this maintenance page while maintenance mode is on.")
	}
	healthChanged := healthCheckWords(before.HealthCheck) != healthCheckWords(after.HealthCheck)
	switch {
	case after.CurrentRelease == 0 || !healthChanged:
	case after.Maintenance:
		notes = append(notes, "The health check applies when maintenance mode ends.")
	case before.Maintenance:
		// The release ran again with it: the maintenance note says so.
	case after.HealthCheck == nil:
		notes = append(notes, fmt.Sprintf("Release v%d rolled with no health check.", after.CurrentRelease))
	default:
		notes = append(notes, fmt.Sprintf("Release v%d rolled: each new instance passed the new health check before it took traffic.", after.CurrentRelease))
	}
	if after.CurrentRelease != 0 && before.Branch != after.Branch {
		notes = append(notes, "The branch applies from the next push.")
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}

// healthCheckWords is a health check in a few words.
func healthCheckWords(hc *apiclient.HealthCheck) string {
	if hc == nil {
		return "none"
	}
	s := fmt.Sprintf("GET %s every %ds, timeout %ds", hc.Path, hc.IntervalSeconds, hc.TimeoutSeconds)
	if hc.Port != 0 {
		s += fmt.Sprintf(", port %d", hc.Port)
	}
	return s + fmt.Sprintf(", healthy after %d, unhealthy after %d in a row", hc.SuccessThreshold, hc.FailureThreshold)
}

// formation is instance counts as PROCESS=COUNT words, sorted; "default"
// when the App sets none.
func formation(counts map[string]int) string {
	if len(counts) == 0 {
		return "default"
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", name, counts[name]))
	}
	return strings.Join(parts, " ")
}

// pageWords says in a few words which maintenance page an app serves.
func pageWords(bytes int) string {
	if bytes == 0 {
		return "the platform's"
	}
	return fmt.Sprintf("its own (%d bytes)", bytes)
}

// onOff says a switch in a word.
func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
