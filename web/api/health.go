package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

// healthTimeout bounds the readiness checks of one healthz request.
const healthTimeout = 5 * time.Second

// healthz answers 200 {"status":"ok"} when the store answers and every
// readiness check passes, and 503 {"status":"down"} otherwise. Anyone may
// ask, so that is all it says: which component failed and why goes to the
// log and, for a caller with an operator's token, into the answer.
func (s *Server) healthz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), healthTimeout)
	defer cancel()
	err := s.ready(ctx)
	if err == nil {
		return c.JSON(http.StatusOK, apiclient.Health{Status: "ok"})
	}
	s.log.Info("Not ready", "reason", err.Error())
	if s.callerIsOperator(ctx, c) {
		return &httpError{status: http.StatusServiceUnavailable, message: "not ready: " + err.Error()}
	}
	return c.JSON(http.StatusServiceUnavailable, apiclient.Health{Status: "down"})
}

// ready returns the first failing readiness check.
func (s *Server) ready(ctx context.Context) error {
	if err := s.store.Pool().Ping(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	for i, check := range s.checks {
		if err := check(ctx); err != nil {
			return fmt.Errorf("check %d: %w", i+1, err)
		}
	}
	return nil
}

// callerIsOperator reports whether the request carries a valid operator's
// token, on a route that does not require one.
func (s *Server) callerIsOperator(ctx context.Context, c echo.Context) bool {
	secret, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
	if !ok {
		return false
	}
	tok, err := s.store.AuthenticateToken(ctx, strings.TrimSpace(secret))
	return err == nil && tok.TenantID == ""
}

// whoAmI says whom the caller's token acts for.
func (s *Server) whoAmI(c echo.Context) error {
	p := principalOf(c)
	w := apiclient.WhoAmI{Tenant: p.tenant.Name, Operator: p.token.TenantID == "", Token: p.token.Name, Email: p.email, Scope: string(p.token.Scope)}
	if !w.Operator {
		w.Role = string(p.role)
	}
	return c.JSON(http.StatusOK, w)
}
