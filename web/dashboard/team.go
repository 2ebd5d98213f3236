package dashboard

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

// joinCookie carries the join form's CSRF secret: joining has no session
// yet to hold one.
const joinCookie = "bex_join"

// tokenLifetimes are the expiries the token form offers, in days; 0 is
// none.
var tokenLifetimes = []int{0, 7, 30, 90, 365}

// formRefusal returns the API's answer to a form when it is a refusal the
// form should show: a 4xx about what was typed. A 401 (which ends the
// session) and a 403 (a role or quota, which the form cannot fix) make the
// error page instead.
func formRefusal(err error) (*apiclient.Error, bool) {
	var ae *apiclient.Error
	if asAPIError(err, &ae) && ae.Status/100 == 4 && ae.Status != http.StatusUnauthorized && ae.Status != http.StatusForbidden {
		return ae, true
	}
	return nil, false
}

// withNotice redirects to path with a notice for the page to show.
func withNotice(c echo.Context, path, notice string) error {
	return c.Redirect(http.StatusSeeOther, path+"?notice="+url.QueryEscape(notice))
}

// teamPage shows the tenant's members; to an admin, the pending
// invitations and the forms that change them; to every member, the
// tenant's quotas and what it uses of each, as bex quota prints them.
func (d *Dashboard) teamPage(c echo.Context) error {
	return d.renderTeam(c, http.StatusOK, nil)
}

// renderTeam renders the team page with extra data: the invitation just
// made (its code, shown once) or the refusal of the invite form.
func (d *Dashboard) renderTeam(c echo.Context, status int, extra map[string]any) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	members, err := cl.ListMembers(ctx)
	if err != nil {
		return err
	}
	q, err := cl.Quota(ctx)
	if err != nil {
		return err
	}
	data := map[string]any{"Title": "Team", "Members": members, "Notice": c.QueryParam("notice"), "Roles": tenantRoles, "Quotas": q.Rows()}
	if can(d.who(c).Role, "admin") {
		if data["Invitations"], err = cl.ListInvitations(ctx); err != nil {
			return err
		}
	}
	maps.Copy(data, extra)
	return d.render(c, status, "team", data)
}

// invite invites the email the form names with its role and shows the
// code and the link to send, once: they are not put in a URL.
func (d *Dashboard) invite(c echo.Context) error {
	email, role := strings.TrimSpace(c.FormValue("email")), c.FormValue("role")
	inv, err := d.client(c).Invite(c.Request().Context(), apiclient.InviteRequest{Email: email, Role: role})
	if ae, ok := formRefusal(err); ok {
		return d.renderTeam(c, ae.Status, map[string]any{"FormError": ae.Message, "Email": email, "Role": role})
	}
	if err != nil {
		return err
	}
	link := c.Scheme() + "://" + c.Request().Host + "/join?code=" + url.QueryEscape(inv.Code)
	return d.renderTeam(c, http.StatusOK, map[string]any{"Invited": inv, "JoinLink": link})
}

// emailParam is the {email} of a member's form action, unescaped.
func emailParam(c echo.Context) string {
	if e, err := url.PathUnescape(c.Param("email")); err == nil {
		return e
	}
	return c.Param("email")
}

func (d *Dashboard) setMemberRole(c echo.Context) error {
	m, err := d.client(c).SetMemberRole(c.Request().Context(), emailParam(c), c.FormValue("role"))
	if err != nil {
		return err
	}
	return withNotice(c, "/team", fmt.Sprintf("%s is now %s.", m.Email, m.Role))
}

func (d *Dashboard) removeMember(c echo.Context) error {
	email := emailParam(c)
	if err := d.client(c).RemoveMember(c.Request().Context(), email); err != nil {
		return err
	}
	return withNotice(c, "/team", fmt.Sprintf("Removed %s: their tokens, sessions and SSH keys no longer work.", email))
}

func (d *Dashboard) revokeInvitation(c echo.Context) error {
	if err := d.client(c).RevokeInvitation(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return withNotice(c, "/team", "Invitation revoked: its code no longer works.")
}

// tokensPage lists the tokens the session may see, with a form to make
// one and a Revoke button on each it may revoke.
func (d *Dashboard) tokensPage(c echo.Context) error {
	return d.renderTokens(c, http.StatusOK, nil)
}

func (d *Dashboard) renderTokens(c echo.Context, status int, extra map[string]any) error {
	tokens, err := d.client(c).ListTokens(c.Request().Context())
	if err != nil {
		return err
	}
	data := map[string]any{"Title": "Tokens", "Tokens": tokens, "Notice": c.QueryParam("notice"), "Lifetimes": tokenLifetimes}
	maps.Copy(data, extra)
	return d.render(c, status, "tokens", data)
}

// createToken makes a token of the session's member and shows its secret
// once.
func (d *Dashboard) createToken(c echo.Context) error {
	req := apiclient.CreateTokenRequest{Name: strings.TrimSpace(c.FormValue("name")), Scope: c.FormValue("scope")}
	if days, err := strconv.Atoi(c.FormValue("expires")); err == nil && days > 0 {
		req.ExpiresAt = new(time.Now().Add(time.Duration(days) * 24 * time.Hour).UTC().Truncate(time.Second))
	}
	t, err := d.client(c).CreateToken(c.Request().Context(), req)
	if ae, ok := formRefusal(err); ok {
		return d.renderTokens(c, ae.Status, map[string]any{"FormError": ae.Message, "Name": req.Name})
	}
	if err != nil {
		return err
	}
	return d.renderTokens(c, http.StatusOK, map[string]any{"Created": t})
}

// revokeToken revokes a token; revoking the one the session was opened
// with ends the session too, which the next page says.
func (d *Dashboard) revokeToken(c echo.Context) error {
	if err := d.client(c).RevokeToken(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return withNotice(c, "/tokens", "Token revoked: it is refused from now on, by the API and by git.")
}

// joinPage shows the form that accepts an invitation, its code filled in
// from the link.
func (d *Dashboard) joinPage(c echo.Context) error {
	code := c.QueryParam("code")
	if len(code) > 200 {
		code = ""
	}
	return d.render(c, http.StatusOK, "join", map[string]any{"Title": "Join", "Code": code, "CSRF": anonymousForm(c, joinCookie, "/join")})
}

// join accepts the invitation, signs the new member in and shows their
// first API token, once.
func (d *Dashboard) join(c echo.Context) error {
	csrf, ok := anonymousFormOK(c, joinCookie)
	if !ok {
		return &pageError{status: http.StatusForbidden, title: "Refused", message: "The form was not sent from this site's join page, or it is more than an hour old: open the invitation's link again."}
	}
	code := strings.TrimSpace(c.FormValue("code"))
	anyone, err := apiclient.New(d.api, "", d.httpClient)
	if err != nil {
		return err
	}
	a, err := anyone.AcceptInvitation(c.Request().Context(), apiclient.AcceptInvitationRequest{Code: code})
	if ae, ok := formRefusal(err); ok {
		return d.render(c, ae.Status, "join", map[string]any{"Title": "Join", "Code": code, "CSRF": csrf, "Error": ae.Message})
	}
	if err != nil {
		return err
	}
	dropAnonymousForm(c, joinCookie, "/join")
	if _, err := d.openSession(c, a.Token); err != nil {
		return err
	}
	return d.render(c, http.StatusOK, "join", map[string]any{"Title": "Welcome", "Joined": a})
}
