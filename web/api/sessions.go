package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

const (
	// defaultSessionTTL and maxSessionTTL bound a session's life.
	defaultSessionTTL = 12 * time.Hour
	maxSessionTTL     = 7 * 24 * time.Hour
)

// createSession makes a session token from the caller's token.
func (s *Server) createSession(c echo.Context) error {
	var req apiclient.CreateSessionRequest
	if err := bind(c, &req, true); err != nil {
		return err
	}
	ttl := time.Duration(req.TTLSeconds) * time.Second
	switch {
	case req.TTLSeconds == 0:
		ttl = defaultSessionTTL
	case req.TTLSeconds < 0 || ttl > maxSessionTTL:
		return invalid("ttlSeconds", "a session lasts from 1 second to %d seconds (7 days), not %d", int64(maxSessionTTL/time.Second), req.TTLSeconds)
	}
	p := principalOf(c)
	if p.token.Session() {
		return &httpError{status: http.StatusForbidden, message: "a session token cannot open another session: use the token you signed in with"}
	}
	expires := time.Now().Add(ttl)
	if p.token.ExpiresAt != nil && p.token.ExpiresAt.Before(expires) {
		// A session ends with the token it was opened with.
		expires = *p.token.ExpiresAt
	}
	secret, tok, err := s.store.CreateSessionToken(c.Request().Context(), p.token, expires)
	if err != nil {
		return err
	}
	s.audit(c, "session.create", tok.ID, map[string]any{"expiresAt": tok.ExpiresAt})
	sess := apiclient.Session{Token: secret, ExpiresAt: tok.ExpiresAt.UTC(), Tenant: p.tenant.Name, Operator: p.token.TenantID == ""}
	if !sess.Operator {
		sess.Role = string(p.role)
	}
	return c.JSON(http.StatusCreated, sess)
}

// endSession revokes the calling session token.
func (s *Server) endSession(c echo.Context) error {
	p := principalOf(c)
	if !p.token.Session() {
		return &httpError{status: http.StatusConflict, message: "the token is not a session's: only a session token (POST " + Prefix + "/sessions) ends this way"}
	}
	if err := s.store.RevokeToken(c.Request().Context(), p.token.TenantID, p.token.ID); err != nil {
		return err
	}
	s.audit(c, "session.end", p.token.ID, nil)
	return c.NoContent(http.StatusNoContent)
}
