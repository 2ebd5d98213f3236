package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	infrav1 "bex.co/bex/apis/infrastructure/v1alpha1"
	"bex.co/bex/web/api/apiclient"
)

// consolePage shows the fleet and the fleet upgrades, with a notice of
// what the last change did.
func (d *Dashboard) consolePage(c echo.Context) error {
	return d.renderConsole(c, http.StatusOK, "")
}

// consoleCluster is a row of the console's fleet: each has a cordon or
// an uncordon form, which names it by namespace and name; a local
// cluster's has a delete form, which names it without its namespace.
type consoleCluster struct {
	apiclient.FleetCluster
	// Namespace and ShortName are the Cluster's namespace and name.
	Namespace, ShortName string
	// LocalName is the local cluster's name, empty for other clusters
	// and for one being deleted.
	LocalName string
}

// renderConsole renders the console with status; formErr, when set, is
// why a local cluster's creation or deletion was refused, shown above the
// form with what was typed.
func (d *Dashboard) renderConsole(c echo.Context, status int, formErr string) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	data := map[string]any{"Title": "Console", "Notice": c.QueryParam("notice"), "LocalFleetVersions": d.localFleetVersions, "Form": map[string]string{}}
	fleet, err := cl.ListFleet(ctx)
	switch {
	case apiclient.IsStatus(err, http.StatusServiceUnavailable):
		data["FleetError"] = err.Error()
	case err != nil:
		return err
	}
	rows := make([]consoleCluster, len(fleet))
	for i, fc := range fleet {
		rows[i].FleetCluster = fc
		rows[i].Namespace, rows[i].ShortName, _ = strings.Cut(fc.Name, "/")
		if fc.Infrastructure == infrav1.LocalClusterKind && !fc.Deleting && rows[i].Namespace == apiclient.LocalClusterNamespace {
			rows[i].LocalName = rows[i].ShortName
		}
	}
	data["Fleet"] = rows
	upgrades, err := cl.ListUpgrades(ctx)
	if err != nil {
		return err
	}
	data["Upgrades"] = upgrades
	if formErr != "" {
		data["LocalClusterError"] = formErr
		data["Form"] = map[string]string{"name": c.FormValue("name"), "version": c.FormValue("version"), "replicas": c.FormValue("replicas"), "workers": c.FormValue("workers")}
	}
	return d.render(c, status, "console", data)
}

// createLocalCluster creates a local cluster of the platform's local
// fleet; the API's refusal is shown on the form.
func (d *Dashboard) createLocalCluster(c echo.Context) error {
	req := apiclient.CreateLocalClusterRequest{Name: strings.TrimSpace(c.FormValue("name")), Version: strings.TrimSpace(c.FormValue("version"))}
	for _, f := range []struct {
		field, what, give string
		into              *int32
	}{
		{"replicas", "control-plane machines", "3, 4 or 5", &req.ControlPlaneReplicas},
		{"workers", "workers", "0 to 4", &req.WorkerReplicas},
	} {
		if v := strings.TrimSpace(c.FormValue(f.field)); v != "" {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return d.renderConsole(c, http.StatusUnprocessableEntity, fmt.Sprintf("%s: %q is not a number; give %s", f.what, v, f.give))
			}
			*f.into = int32(n)
		}
	}
	lc, err := d.client(c).CreateLocalCluster(c.Request().Context(), req)
	return d.fleetChanged(c, lc.Message, err)
}

// deleteLocalCluster deletes a local cluster once its name was typed
// again; the API's refusal (a fleet upgrade rolls it) is shown on the
// console.
func (d *Dashboard) deleteLocalCluster(c echo.Context) error {
	name := c.Param("name")
	if c.FormValue("confirm") != name {
		return d.renderConsole(c, http.StatusUnprocessableEntity, fmt.Sprintf("Type the cluster's name, %s, to delete it.", name))
	}
	del, err := d.client(c).DeleteLocalCluster(c.Request().Context(), name)
	return d.fleetChanged(c, del.Message, err)
}

// changeCordon cordons or uncordons a cluster of the fleet; the API's
// refusal (a cluster gone meanwhile) is shown on the console.
func (d *Dashboard) changeCordon(c echo.Context) error {
	ctx := c.Request().Context()
	cl := d.client(c)
	ns, name := c.Param("namespace"), c.Param("name")
	var cc apiclient.ClusterCordon
	var err error
	switch c.Param("action") {
	case "cordon":
		cc, err = cl.CordonCluster(ctx, ns, name)
	case "uncordon":
		cc, err = cl.UncordonCluster(ctx, ns, name)
	default:
		return &pageError{status: http.StatusNotFound, title: "Not found", message: "A cluster can be cordoned or uncordoned."}
	}
	return d.fleetChanged(c, cc.Notice(), err)
}

// fleetChanged ends a change of the fleet (a local cluster's creation or
// deletion, a cordon): back to the console with notice, or with the API's
// refusal of a change the operator can mend on the page (a 4xx but 401,
// the fleet not ready: 503, no local fleet: 501) above the fleet. Any
// other error goes to the error page.
func (d *Dashboard) fleetChanged(c echo.Context, notice string, err error) error {
	var ae *apiclient.Error
	if asAPIError(err, &ae) && (ae.Status/100 == 4 && ae.Status != http.StatusUnauthorized ||
		ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusNotImplemented) {
		return d.renderConsole(c, ae.Status, ae.Error())
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/console?notice="+url.QueryEscape(notice))
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
