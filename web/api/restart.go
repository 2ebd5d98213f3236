package api

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/httpserve"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// processType is the form of a process type's name, as the runtime takes
// it (a Procfile's web, worker).
var processType = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,20}[a-z0-9])?$`)

// awaitRollout lifts the server's write timeout for an answer that waits
// for a rollout.
func awaitRollout(c echo.Context) { httpserve.AwaitRollout(c.Response()) }

// restart checks the app and the process and hands the restart to the
// Releaser.
func (s *Server) restart(c echo.Context) error {
	var req apiclient.RestartRequest
	if err := bind(c, &req, true); err != nil {
		return err
	}
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	if req.Process != "" && !processType.MatchString(req.Process) {
		return invalid("process", "process %q: a process type is a lowercase name such as web or worker, as the Procfile names it; leave it out to restart every process", req.Process)
	}
	if app.Status.CurrentRelease == 0 {
		return &httpError{status: http.StatusConflict, message: fmt.Sprintf("app %q has no release to restart yet: push to its git remote first", app.Name)}
	}
	if app.Spec.Suspended {
		return &httpError{status: http.StatusConflict, message: fmt.Sprintf("app %q is in maintenance mode and runs no instance: turn it off (bex apps set %s --maintenance off) to run its release again", app.Name, app.Name)}
	}
	awaitRollout(c)
	p := principalOf(c)
	n, procs, err := s.deployer.Restart(c.Request().Context(), p.tenant.Name, app.Name, req.Process)
	if errors.Is(err, store.ErrInvalid) {
		return invalid("process", "%v", err)
	}
	if err != nil {
		return fmt.Errorf("restarting %s: %w", app.Name, err)
	}
	s.audit(c, "app.restart", app.Name, map[string]any{"process": req.Process, "processes": procs, "release": n})
	return c.JSON(http.StatusOK, apiclient.Restart{Release: n, Processes: procs})
}
