package dashboard

import (
	"errors"
	"fmt"
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
	return d.renderTenant(c, http.StatusOK, nil)
}

// quotaFormRow is a quota of the console's form: the quota, and what was
// typed for it with why it was refused, when the form came back.
type quotaFormRow struct {
	apiclient.QuotaRow
	Error string
}

// renderTenant renders the tenant's page; refused, when set, is the quota
// form as it was sent, shown again with why it was refused.
func (d *Dashboard) renderTenant(c echo.Context, status int, refused *quotaRefusal) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	name := c.Param("tenant")
	members, err := cl.TenantMembers(ctx, name)
	if err != nil {
		return err
	}
	q, err := cl.TenantQuota(ctx, name)
	if err != nil {
		return err
	}
	rows := make([]quotaFormRow, 0, len(apiclient.QuotaKeys()))
	for _, r := range q.Rows() {
		row := quotaFormRow{QuotaRow: r}
		if refused != nil {
			row.Input, row.Error = refused.typed[r.Key], refused.errs[r.Key]
		}
		rows = append(rows, row)
	}
	data := map[string]any{"Title": "Tenant " + name, "Tenant": name, "Members": members, "Quotas": rows, "Notice": c.QueryParam("notice")}
	if refused != nil {
		data["QuotaError"] = refused.message
	}
	return d.render(c, status, "tenant", data)
}

// maxQuotaInput is the longest value the quota form reads for one quota.
const maxQuotaInput = 32

// quotaRefusal is a quota form sent back: what was typed, by quota, and
// why it was refused.
type quotaRefusal struct {
	typed, errs map[string]string
	message     string
}

// setTenantQuota sets the tenant's quotas from the console's form: each
// field holds the quota's override as typed (32Gi, 2500m), empty or
// "default" for the platform's default. The form is read whole before the
// API is asked: any value that cannot be read comes back on the form with
// what to type, and nothing is changed. The API's admin quota call sets
// and audits them.
func (d *Dashboard) setTenantQuota(c echo.Context) error {
	name := c.Param("tenant")
	var o apiclient.QuotaOverrides
	refused := &quotaRefusal{typed: map[string]string{}, errs: map[string]string{}}
	var bad []string
	for _, key := range apiclient.QuotaKeys() {
		v := strings.TrimSpace(c.FormValue(key))
		if len(v) > maxQuotaInput {
			refused.typed[key] = v[:maxQuotaInput]
			refused.errs[key] = fmt.Sprintf("more than %d characters: give a number, with its unit for a size", maxQuotaInput)
			bad = append(bad, key)
			continue
		}
		refused.typed[key] = v
		if err := o.SetQuota(key, v); err != nil {
			var qe *apiclient.QuotaInputError
			if !errors.As(err, &qe) {
				return err
			}
			refused.errs[key] = qe.Message
			bad = append(bad, key)
		}
	}
	if len(bad) > 0 {
		refused.message = fmt.Sprintf("Nothing was changed: fix %s below.", strings.Join(bad, ", "))
		return d.renderTenant(c, http.StatusUnprocessableEntity, refused)
	}
	_, err := d.client(c).SetTenantQuota(c.Request().Context(), name, o)
	if ae, ok := formRefusal(err); ok && ae.Status != http.StatusNotFound {
		refused.message = "Nothing was changed: " + ae.Error()
		if ae.Field != "" {
			refused.errs[ae.Field] = ae.Message
		}
		return d.renderTenant(c, ae.Status, refused)
	}
	if err != nil {
		return err
	}
	return withNotice(c, "/console/tenants/"+url.PathEscape(name), "Set the quotas of tenant "+name+".")
}
