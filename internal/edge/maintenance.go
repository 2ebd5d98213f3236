package edge

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
)

// MaintenanceRetryAfter is the Retry-After, in seconds, of the maintenance
// page: maintenance lasts minutes, so a client need not come back sooner.
const MaintenanceRetryAfter = "120"

// maintenanceHTML is the page a browser gets from an app in maintenance
// mode. It loads nothing from elsewhere.
var maintenanceHTML = template.Must(template.New("maintenance").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.}} is down for maintenance</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem;color:#222}h1{font-size:1.6rem}</style>
</head><body>
<h1>{{.}} is down for maintenance</h1>
<p>The app is in maintenance mode and will be back shortly. Please try again in a few minutes.</p>
</body></html>
`))

// MaintenanceCSP is the Content-Security-Policy of the maintenance pages:
// a tenant's page (App spec.maintenancePage) is served by the platform's
// edge on the app's hostnames, so it runs no script, loads nothing from
// elsewhere, posts no form and cannot be framed; inline styles and data:
// images (and fonts) are all it has.
const MaintenanceCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// MaintenancePage answers r with 503 and Retry-After, saying that app is
// in maintenance mode: a client that accepts HTML (a browser) gets page,
// the app's own maintenance page, as it is, or the edge's page when page
// is empty, both under MaintenanceCSP; other clients (curl, an API client)
// get a line of plain text.
func MaintenancePage(w http.ResponseWriter, r *http.Request, app, page string) {
	h := w.Header()
	h.Set("Retry-After", MaintenanceRetryAfter)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if !acceptsHTML(r.Header.Values("Accept")) {
		plain(w, http.StatusServiceUnavailable, fmt.Sprintf("503 %s is down for maintenance: the app is in maintenance mode and will be back shortly\n", app))
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", MaintenanceCSP)
	w.WriteHeader(http.StatusServiceUnavailable)
	switch {
	case r.Method == http.MethodHead:
	case page != "":
		_, _ = io.WriteString(w, page)
	default:
		_ = maintenanceHTML.Execute(w, app)
	}
}

// acceptsHTML reports whether an Accept header names text/html (or
// application/xhtml+xml) with a quality above zero.
func acceptsHTML(accept []string) bool {
	for _, v := range accept {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || (mt != "text/html" && mt != "application/xhtml+xml") {
				continue
			}
			if q, err := strconv.ParseFloat(params["q"], 64); err == nil && q <= 0 {
				continue
			}
			return true
		}
	}
	return false
}

// AppRef names a tenant's app.
type AppRef struct {
	Tenant, App string
}

// MaintenanceApp is an app in maintenance mode, as the table holds it.
type MaintenanceApp struct {
	Tenant, App string
	// Page is the app's maintenance page (App spec.maintenancePage); empty
	// for the edge's.
	Page string
}

// WatchMaintenance keeps the apps table knows in maintenance mode, and
// their pages, equal to the Apps in c whose spec.suspended is true (an
// App's tenant is its namespace). It returns once the first full set is in
// the table; updates follow until ctx is done. c must be started by the
// caller.
func WatchMaintenance(ctx context.Context, c cache.Cache, table *Table, log logr.Logger) error {
	return watchKeyed(ctx, c, &platformv1alpha1.App{}, "Apps", func(o client.Object) (MaintenanceApp, bool) {
		a, ok := o.(*platformv1alpha1.App)
		if !ok || !inMaintenance(a) {
			return MaintenanceApp{}, false
		}
		return maintenanceApp(a), true
	}, table.SetMaintenance, log)
}

// MaintenanceApps returns the apps among apps in maintenance mode: those
// whose spec.suspended is true and that are not being deleted.
func MaintenanceApps(apps []platformv1alpha1.App) []MaintenanceApp {
	var out []MaintenanceApp
	for i := range apps {
		if a := &apps[i]; inMaintenance(a) {
			out = append(out, maintenanceApp(a))
		}
	}
	return out
}

// maintenanceApp is a as the table holds it in maintenance mode.
func maintenanceApp(a *platformv1alpha1.App) MaintenanceApp {
	return MaintenanceApp{Tenant: a.Namespace, App: a.Name, Page: a.Spec.MaintenancePage}
}

// inMaintenance reports whether a is in maintenance mode and not being
// deleted.
func inMaintenance(a *platformv1alpha1.App) bool {
	return a.Spec.Suspended && a.DeletionTimestamp == nil
}
