package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

const (
	// maxTokenNameLen is the longest token name.
	maxTokenNameLen = 64
	// maxTokenLife is how far ahead a token's expiry may be.
	maxTokenLife = 366 * 24 * time.Hour
)

// checkTokenName says what is wrong with a token's name.
func checkTokenName(name string) error {
	if name == "" || len(name) > maxTokenNameLen || strings.ContainsFunc(name, unicode.IsControl) {
		return fmt.Errorf("a token's name is 1 to %d characters, none a control character", maxTokenNameLen)
	}
	return nil
}

// tokenView shows t to p, with its owner's email from emails.
func tokenView(t store.Token, p principal, emails map[string]string, now time.Time) apiclient.Token {
	v := apiclient.Token{
		ID: t.ID, Name: t.Name, Prefix: t.Prefix, Scope: string(t.Scope), User: emails[t.UserID],
		CreatedAt: t.CreatedAt.UTC(), Expired: t.Expired(now),
		Current: t.ID == p.token.ID || t.ID == p.token.ParentID,
	}
	if t.LastUsedAt != nil {
		v.LastUsedAt = new(t.LastUsedAt.UTC())
	}
	if t.ExpiresAt != nil {
		v.ExpiresAt = new(t.ExpiresAt.UTC())
	}
	return v
}

// memberEmails maps the IDs of the tenant's members to their emails.
func (s *Server) memberEmails(c echo.Context) (map[string]string, error) {
	users, err := s.store.ListMembers(c.Request().Context(), principalOf(c).tenant.ID)
	if err != nil {
		return nil, err
	}
	emails := make(map[string]string, len(users))
	for _, u := range users {
		emails[u.ID] = u.Email
	}
	return emails, nil
}

// ownsOrAdmin reports whether p may act on a credential of userID (empty:
// the tenant's): their own, or any as an admin.
func ownsOrAdmin(p principal, userID string) bool {
	return userID == p.token.UserID || p.role.Covers(store.RoleAdmin)
}

// listTokens answers the caller's tokens, or every token of the tenant to
// an admin; sessions and revoked tokens are not listed.
func (s *Server) listTokens(c echo.Context) error {
	p := principalOf(c)
	tokens, err := s.store.ListTokens(c.Request().Context(), p.tenant.ID)
	if err != nil {
		return err
	}
	emails, err := s.memberEmails(c)
	if err != nil {
		return err
	}
	now := time.Now()
	views := make([]apiclient.Token, 0, len(tokens))
	for _, t := range tokens {
		if t.Session() || t.Revoked() || !ownsOrAdmin(p, t.UserID) {
			continue
		}
		views = append(views, tokenView(t, p, emails, now))
	}
	return c.JSON(http.StatusOK, views)
}

// createToken makes a token of the caller's member (a machine token for a
// machine token) and answers its secret once. It takes a full-scope
// token: one narrowed by its scope must not make others that outlive its
// revocation.
func (s *Server) createToken(c echo.Context) error {
	var req apiclient.CreateTokenRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	name := strings.TrimSpace(req.Name)
	if err := checkTokenName(name); err != nil {
		return invalid("name", "%s", err.Error())
	}
	scope, err := store.ParseScope(strings.TrimSpace(req.Scope))
	if err != nil {
		return invalid("scope", "scope %q: want read (reads only), write (at most a developer's) or full (your role's)", req.Scope)
	}
	now := time.Now()
	var expires time.Time
	if req.ExpiresAt != nil {
		expires = *req.ExpiresAt
		if !expires.After(now) || expires.Sub(now) > maxTokenLife {
			return invalid("expiresAt", "a token expires within a year from now (%s at the latest), not %s; leave expiresAt out for one that does not expire",
				now.Add(maxTokenLife).UTC().Format(time.RFC3339), expires.UTC().Format(time.RFC3339))
		}
	}
	p := principalOf(c)
	if p.token.Scope != store.ScopeFull {
		return &httpError{status: http.StatusForbidden,
			message: fmt.Sprintf("making tokens needs a token of scope full (or a dashboard session of one); this one's scope is %s", p.token.Scope)}
	}
	secret, tok, err := s.store.IssueToken(c.Request().Context(), store.NewToken{
		TenantID: p.tenant.ID, UserID: p.token.UserID, Name: name, Scope: scope, ExpiresAt: expires,
	})
	if err != nil {
		return err
	}
	details := map[string]any{"name": tok.Name, "scope": tok.Scope, "owner": p.actor()}
	if tok.ExpiresAt != nil {
		details["expiresAt"] = tok.ExpiresAt.UTC()
	}
	s.audit(c, "token.create", tok.ID, details)
	return c.JSON(http.StatusCreated, apiclient.CreatedToken{
		Token:  tokenView(tok, p, map[string]string{p.token.UserID: p.email}, now),
		Secret: secret,
	})
}

// revokeToken revokes one of the caller's tokens, or any of the tenant's
// for an admin; it is refused from the next request on, and so are its
// sessions.
func (s *Server) revokeToken(c echo.Context) error {
	p, id := principalOf(c), c.Param("id")
	ctx := c.Request().Context()
	tok, err := s.store.GetToken(ctx, p.tenant.ID, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (tok.Session() || tok.Revoked()) {
		return notFound("no token %q: bex tokens list shows them", id)
	}
	if err != nil {
		return err
	}
	if !ownsOrAdmin(p, tok.UserID) {
		return roleRefused(p, store.RoleAdmin, "revoking another member's token")
	}
	if err := s.store.RevokeToken(ctx, p.tenant.ID, tok.ID); err != nil {
		return err
	}
	emails, err := s.memberEmails(c)
	if err != nil {
		return err
	}
	owner := emails[tok.UserID]
	if tok.UserID == "" {
		owner = "token:" + tok.Name
	}
	s.audit(c, "token.revoke", tok.ID, map[string]any{"name": tok.Name, "owner": owner})
	return c.NoContent(http.StatusNoContent)
}
