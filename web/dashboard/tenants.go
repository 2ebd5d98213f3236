package dashboard

import (
	"net/http"

	"github.com/labstack/echo/v4"
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
// and when they joined, as the API answers them (never a token). A
// tenant that does not exist is the API's 404.
func (d *Dashboard) tenantPage(c echo.Context) error {
	name := c.Param("tenant")
	members, err := d.client(c).TenantMembers(c.Request().Context(), name)
	if err != nil {
		return err
	}
	return d.render(c, http.StatusOK, "tenant", map[string]any{"Title": "Tenant " + name, "Tenant": name, "Members": members})
}
