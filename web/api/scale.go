package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// scaleBody is apiclient.ScaleRequest as it arrives: counts are read one
// by one, so that one that is not a number gets a 422 that names it.
type scaleBody struct {
	Processes map[string]json.RawMessage `json:"processes"`
	Plan      string                     `json:"plan"`
}

// plans are the plans an App may name, as its spec.plan enum says.
var plans = []string{string(platformv1alpha1.PlanStarter), string(platformv1alpha1.PlanStandard), string(platformv1alpha1.PlanPro)}

// scale checks the counts, the plan and the limits, then hands the scale
// to the Releaser.
func (s *Server) scale(c echo.Context) error {
	var req scaleBody
	if err := bind(c, &req, false); err != nil {
		return err
	}
	counts, err := scaleCounts(req)
	if err != nil {
		return err
	}
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	awaitRollout(c)
	p := principalOf(c)
	n, procs, err := s.deployer.Scale(c.Request().Context(), p.tenant.Name, app.Name, counts, req.Plan)
	if errors.Is(err, store.ErrInvalid) {
		return invalid("processes", "%v", err)
	}
	if err != nil {
		return fmt.Errorf("scaling %s: %w", app.Name, err)
	}
	plan := req.Plan
	if plan == "" {
		plan = string(app.Spec.Plan)
	}
	s.audit(c, "app.scale", app.Name, map[string]any{"processes": counts, "plan": req.Plan, "release": n})
	return c.JSON(http.StatusOK, apiclient.Scale{Release: n, Processes: procs, Plan: plan})
}

// scaleCounts reads and checks a scale's counts and plan: a 422 for what
// is not a count, a 403 naming the limit for a count over it.
func scaleCounts(req scaleBody) (map[string]int, error) {
	if len(req.Processes) == 0 && req.Plan == "" {
		return nil, invalid("processes", "nothing to scale: give counts such as {\"web\": 2}, a plan, or both")
	}
	if req.Plan != "" && !slices.Contains(plans, req.Plan) {
		return nil, invalid("plan", "plan %q: the plans are %s", req.Plan, strings.Join(plans, ", "))
	}
	if len(req.Processes) > maxProcesses {
		return nil, invalid("processes", "%d process types: an app has at most %d", len(req.Processes), maxProcesses)
	}
	counts := map[string]int{}
	for _, name := range slices.Sorted(maps.Keys(req.Processes)) {
		if !processType.MatchString(name) {
			return nil, invalid("processes", "process %q: a process type is a lowercase name such as web or worker, as the Procfile names it", name)
		}
		raw := strings.TrimSpace(string(req.Processes[name]))
		n, err := strconv.Atoi(raw)
		switch {
		case err != nil:
			return nil, invalid("processes", "%s=%s: the count of instances is a whole number, 0 to %d", name, raw, apiclient.MaxInstancesPerProcess)
		case n < 0:
			return nil, invalid("processes", "%s=%d: the count of instances is 0 or more (0 stops the process)", name, n)
		case n > apiclient.MaxInstancesPerProcess:
			return nil, &store.QuotaError{Quota: "instancesPerProcess", Limit: strconv.Itoa(apiclient.MaxInstancesPerProcess),
				Detail: fmt.Sprintf("%s=%d asks for more instances of one process than any plan runs; ask for %d or fewer", name, n, apiclient.MaxInstancesPerProcess)}
		}
		counts[name] = n
	}
	return counts, nil
}

// maxProcesses is how many process types an App may list (its
// spec.processes maximum).
const maxProcesses = 10
