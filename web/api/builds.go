package api

import (
	"bufio"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/httpserve"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

func buildView(b store.Build) apiclient.Build {
	v := apiclient.Build{
		App:       b.App,
		Number:    b.Number,
		Commit:    b.Commit,
		Status:    string(b.Status),
		Stack:     b.Stack,
		Image:     b.Image,
		Error:     b.Error,
		StartedAt: b.StartedAt.UTC(),
	}
	if b.FinishedAt != nil {
		t := b.FinishedAt.UTC()
		v.FinishedAt = &t
	}
	for _, st := range b.Timings {
		v.Timings = append(v.Timings, apiclient.StepTime{Name: st.Name, Seconds: st.Seconds})
	}
	return v
}

// limitOf reads the limit query parameter; 0 lets the store choose.
func limitOf(c echo.Context) (int, error) {
	q := c.QueryParam("limit")
	if q == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 1 {
		return 0, invalid("limit", "limit %q is not a positive number", q)
	}
	return n, nil
}

func (s *Server) listAllBuilds(c echo.Context) error {
	return s.writeBuilds(c, "")
}

func (s *Server) listBuilds(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	return s.writeBuilds(c, app.Name)
}

func (s *Server) writeBuilds(c echo.Context, app string) error {
	limit, err := limitOf(c)
	if err != nil {
		return err
	}
	builds, err := s.store.ListBuilds(c.Request().Context(), principalOf(c).tenant.ID, app, limit)
	if err != nil {
		return err
	}
	views := make([]apiclient.Build, 0, len(builds))
	for _, b := range builds {
		views = append(views, buildView(b))
	}
	return c.JSON(http.StatusOK, views)
}

// findBuild reads the build named by the :app and :build parameters.
func (s *Server) findBuild(c echo.Context) (store.Build, error) {
	app, err := s.getAppObject(c)
	if err != nil {
		return store.Build{}, err
	}
	ref := c.Param("build")
	number := 0
	if ref != "latest" {
		if number, err = strconv.Atoi(ref); err != nil || number < 1 {
			return store.Build{}, notFound("build %q of app %q not found: give its number or latest", ref, app.Name)
		}
	}
	b, err := s.store.GetBuildByNumber(c.Request().Context(), principalOf(c).tenant.ID, app.Name, number)
	if errors.Is(err, store.ErrNotFound) {
		if number == 0 {
			return store.Build{}, notFound("app %q has no builds yet: push to its git remote", app.Name)
		}
		return store.Build{}, notFound("build %d of app %q not found", number, app.Name)
	}
	return b, err
}

func (s *Server) getBuild(c echo.Context) error {
	b, err := s.findBuild(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, buildView(b))
}

// buildLog writes the build's log as text; with follow=true it streams
// lines as they are appended and ends when the build does.
func (s *Server) buildLog(c echo.Context) error {
	b, err := s.findBuild(c)
	if err != nil {
		return err
	}
	follow, err := boolParam(c, "follow")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	// A follow starts before the answer does, so that one that cannot
	// start is answered with an error rather than an empty 200.
	var follower *store.BuildLogFollower
	if follow {
		end, err := s.streams.start(principalOf(c).tenant.ID)
		if err != nil {
			return err
		}
		defer end()
		follower, err = s.store.StartFollowingBuildLog(ctx, b.ID)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) || ctx.Err() != nil {
				return err
			}
			s.log.Error(err, "Following a build log failed", "build", b.ID)
			return &httpError{status: http.StatusServiceUnavailable,
				message: "the platform cannot follow build logs now: try again shortly, or read the log without follow"}
		}
		defer follower.Close()
	}
	resp := c.Response()
	httpserve.Stream(resp)
	resp.Header().Set(echo.HeaderContentType, echo.MIMETextPlainCharsetUTF8)
	resp.Header().Set("X-Content-Type-Options", "nosniff")
	resp.Header().Set("Cache-Control", "no-store")
	resp.WriteHeader(http.StatusOK)
	w := bufio.NewWriter(resp)
	emit := func(l store.BuildLogLine) error {
		if _, err := w.WriteString(l.Line + "\n"); err != nil {
			return err
		}
		if follow {
			if err := w.Flush(); err != nil {
				return err
			}
			resp.Flush()
		}
		return nil
	}
	if follow {
		resp.Flush() // the client sees the answer start before the first line
		if _, err := follower.Follow(ctx, 0, emit); err != nil {
			return err
		}
		return w.Flush()
	}
	var seq int64
	for {
		lines, err := s.store.BuildLogs(ctx, b.ID, seq)
		if err != nil {
			return err
		}
		if len(lines) == 0 {
			return w.Flush()
		}
		for _, l := range lines {
			if err := emit(l); err != nil {
				return err
			}
			seq = l.Seq
		}
	}
}

// boolParam reads a boolean query parameter; absent is false.
func boolParam(c echo.Context, name string) (bool, error) {
	q := c.QueryParam(name)
	if q == "" {
		return false, nil
	}
	v, err := strconv.ParseBool(q)
	if err != nil {
		return false, invalid(name, "%s=%q: want true or false", name, q)
	}
	return v, nil
}

// intParam reads a non-negative integer query parameter; absent is def.
func intParam(c echo.Context, name string, def, maxValue int) (int, error) {
	q := c.QueryParam(name)
	if q == "" {
		return def, nil
	}
	v, err := strconv.Atoi(q)
	if err != nil || v < 0 || v > maxValue {
		return 0, invalid(name, "%s=%q: want a number from 0 to %d", name, q, maxValue)
	}
	return v, nil
}
