package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

const (
	// invitationTTL is how long an invitation's code is good.
	invitationTTL = 7 * 24 * time.Hour
	// firstMemberTokenName names the token accepting an invitation makes,
	// unless the request names it.
	firstMemberTokenName = "first token"
	// maxCodeLen bounds an invitation code as it is read; real ones are 59
	// characters.
	maxCodeLen = 200
)

func memberView(u store.User, p principal) apiclient.Member {
	return apiclient.Member{Email: u.Email, Role: string(u.Role), CreatedAt: u.CreatedAt.UTC(), You: u.ID == p.token.UserID}
}

func invitationView(inv store.Invitation) apiclient.Invitation {
	return apiclient.Invitation{
		ID: inv.ID, Email: inv.Email, Role: string(inv.Role), Prefix: inv.Prefix, InvitedBy: inv.InvitedBy,
		CreatedAt: inv.CreatedAt.UTC(), ExpiresAt: inv.ExpiresAt.UTC(),
	}
}

// emailParam is the {email} of a member's path, unescaped.
func emailParam(c echo.Context) string {
	raw := c.Param("email")
	if e, err := url.PathUnescape(raw); err == nil {
		return e
	}
	return raw
}

func (s *Server) listMembers(c echo.Context) error {
	p := principalOf(c)
	users, err := s.store.ListMembers(c.Request().Context(), p.tenant.ID)
	if err != nil {
		return err
	}
	views := make([]apiclient.Member, 0, len(users))
	for _, u := range users {
		views = append(views, memberView(u, p))
	}
	return c.JSON(http.StatusOK, views)
}

// adminListMembers answers a tenant's members, their roles and when they
// joined, for the operator's console: never a token.
func (s *Server) adminListMembers(c echo.Context) error {
	t, err := s.adminTenant(c)
	if err != nil {
		return err
	}
	users, err := s.store.ListMembers(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	p := principalOf(c)
	views := make([]apiclient.Member, 0, len(users))
	for _, u := range users {
		views = append(views, memberView(u, p))
	}
	return c.JSON(http.StatusOK, views)
}

// parseRole reads a tenant role from the field of the request.
func parseRole(field, role string) (store.Role, error) {
	r, err := store.ParseTenantRole(strings.TrimSpace(role))
	if err != nil {
		return "", invalid(field, "role %q: want viewer (reads), developer (pushes, deploys, changes env, scales...) or admin (also members and tokens)", role)
	}
	return r, nil
}

// invite makes an invitation and answers its code, once.
func (s *Server) invite(c echo.Context) error {
	return s.inviteTo(c, principalOf(c).tenant, "member.invite")
}

// adminInvite is invite into the tenant the path names, by an operator:
// how a tenant whose admins are gone gets one again.
func (s *Server) adminInvite(c echo.Context) error {
	t, err := s.adminTenant(c)
	if err != nil {
		return err
	}
	return s.inviteTo(c, t, "tenant.member.invite")
}

// inviteTo makes an invitation into t, audits it as action and answers its
// code, once.
func (s *Server) inviteTo(c echo.Context, t store.Tenant, action string) error {
	var req apiclient.InviteRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	role, err := parseRole("role", req.Role)
	if err != nil {
		return err
	}
	code, inv, err := s.store.CreateInvitation(c.Request().Context(), store.NewInvitation{
		TenantID: t.ID, Email: req.Email, Role: role, InvitedBy: principalOf(c).actor(), ExpiresAt: time.Now().Add(invitationTTL),
	})
	switch {
	case errors.Is(err, store.ErrInvalid):
		return invalid("email", "email %q: want an address such as ann@example.com", req.Email)
	case errors.Is(err, store.ErrConflict):
		return &httpError{status: http.StatusConflict, field: "email", message: fmt.Sprintf("%s is a member of %s already: change their role instead", strings.TrimSpace(req.Email), t.Name)}
	case err != nil:
		return err
	}
	s.auditIn(c, t.ID, action, inv.Email, map[string]any{"role": inv.Role, "invitationID": inv.ID, "expiresAt": inv.ExpiresAt.UTC()})
	v := invitationView(inv)
	v.Code = code
	return c.JSON(http.StatusCreated, v)
}

func (s *Server) listInvitations(c echo.Context) error {
	return s.invitationsOf(c, principalOf(c).tenant)
}

// adminListInvitations answers the pending invitations of the tenant the
// path names, without their codes.
func (s *Server) adminListInvitations(c echo.Context) error {
	t, err := s.adminTenant(c)
	if err != nil {
		return err
	}
	return s.invitationsOf(c, t)
}

func (s *Server) invitationsOf(c echo.Context, t store.Tenant) error {
	invs, err := s.store.ListInvitations(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	views := make([]apiclient.Invitation, 0, len(invs))
	for _, inv := range invs {
		views = append(views, invitationView(inv))
	}
	return c.JSON(http.StatusOK, views)
}

func (s *Server) revokeInvitation(c echo.Context) error {
	return s.revokeIn(c, principalOf(c).tenant, "invitation.revoke", "bex members list")
}

// adminRevokeInvitation revokes a pending invitation of the tenant the
// path names, as its admins do.
func (s *Server) adminRevokeInvitation(c echo.Context) error {
	t, err := s.adminTenant(c)
	if err != nil {
		return err
	}
	return s.revokeIn(c, t, "tenant.invitation.revoke", "bex admin members list --tenant "+t.Name)
}

// revokeIn revokes t's pending invitation the path names and audits it
// as action in t's log; list is the command that lists them.
func (s *Server) revokeIn(c echo.Context, t store.Tenant, action, list string) error {
	id := c.Param("id")
	inv, err := s.store.RevokeInvitation(c.Request().Context(), t.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("no pending invitation %q: %s shows them", id, list)
	}
	if err != nil {
		return err
	}
	s.auditIn(c, t.ID, action, inv.Email, map[string]any{"invitationID": inv.ID, "role": inv.Role})
	return c.NoContent(http.StatusNoContent)
}

// acceptInvitation makes the member an invitation's code names, with
// their first token, and answers its secret once. It needs no token: the
// code is the credential.
func (s *Server) acceptInvitation(c echo.Context) error {
	var req apiclient.AcceptInvitationRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	code := strings.TrimSpace(req.Code)
	switch {
	case code == "":
		return invalid("code", "give the invitation's code (bexinv_...), as the admin who invited you got it")
	case len(code) > maxCodeLen:
		return invalid("code", "an invitation code is %d characters or fewer", maxCodeLen)
	}
	name := strings.TrimSpace(req.TokenName)
	if name == "" {
		name = firstMemberTokenName
	}
	if err := checkTokenName(name); err != nil {
		return invalid("tokenName", "%s", err.Error())
	}
	ctx := c.Request().Context()
	a, err := s.store.AcceptInvitation(ctx, code, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("this invitation code is unknown, used, revoked or expired: ask an admin of the tenant for a new invitation")
	case errors.Is(err, store.ErrConflict):
		return &httpError{status: http.StatusConflict, field: "code",
			message: "a user with this invitation's email exists already, and an email belongs to one tenant: ask for an invitation of another address"}
	case err != nil:
		return err
	}
	t, err := s.store.GetTenant(ctx, a.User.TenantID)
	if err != nil {
		return err
	}
	c.Set(principalKey, principal{token: a.Token, tenant: t, email: a.User.Email, role: a.User.Role})
	s.audit(c, "member.join", a.User.Email, map[string]any{"role": a.User.Role, "invitationID": a.Invitation.ID, "invitedBy": a.Invitation.InvitedBy})
	return c.JSON(http.StatusCreated, apiclient.AcceptedInvitation{
		Tenant: t.Name, Email: a.User.Email, Role: string(a.User.Role), Token: a.Secret, TokenName: a.Token.Name,
	})
}

// memberError maps the store's refusals of a change of a member; list is
// the command that lists the members.
func memberError(email, list string, err error) error {
	switch {
	case errors.Is(err, store.ErrLastAdmin):
		return &httpError{status: http.StatusConflict, message: err.Error()}
	case errors.Is(err, store.ErrNotFound):
		return notFound("no member %q: %s shows them", email, list)
	}
	return err
}

func (s *Server) setMemberRole(c echo.Context) error {
	return s.setRoleIn(c, principalOf(c).tenant, "member.role", "bex members list")
}

// adminSetMemberRole is setMemberRole in the tenant the path names, by an
// operator; the tenant's last admin stays admin as well.
func (s *Server) adminSetMemberRole(c echo.Context) error {
	t, err := s.adminTenant(c)
	if err != nil {
		return err
	}
	return s.setRoleIn(c, t, "tenant.member.role", "bex admin members list --tenant "+t.Name)
}

// setRoleIn gives t's member the path names the role of the request and
// audits it as action.
func (s *Server) setRoleIn(c echo.Context, t store.Tenant, action, list string) error {
	var req apiclient.SetRoleRequest
	if err := bind(c, &req, false); err != nil {
		return err
	}
	role, err := parseRole("role", req.Role)
	if err != nil {
		return err
	}
	email := emailParam(c)
	u, err := s.store.SetMemberRole(c.Request().Context(), t.ID, email, role)
	if err != nil {
		return memberError(email, list, err)
	}
	s.auditIn(c, t.ID, action, u.Email, map[string]any{"role": u.Role})
	return c.JSON(http.StatusOK, memberView(u, principalOf(c)))
}

func (s *Server) removeMember(c echo.Context) error {
	return s.removeFrom(c, principalOf(c).tenant, "member.remove", "bex members list")
}

// adminRemoveMember is removeMember from the tenant the path names, by an
// operator; the tenant's last admin cannot be removed either.
func (s *Server) adminRemoveMember(c echo.Context) error {
	t, err := s.adminTenant(c)
	if err != nil {
		return err
	}
	return s.removeFrom(c, t, "tenant.member.remove", "bex admin members list --tenant "+t.Name)
}

// removeFrom removes t's member the path names and audits it as action.
func (s *Server) removeFrom(c echo.Context, t store.Tenant, action, list string) error {
	email := emailParam(c)
	u, err := s.store.RemoveMember(c.Request().Context(), t.ID, email)
	if err != nil {
		return memberError(email, list, err)
	}
	s.auditIn(c, t.ID, action, u.Email, map[string]any{"role": u.Role})
	return c.NoContent(http.StatusNoContent)
}
