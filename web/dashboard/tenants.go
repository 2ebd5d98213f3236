package dashboard

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

// tenantsPage lists the platform's tenants for the operator, each a link
// to its view.
func (d *Dashboard) tenantsPage(c echo.Context) error {
	tenants, err := d.client(c).ListTenants(c.Request().Context())
	if err != nil {
		return err
	}
	return d.render(c, http.StatusOK, "tenants", map[string]any{"Title": "Tenants", "Tenants": tenants})
}

// tenantPage shows one tenant to the operator: its members, their roles
// and when they joined, as the API answers them (never a token), and its
// quotas with the form that sets them. A tenant that does not exist is the
// API's 404.
func (d *Dashboard) tenantPage(c echo.Context) error {
	return d.renderTenant(c, http.StatusOK, nil, nil)
}

// quotaFormRow is a quota of the console's form: the quota, and what was
// typed for it with why it was refused, when the form came back. Shown is
// the value the form showed for it, sent back with the form so that a
// save sends only the quotas the operator changed.
type quotaFormRow struct {
	apiclient.QuotaRow
	Shown string
	Error string
}

// renderTenant renders the tenant's page; refused, when set, is the quota
// form as it was sent, shown again with why it was refused; extra is what
// a member form adds (its refusal, or the invitation just made).
func (d *Dashboard) renderTenant(c echo.Context, status int, refused *quotaRefusal, extra map[string]any) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	name := c.Param("tenant")
	members, err := cl.TenantMembers(ctx, name)
	if err != nil {
		return err
	}
	invitations, err := cl.TenantInvitations(ctx, name)
	if err != nil {
		return err
	}
	q, err := cl.TenantQuota(ctx, name)
	if err != nil {
		return err
	}
	rows := make([]quotaFormRow, 0, len(apiclient.QuotaKeys()))
	for _, r := range q.Rows() {
		row := quotaFormRow{QuotaRow: r, Shown: r.Input}
		if typed, ok := refused.changed(r.Key); ok {
			// What the operator changed stays as typed, against what the
			// form showed; the other quotas show what they have now.
			row.Input, row.Error = typed, refused.errs[r.Key]
			if shown, ok := refused.shown[r.Key]; ok {
				row.Shown = shown
			}
		} else if refused != nil {
			// A quota changed meanwhile shows its value now, and why.
			row.Error = refused.errs[r.Key]
		}
		rows = append(rows, row)
	}
	data := map[string]any{"Title": "Tenant " + name, "Tenant": name, "Members": members, "Invitations": invitations, "Roles": tenantRoles,
		"Quotas": rows, "Notice": c.QueryParam("notice"), "MemberErrors": map[string]string{}, "InviteErrors": map[string]string{}}
	if refused != nil {
		data["QuotaError"] = refused.message
	}
	maps.Copy(data, extra)
	return d.render(c, status, "tenant", data)
}

// maxQuotaInput is the longest value the quota form reads for one quota.
const maxQuotaInput = 32

// quotaRefusal is a quota form sent back: what was typed for each quota
// the operator changed (or that could not be read), what the form had
// shown for it when it said, and why it was refused.
type quotaRefusal struct {
	typed, shown, errs map[string]string
	message            string
}

// changed returns what was typed for the quota key when the form came
// back with it changed.
func (r *quotaRefusal) changed(key string) (string, bool) {
	if r == nil {
		return "", false
	}
	v, ok := r.typed[key]
	return v, ok
}

// keep records what was typed for the quota key and, when the form said,
// what it had shown.
func (r *quotaRefusal) keep(key, typed, shown string, hasShown bool) {
	r.typed[key] = typed
	if hasShown {
		r.shown[key] = shown
	}
}

// changedMeanwhile makes r the form refused because the quotas of
// conflicts were changed since it was shown: those show their value now,
// with what it was and what was typed; every other quota the operator
// changed keeps what was typed, now against the value it has (which is
// the one shown, as only the conflicts changed). A second save then sends
// what the form shows as the operator left it.
func (r *quotaRefusal) changedMeanwhile(conflicts []apiclient.QuotaConflict) {
	names := make([]string, len(conflicts))
	for i, cf := range conflicts {
		names[i] = cf.Quota
		now, was := apiclient.QuotaInput(cf.Quota, cf.Current), apiclient.QuotaInput(cf.Quota, cf.Expected)
		r.errs[cf.Quota] = fmt.Sprintf("changed meanwhile: it is now %s, not the %s this form showed; your %s was not saved: type it again and save to replace %s",
			now, was, cmp.Or(r.typed[cf.Quota], "default"), now)
		delete(r.typed, cf.Quota)
	}
	clear(r.shown)
	r.message = fmt.Sprintf("Nothing was saved: %s changed meanwhile. The form now shows the quotas as they are; the other values you typed are kept: check them and save again.",
		strings.Join(names, ", "))
}

// shownPrefix names the hidden field of the quota form that holds, for
// each quota, the value its field showed ("shown.memory").
const shownPrefix = "shown."

// setTenantQuota changes the tenant's quotas the operator changed on the
// console's form: each field holds the quota's override as typed (32Gi,
// 2500m), empty or "default" for the platform's default, and its hidden
// shown.KEY the value the form showed. Only the quotas whose value differs
// from the one shown are sent, with the API's admin quota patch, as bex
// admin quota set sends them: a quota another operator changed meanwhile,
// and this one did not touch, keeps its new value. Each is sent with the
// value shown as the one expected: when another operator changed it too
// meanwhile, the API saves nothing (409) and the form comes back with the
// quotas as they are now, the ones changed meanwhile showing their new
// value and why, the others keeping what was typed. A form whose shown
// value is missing for a quota sends that quota as typed, expecting
// nothing. The form is read whole before the API is asked: any value that
// cannot be read comes back on the form with what to type, and nothing is
// changed; a form that changes nothing says so and writes nothing. The API
// checks, sets and audits the changes.
func (d *Dashboard) setTenantQuota(c echo.Context) error {
	name := c.Param("tenant")
	form, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "reading the quota form: "+err.Error())
	}
	p := apiclient.QuotaPatch{}
	refused := &quotaRefusal{typed: map[string]string{}, shown: map[string]string{}, errs: map[string]string{}}
	var bad []string
	for _, key := range apiclient.QuotaKeys() {
		v := strings.TrimSpace(form.Get(key))
		shown, hasShown := strings.TrimSpace(form.Get(shownPrefix+key)), form.Has(shownPrefix+key)
		if len(shown) > maxQuotaInput {
			shown, hasShown = "", false
		}
		if len(v) > maxQuotaInput {
			refused.keep(key, v[:maxQuotaInput], shown, hasShown)
			refused.errs[key] = fmt.Sprintf("more than %d characters: give a number, with its unit for a size", maxQuotaInput)
			bad = append(bad, key)
			continue
		}
		if err := p.Set(key, v); err != nil {
			var qe *apiclient.QuotaInputError
			if !errors.As(err, &qe) {
				return err
			}
			refused.keep(key, v, shown, hasShown)
			refused.errs[key] = qe.Message
			bad = append(bad, key)
			continue
		}
		was := apiclient.QuotaPatch{}
		if hasShown && was.Set(key, shown) == nil {
			if bytes.Equal(was[key], p[key]) {
				delete(p, key)
				continue
			}
			// What the form showed is what the quota must still be.
			if err := p.Expect(key, shown); err != nil {
				return err
			}
		}
		refused.keep(key, v, shown, hasShown)
	}
	if len(bad) > 0 {
		refused.message = fmt.Sprintf("Nothing was changed: fix %s below.", strings.Join(bad, ", "))
		return d.renderTenant(c, http.StatusUnprocessableEntity, refused, nil)
	}
	if len(p) == 0 {
		return withNotice(c, "/console/tenants/"+url.PathEscape(name), "Nothing was changed: the form's quotas are those it showed.")
	}
	_, err = d.client(c).PatchTenantQuota(c.Request().Context(), name, p)
	if ae, ok := formRefusal(err); ok && ae.Status == http.StatusConflict && len(ae.Conflicts) > 0 {
		refused.changedMeanwhile(ae.Conflicts)
		return d.renderTenant(c, http.StatusConflict, refused, nil)
	}
	if ae, ok := formRefusal(err); ok && ae.Status != http.StatusNotFound {
		refused.message = "Nothing was changed: " + ae.Error()
		if ae.Field != "" {
			refused.errs[ae.Field] = ae.Message
		}
		return d.renderTenant(c, ae.Status, refused, nil)
	}
	if err != nil {
		return err
	}
	return withNotice(c, "/console/tenants/"+url.PathEscape(name), "Set the quotas of tenant "+name+".")
}

// inviteToTenant invites the email the console's form names into the
// tenant with its role, as the tenant's admins do on the Team page, and
// shows the code and the link to send, once. A refusal comes back on the
// form, under the field at fault, and invites no one.
func (d *Dashboard) inviteToTenant(c echo.Context) error {
	name := c.Param("tenant")
	email, role := strings.TrimSpace(c.FormValue("email")), c.FormValue("role")
	inv, err := d.client(c).InviteToTenant(c.Request().Context(), name, apiclient.InviteRequest{Email: email, Role: role})
	if ae, ok := formRefusal(err); ok && ae.Status != http.StatusNotFound {
		return d.renderTenant(c, ae.Status, nil, map[string]any{"InviteError": "Nobody was invited: " + ae.Message,
			"InviteErrors": map[string]string{cmp.Or(ae.Field, "email"): ae.Message}, "InviteEmail": email, "InviteRole": role})
	}
	if err != nil {
		return err
	}
	link := c.Scheme() + "://" + c.Request().Host + "/join?code=" + url.QueryEscape(inv.Code)
	return d.renderTenant(c, http.StatusOK, nil, map[string]any{"Invited": inv, "JoinLink": link})
}

// setTenantMemberRole gives a tenant's member the role of the console's
// form; a refusal (the last admin) comes back on that member's row.
func (d *Dashboard) setTenantMemberRole(c echo.Context) error {
	name, email := c.Param("tenant"), emailParam(c)
	m, err := d.client(c).SetTenantMemberRole(c.Request().Context(), name, email, c.FormValue("role"))
	if err != nil {
		return d.memberRefused(c, email, "Role not changed: ", err)
	}
	return withNotice(c, "/console/tenants/"+url.PathEscape(name), fmt.Sprintf("%s is now %s.", m.Email, m.Role))
}

// removeTenantMember removes a tenant's member; a refusal (the last admin)
// comes back on that member's row.
func (d *Dashboard) removeTenantMember(c echo.Context) error {
	name, email := c.Param("tenant"), emailParam(c)
	err := d.client(c).RemoveTenantMember(c.Request().Context(), name, email)
	if err != nil {
		return d.memberRefused(c, email, "Not removed: ", err)
	}
	return withNotice(c, "/console/tenants/"+url.PathEscape(name), fmt.Sprintf("Removed %s: their tokens, sessions and SSH keys no longer work.", email))
}

// revokeTenantInvitation revokes a tenant's pending invitation; one
// already gone (accepted, revoked or expired meanwhile) is the API's 404,
// which the error page says.
func (d *Dashboard) revokeTenantInvitation(c echo.Context) error {
	name := c.Param("tenant")
	if err := d.client(c).RevokeTenantInvitation(c.Request().Context(), name, c.Param("id")); err != nil {
		return err
	}
	return withNotice(c, "/console/tenants/"+url.PathEscape(name), "Invitation revoked: its code no longer works.")
}

// memberRefused renders the tenant's page with the API's refusal of a
// change of the member, above the members and on their row, when err is
// one a form shows; any other error, an unknown tenant's 404 among them,
// is returned for the error page.
func (d *Dashboard) memberRefused(c echo.Context, email, prefix string, err error) error {
	ae, ok := formRefusal(err)
	if !ok || ae.Message == fmt.Sprintf("tenant %q not found", c.Param("tenant")) {
		return err
	}
	return d.renderTenant(c, ae.Status, nil, map[string]any{"MemberError": prefix + ae.Message, "MemberErrors": map[string]string{email: ae.Message}})
}
