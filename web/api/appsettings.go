package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/store"
)

// settingNames are the fields of apiclient.UpdateAppRequest, in the order
// the audit entry and the errors list them.
var settingNames = []string{"healthCheck", "processes", "plan", "branch", "maintenance", "maintenancePage"}

// healthCheckFields are the fields of apiclient.HealthCheck and their
// bounds, as the App CRD has them; path is checked on its own.
var healthCheckFields = []struct {
	name     string
	min, max int
	what     string
}{
	{"port", 0, 65535, "the port checked (0: the process's PORT)"},
	{"timeoutSeconds", 1, 60, "how long one check may take, in seconds"},
	{"intervalSeconds", 1, 300, "the seconds between two checks"},
	{"successThreshold", 1, 10, "how many checks in a row an unhealthy instance must pass"},
	{"failureThreshold", 1, 10, "how many checks in a row a healthy instance must fail"},
}

// maxHealthPath is the longest health-check path the App CRD accepts.
const maxHealthPath = 1024

// appSettings is a PATCH /apps/{app} body, read and checked: what is not
// given stays as it is.
type appSettings struct {
	// removeHealthCheck is set by "healthCheck": null.
	removeHealthCheck bool
	// healthPath and healthInts are the health check's fields given.
	healthPath *string
	healthInts map[string]int
	counts     map[string]int
	plan       string
	branch     string
	// maintenance is nil when not given.
	maintenance *bool
	// maintenancePage is nil when not given; empty removes the page.
	maintenancePage *string
}

// readSettings checks every field of a PATCH /apps/{app} body: a field
// the API does not know, a value of the wrong type or out of its bounds
// is a 422 naming the field; counts over the limit a 403 as a scale's.
func readSettings(raw map[string]json.RawMessage) (appSettings, error) {
	var st appSettings
	if len(raw) == 0 {
		return st, invalid("", "nothing to change: give at least one of %s", strings.Join(settingNames, ", "))
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if !slices.Contains(settingNames, k) {
			return st, invalid(k, "unknown setting %q: the settings are %s", k, strings.Join(settingNames, ", "))
		}
	}
	if v, ok := raw["healthCheck"]; ok {
		if err := st.readHealthCheck(v); err != nil {
			return st, err
		}
	}
	if v, ok := raw["processes"]; ok {
		var procs map[string]json.RawMessage
		if err := json.Unmarshal(v, &procs); err != nil || procs == nil {
			return st, invalid("processes", "processes is an object of instance counts, such as {\"web\": 2}")
		}
		counts, err := scaleCounts(scaleBody{Processes: procs})
		if err != nil {
			return st, err
		}
		st.counts = counts
	}
	if v, ok := raw["plan"]; ok {
		if err := json.Unmarshal(v, &st.plan); err != nil || !slices.Contains(plans, st.plan) {
			return st, invalid("plan", "plan %s: the plans are %s", v, strings.Join(plans, ", "))
		}
	}
	if v, ok := raw["branch"]; ok {
		if err := json.Unmarshal(v, &st.branch); err != nil {
			return st, invalid("branch", "branch is a string: the name of the git branch whose pushes deploy, such as main")
		}
		if err := checkBranch(st.branch); err != nil {
			return st, err
		}
	}
	if v, ok := raw["maintenance"]; ok {
		var on bool
		if err := json.Unmarshal(v, &on); err != nil {
			return st, invalid("maintenance", "maintenance is true (on) or false (off), not %s", v)
		}
		st.maintenance = &on
	}
	if v, ok := raw["maintenancePage"]; ok {
		var page string
		if err := json.Unmarshal(v, &page); err != nil {
			return st, invalid("maintenancePage", "maintenancePage is a string: the HTML page served while the app is in maintenance mode, or \"\" to serve the platform's page")
		}
		if err := checkMaintenancePage(page); err != nil {
			return st, err
		}
		st.maintenancePage = &page
	}
	return st, nil
}

// checkMaintenancePage says what is wrong with page as an app's
// maintenance page, or returns nil.
func checkMaintenancePage(page string) error {
	switch {
	case len(page) > platformv1alpha1.MaxMaintenancePage:
		return invalid("maintenancePage", "maintenancePage has %d bytes: a maintenance page is at most %d bytes (64 KiB); inline its styles and keep images small", len(page), platformv1alpha1.MaxMaintenancePage)
	case !utf8.ValidString(page):
		return invalid("maintenancePage", "maintenancePage is not valid UTF-8: save the page as UTF-8")
	}
	return nil
}

// readHealthCheck reads the healthCheck field: null, or an object of
// apiclient.HealthCheck's fields.
func (st *appSettings) readHealthCheck(v json.RawMessage) error {
	if strings.TrimSpace(string(v)) == "null" {
		st.removeHealthCheck = true
		return nil
	}
	var hc map[string]json.RawMessage
	if err := json.Unmarshal(v, &hc); err != nil {
		return invalid("healthCheck", "healthCheck is an object such as {\"path\": \"/healthz\", \"timeoutSeconds\": 5}, or null to remove the check")
	}
	if len(hc) == 0 {
		return invalid("healthCheck", "healthCheck is empty: give its path, timeoutSeconds or another of its fields, or null to remove the check")
	}
	known := []string{"path"}
	for _, f := range healthCheckFields {
		known = append(known, f.name)
	}
	for _, k := range slices.Sorted(maps.Keys(hc)) {
		if !slices.Contains(known, k) {
			return invalid("healthCheck."+k, "unknown health-check field %q: the fields are %s", k, strings.Join(known, ", "))
		}
	}
	if p, ok := hc["path"]; ok {
		var path string
		if err := json.Unmarshal(p, &path); err != nil || !healthPathOK(path) {
			return invalid("healthCheck.path", "health-check path %s: a path such as /healthz, starting with '/', at most %d bytes, without spaces or control characters", p, maxHealthPath)
		}
		st.healthPath = &path
	}
	st.healthInts = map[string]int{}
	for _, f := range healthCheckFields {
		p, ok := hc[f.name]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(p)))
		if err != nil || n < f.min || n > f.max {
			return invalid("healthCheck."+f.name, "healthCheck.%s %s: %s is a whole number, %d to %d", f.name, p, f.what, f.min, f.max)
		}
		st.healthInts[f.name] = n
	}
	return nil
}

// healthPathOK reports whether path may be requested as a health check.
func healthPathOK(path string) bool {
	if !strings.HasPrefix(path, "/") || len(path) > maxHealthPath {
		return false
	}
	for i := 0; i < len(path); i++ {
		if path[i] <= ' ' || path[i] == 0x7f {
			return false
		}
	}
	return true
}

// checkBranch says what is wrong with name as a deploy branch, as git's
// check-ref-format and the App CRD see it, or returns nil.
func checkBranch(name string) error {
	bad := name == "" || len(name) > 255 || !branchName.MatchString(name) ||
		strings.Contains(name, "..") || strings.Contains(name, "//") || strings.Contains(name, "/.") ||
		strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock")
	if bad {
		return invalid("branch", "branch %q is not a branch name: letters, digits and - . _ /, at most 255 of them, as git names branches (no '..', no '//', not ending in '/', '.' or '.lock')", name)
	}
	return nil
}

// apply changes app's spec as st says. An app without a health check
// needs the path of a new one.
func (st appSettings) apply(app *platformv1alpha1.App) error {
	switch {
	case st.removeHealthCheck:
		app.Spec.HealthCheck = nil
	case st.healthPath != nil || len(st.healthInts) > 0:
		hc := &platformv1alpha1.HealthCheck{}
		if app.Spec.HealthCheck != nil {
			hc = app.Spec.HealthCheck.DeepCopy()
		}
		if st.healthPath != nil {
			hc.Path = *st.healthPath
		}
		if hc.Path == "" {
			return invalid("healthCheck.path", "app %s has no health check yet: give its path, such as /healthz", app.Name)
		}
		for name, n := range st.healthInts {
			v := int32(n)
			switch name {
			case "port":
				hc.Port = &v
				if n == 0 {
					hc.Port = nil
				}
			case "timeoutSeconds":
				hc.TimeoutSeconds = v
			case "intervalSeconds":
				hc.IntervalSeconds = v
			case "successThreshold":
				hc.SuccessThreshold = v
			case "failureThreshold":
				hc.FailureThreshold = v
			}
		}
		app.Spec.HealthCheck = hc
	}
	for _, name := range slices.Sorted(maps.Keys(st.counts)) {
		n := int32(st.counts[name])
		i := slices.IndexFunc(app.Spec.Processes, func(pr platformv1alpha1.Process) bool { return pr.Name == name })
		if i < 0 {
			app.Spec.Processes = append(app.Spec.Processes, platformv1alpha1.Process{Name: name})
			i = len(app.Spec.Processes) - 1
		}
		app.Spec.Processes[i].Replicas = &n
	}
	if st.plan != "" {
		app.Spec.Plan = platformv1alpha1.Plan(st.plan)
	}
	if st.branch != "" {
		app.Spec.Source.Branch = st.branch
	}
	if st.maintenance != nil {
		app.Spec.Suspended = *st.maintenance
	}
	if st.maintenancePage != nil {
		app.Spec.MaintenancePage = *st.maintenancePage
	}
	return nil
}

// changedSettings names the settings whose values differ between the
// specs of before and after.
func changedSettings(before, after *platformv1alpha1.App) []string {
	var changed []string
	add := func(name string, differ bool) {
		if differ {
			changed = append(changed, name)
		}
	}
	b, a := before.Spec, after.Spec
	add("healthCheck", !reflect.DeepEqual(b.HealthCheck, a.HealthCheck))
	add("processes", !reflect.DeepEqual(b.Processes, a.Processes))
	add("plan", planOf(b) != planOf(a))
	add("branch", branchOf(b) != branchOf(a))
	add("maintenance", b.Suspended != a.Suspended)
	add("maintenancePage", b.MaintenancePage != a.MaintenancePage)
	return changed
}

// planOf is the App's plan, starter when it names none.
func planOf(spec platformv1alpha1.AppSpec) string {
	if spec.Plan == "" {
		return string(platformv1alpha1.PlanStarter)
	}
	return string(spec.Plan)
}

// branchOf is the App's deploy branch, main when it names none.
func branchOf(spec platformv1alpha1.AppSpec) string {
	if spec.Source.Branch == "" {
		return "main"
	}
	return spec.Source.Branch
}

// updateApp checks every setting, then hands the change to the Releaser,
// which applies at once what runs (instance counts, plan, maintenance).
func (s *Server) updateApp(c echo.Context) error {
	var raw map[string]json.RawMessage
	if err := bind(c, &raw, false); err != nil {
		return err
	}
	st, err := readSettings(raw)
	if err != nil {
		return err
	}
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	want := app.DeepCopy()
	if err := st.apply(want); err != nil {
		return err
	}
	changed := changedSettings(app, want)
	if len(changed) == 0 {
		return c.JSON(http.StatusOK, s.appDetail(app))
	}
	awaitRollout(c)
	p := principalOf(c)
	n, err := s.deployer.Update(c.Request().Context(), p.tenant.Name, app.Name, st.apply)
	if errors.Is(err, store.ErrInvalid) {
		return invalid("processes", "%v", err)
	}
	if err != nil {
		return fmt.Errorf("updating %s: %w", app.Name, err)
	}
	s.audit(c, "app.update", app.Name, map[string]any{"changed": changed, "release": n})
	app, err = s.getAppObject(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.appDetail(app))
}
