package edge

import (
	"context"
	"fmt"
	"html/template"
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

// MaintenancePage answers r with 503 and Retry-After, saying that app is
// in maintenance mode: an HTML page when the client accepts HTML (a
// browser), plain text otherwise (curl, an API client).
func MaintenancePage(w http.ResponseWriter, r *http.Request, app string) {
	h := w.Header()
	h.Set("Retry-After", MaintenanceRetryAfter)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if !acceptsHTML(r.Header.Values("Accept")) {
		plain(w, http.StatusServiceUnavailable, fmt.Sprintf("503 %s is down for maintenance: the app is in maintenance mode and will be back shortly\n", app))
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusServiceUnavailable)
	if r.Method != http.MethodHead {
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

// WatchMaintenance keeps the apps table knows in maintenance mode equal to
// the Apps in c whose spec.suspended is true (an App's tenant is its
// namespace). It returns once the first full set is in the table; updates
// follow until ctx is done. c must be started by the caller.
func WatchMaintenance(ctx context.Context, c cache.Cache, table *Table, log logr.Logger) error {
	return watchKeyed(ctx, c, &platformv1alpha1.App{}, "Apps", func(o client.Object) (AppRef, bool) {
		a, ok := o.(*platformv1alpha1.App)
		if !ok || !inMaintenance(a) {
			return AppRef{}, false
		}
		return AppRef{Tenant: a.Namespace, App: a.Name}, true
	}, table.SetMaintenance, log)
}

// MaintenanceApps returns the apps among apps in maintenance mode: those
// whose spec.suspended is true and that are not being deleted.
func MaintenanceApps(apps []platformv1alpha1.App) []AppRef {
	var out []AppRef
	for i := range apps {
		if a := &apps[i]; inMaintenance(a) {
			out = append(out, AppRef{Tenant: a.Namespace, App: a.Name})
		}
	}
	return out
}

// inMaintenance reports whether a is in maintenance mode and not being
// deleted.
func inMaintenance(a *platformv1alpha1.App) bool {
	return a.Spec.Suspended && a.DeletionTimestamp == nil
}
