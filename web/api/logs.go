package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/httpserve"
)

const (
	// defaultTail is how many past lines GET .../logs sends when not told.
	defaultTail = 100
	// maxTail caps the tail parameter.
	maxTail = 10000
)

// appLogs streams the app's runtime output as JSON lines, flushing each.
func (s *Server) appLogs(c echo.Context) error {
	app, err := s.getAppObject(c)
	if err != nil {
		return err
	}
	follow, err := boolParam(c, "follow")
	if err != nil {
		return err
	}
	tail, err := intParam(c, "tail", defaultTail, maxTail)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if follow {
		end, err := s.streams.start(principalOf(c).tenant.ID)
		if err != nil {
			return err
		}
		defer end()
	}
	lines, err := s.logs.Logs(ctx, app.Namespace, app.Name, tail, follow)
	if err != nil {
		return fmt.Errorf("reading the logs of %s: %w", app.Name, err)
	}
	resp := c.Response()
	httpserve.Stream(resp)
	resp.Header().Set(echo.HeaderContentType, "application/x-ndjson")
	resp.Header().Set("Cache-Control", "no-store")
	resp.WriteHeader(http.StatusOK)
	resp.Flush()
	enc := json.NewEncoder(resp)
	for {
		select {
		case <-ctx.Done():
			return nil
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			if err := enc.Encode(l); err != nil {
				return err
			}
			resp.Flush()
		}
	}
}
