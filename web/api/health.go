package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

// healthTimeout bounds the readiness checks of one healthz request.
const healthTimeout = 5 * time.Second

// healthz answers 200 when the store answers and every readiness check
// passes, and 503 naming the first that failed otherwise.
func (s *Server) healthz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), healthTimeout)
	defer cancel()
	if err := s.store.Pool().Ping(ctx); err != nil {
		return &httpError{status: http.StatusServiceUnavailable, message: fmt.Sprintf("not ready: store: %v", err)}
	}
	for i, check := range s.checks {
		if err := check(ctx); err != nil {
			return &httpError{status: http.StatusServiceUnavailable, message: fmt.Sprintf("not ready: check %d: %v", i+1, err)}
		}
	}
	return c.JSON(http.StatusOK, apiclient.Health{Status: "ok"})
}

// whoAmI says whom the caller's token acts for.
func (s *Server) whoAmI(c echo.Context) error {
	p := principalOf(c)
	return c.JSON(http.StatusOK, apiclient.WhoAmI{Tenant: p.tenant.Name, Operator: p.token.TenantID == "", Token: p.token.Name})
}
