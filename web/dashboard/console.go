package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

// consolePage shows the fleet and the fleet upgrades.
func (d *Dashboard) consolePage(c echo.Context) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	data := map[string]any{"Title": "Console"}
	fleet, err := cl.ListFleet(ctx)
	switch {
	case apiclient.IsStatus(err, http.StatusServiceUnavailable):
		data["FleetError"] = err.Error()
	case err != nil:
		return err
	}
	data["Fleet"] = fleet
	upgrades, err := cl.ListUpgrades(ctx)
	if err != nil {
		return err
	}
	data["Upgrades"] = upgrades
	return d.render(c, http.StatusOK, "console", data)
}

// upgradePage shows one fleet upgrade: its state, the timeline of versions
// and probe outcomes per apiserver, the findings with their evidence, and
// the controls.
func (d *Dashboard) upgradePage(c echo.Context) error {
	u, err := d.client(c).GetUpgrade(c.Request().Context(), c.Param("name"), true)
	if err != nil {
		return err
	}
	var failed []failedProbe
	if u.Run != nil {
		for _, st := range u.Run.Steps {
			for _, p := range st.FailedProbes {
				failed = append(failed, failedProbe{Step: st, Probe: p})
			}
		}
	}
	return d.render(c, http.StatusOK, "upgrade", map[string]any{
		"Title": "Upgrade " + u.Name, "Upgrade": u, "Timeline": timeline(u, d.now()), "Failed": failed,
		"Notice": c.QueryParam("notice"),
	})
}

type failedProbe struct {
	Step  apiclient.UpgradeRecordedStep
	Probe apiclient.UpgradeProbe
}

// changeUpgrade pauses, resumes or aborts a fleet upgrade.
func (d *Dashboard) changeUpgrade(c echo.Context) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	name := c.Param("name")
	var ch apiclient.UpgradeChange
	var err error
	switch c.Param("action") {
	case "pause":
		ch, err = cl.PauseUpgrade(ctx, name)
	case "resume":
		ch, err = cl.ResumeUpgrade(ctx, name)
	case "abort":
		ch, err = cl.AbortUpgrade(ctx, name)
	default:
		return &pageError{status: http.StatusNotFound, title: "Not found", message: "An upgrade can be paused, resumed or aborted."}
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/console/upgrades/"+url.PathEscape(name)+"?notice="+url.QueryEscape(ch.Message))
}

// auditPage shows the audit log with filters, a page at a time.
func (d *Dashboard) auditPage(c echo.Context) error {
	q := apiclient.AuditQuery{
		Tenant: strings.TrimSpace(c.QueryParam("tenant")), Actor: strings.TrimSpace(c.QueryParam("actor")),
		Action: strings.TrimSpace(c.QueryParam("action")), Since: strings.TrimSpace(c.QueryParam("since")), Limit: 50,
	}
	q.Before, _ = strconv.ParseInt(c.QueryParam("before"), 10, 64)
	data := map[string]any{"Title": "Audit log", "Query": q}
	entries, err := d.client(c).ListAudit(c.Request().Context(), q)
	var ae *apiclient.Error
	if asAPIError(err, &ae) && ae.Status == http.StatusUnprocessableEntity {
		data["FilterError"] = ae.Message
		return d.render(c, ae.Status, "audit", data)
	}
	if err != nil {
		return err
	}
	data["Entries"] = entries
	if len(entries) == q.Limit {
		older := url.Values{}
		for k, v := range map[string]string{"tenant": q.Tenant, "actor": q.Actor, "action": q.Action, "since": q.Since} {
			if v != "" {
				older.Set(k, v)
			}
		}
		older.Set("before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		data["Older"] = "/console/audit?" + older.Encode()
	}
	return d.render(c, http.StatusOK, "audit", data)
}
