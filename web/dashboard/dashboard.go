package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultSessionTTL is how long a session lasts when Options does not say.
const DefaultSessionTTL = 12 * time.Hour

// Options are what New needs.
type Options struct {
	// API is the platform API's base URL (without /api/v1): every page is
	// read, and every change made, through it with the user's token.
	API string
	// HTTPClient reaches the API; nil means a client without a timeout
	// (log streams last).
	HTTPClient *http.Client
	// CookieKey seals the session cookies: 32 random bytes, the same on
	// every replica, kept secret.
	CookieKey []byte
	// SessionTTL is how long a sign-in lasts; DefaultSessionTTL when zero.
	SessionTTL time.Duration
	// Traffic gives apps' request and error rates from the edge; optional.
	Traffic TrafficSource
	// LocalFleetVersions are the Kubernetes versions a local cluster may
	// run (the pinned ones), given when the platform runs a local fleet
	// (make run): the console then offers to create local clusters. Empty:
	// it does not.
	LocalFleetVersions []string
	// Log receives the dashboard's own failures.
	Log logr.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// TrafficSource gives an app's recent request rate and error rate.
type TrafficSource interface {
	Traffic(tenant, app string) []TrafficPoint
}

// TrafficPoint is an app's traffic over one interval.
type TrafficPoint struct {
	At time.Time
	// Requests is requests per second over the interval before At.
	Requests float64
	// Errors is the share of those answered 5xx, from 0 to 1.
	Errors float64
}

// Dashboard serves the web pages.
type Dashboard struct {
	api        string
	httpClient *http.Client
	sealer     *sealer
	ttl        time.Duration
	traffic    TrafficSource
	// localFleetVersions is Options.LocalFleetVersions.
	localFleetVersions []string
	log                logr.Logger
	now                func() time.Time
	pages              map[string]*template.Template
	echo               *echo.Echo
}

// New returns the dashboard for opts.
func New(opts Options) (*Dashboard, error) {
	u, err := url.Parse(opts.API)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("creating the dashboard: API %q is not an absolute URL", opts.API)
	}
	sl, err := newSealer(opts.CookieKey)
	if err != nil {
		return nil, fmt.Errorf("creating the dashboard: %w", err)
	}
	d := &Dashboard{
		api: strings.TrimSuffix(opts.API, "/"), httpClient: opts.HTTPClient, sealer: sl,
		ttl: opts.SessionTTL, traffic: opts.Traffic, log: opts.Log, now: opts.Now,
		localFleetVersions: slices.Clone(opts.LocalFleetVersions),
	}
	if d.httpClient == nil {
		d.httpClient = &http.Client{}
	}
	if d.ttl <= 0 {
		d.ttl = DefaultSessionTTL
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.pages, err = parsePages(); err != nil {
		return nil, err
	}
	d.echo = d.newEcho()
	return d, nil
}

// Handler returns the dashboard's HTTP handler.
func (d *Dashboard) Handler() http.Handler { return d.echo }

// access says who may open a page.
type access int

const (
	anyone access = iota
	signedIn
	tenantOnly
	operatorOnly
)

func (d *Dashboard) newEcho() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = d.handleError
	e.Use(securityHeaders, sameOrigin(http.NewCrossOriginProtection()))
	static, _ := fs.Sub(staticFS, "static")
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", staticHandler(static))))
	e.GET("/", d.home, d.guard(anyone))
	e.GET("/signin", d.signInPage, d.guard(anyone))
	e.POST("/signin", d.signIn, d.guard(anyone))
	e.POST("/signout", d.signOut, d.guard(signedIn))

	e.GET("/apps", d.appsPage, d.guard(tenantOnly))
	e.POST("/apps", d.createApp, d.guard(tenantOnly))
	e.GET("/apps/:app", d.appPage, d.guard(tenantOnly))
	e.POST("/apps/:app/delete", d.deleteApp, d.guard(tenantOnly))
	e.POST("/apps/:app/rollback", d.rollback, d.guard(tenantOnly))
	e.POST("/apps/:app/restart", d.restart, d.guard(tenantOnly))
	e.POST("/apps/:app/runs", d.startRun, d.guard(tenantOnly))
	e.GET("/apps/:app/console", d.runConsole, d.guard(tenantOnly))
	e.POST("/apps/:app/runs/:run/stop", d.stopRun, d.guard(tenantOnly))
	e.POST("/apps/:app/scale", d.scale, d.guard(tenantOnly))
	e.POST("/apps/:app/settings", d.settings, d.guard(tenantOnly))
	e.POST("/apps/:app/env", d.setEnv, d.guard(tenantOnly))
	e.GET("/apps/:app/releases/:release", d.releasePage, d.guard(tenantOnly))
	e.GET("/apps/:app/builds/:build", d.buildPage, d.guard(tenantOnly))
	e.GET("/apps/:app/builds/:build/log", d.buildLogStream, d.guard(tenantOnly))
	e.GET("/apps/:app/logs", d.logsPage, d.guard(tenantOnly))
	e.GET("/apps/:app/logs/stream", d.logsStream, d.guard(tenantOnly))

	e.GET("/team", d.teamPage, d.guard(tenantOnly))
	e.POST("/team/invitations", d.invite, d.guard(tenantOnly))
	e.POST("/team/invitations/:id/revoke", d.revokeInvitation, d.guard(tenantOnly))
	e.POST("/team/members/:email/role", d.setMemberRole, d.guard(tenantOnly))
	e.POST("/team/members/:email/remove", d.removeMember, d.guard(tenantOnly))
	e.GET("/tokens", d.tokensPage, d.guard(tenantOnly))
	e.POST("/tokens", d.createToken, d.guard(tenantOnly))
	e.POST("/tokens/:id/revoke", d.revokeToken, d.guard(tenantOnly))
	e.GET("/join", d.joinPage, d.guard(anyone))
	e.POST("/join", d.join, d.guard(anyone))

	e.GET("/console", d.consolePage, d.guard(operatorOnly))
	e.GET("/console/upgrades/:name", d.upgradePage, d.guard(operatorOnly))
	e.POST("/console/upgrades/:name/:action", d.changeUpgrade, d.guard(operatorOnly))
	e.GET("/console/audit", d.auditPage, d.guard(operatorOnly))
	e.GET("/console/tenants", d.tenantsPage, d.guard(operatorOnly))
	e.GET("/console/tenants/:tenant", d.tenantPage, d.guard(operatorOnly))
	e.POST("/console/tenants/:tenant/quota", d.setTenantQuota, d.guard(operatorOnly))
	e.POST("/console/tenants/:tenant/members", d.inviteToTenant, d.guard(operatorOnly))
	e.POST("/console/tenants/:tenant/members/:email/role", d.setTenantMemberRole, d.guard(operatorOnly))
	e.POST("/console/tenants/:tenant/members/:email/remove", d.removeTenantMember, d.guard(operatorOnly))
	e.POST("/console/tenants/:tenant/invitations/:id/revoke", d.revokeTenantInvitation, d.guard(operatorOnly))
	e.POST("/console/local-clusters", d.createLocalCluster, d.guard(operatorOnly))
	e.POST("/console/local-clusters/:name/delete", d.deleteLocalCluster, d.guard(operatorOnly))
	e.POST("/console/clusters/:namespace/:name/:action", d.changeCordon, d.guard(operatorOnly))
	return e
}

// securityHeaders keeps the pages from being framed, sniffed or made to
// run scripts or styles from anywhere but here.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		return next(c)
	}
}

// staticHandler serves the embedded files with a cache lifetime.
func staticHandler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})
}

// sameOrigin refuses a POST that a browser says comes from another site
// (Sec-Fetch-Site, else an Origin that is not this host), before the
// sign-in form's or the session's CSRF secret is even looked at.
func sameOrigin(cop *http.CrossOriginProtection) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := cop.Check(c.Request()); err != nil {
				return &pageError{status: http.StatusForbidden, title: "Refused", message: "The form was sent from another site. Open the dashboard and send it from there."}
			}
			return next(c)
		}
	}
}

const sessionKey = "bex.session"

// guard loads the session and checks what the page needs: without a
// session, a page that needs one redirects to the sign-in page; a tenant's
// page refuses an operator and the console a tenant (403). Every POST must
// carry the session's CSRF secret.
func (d *Dashboard) guard(a access) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			sess, err := d.session(c)
			if err == nil {
				c.Set(sessionKey, sess)
			}
			if a == anyone {
				return next(c)
			}
			if err != nil {
				if c.Request().Method != http.MethodGet {
					return &pageError{status: http.StatusUnauthorized, title: "Signed out", message: "Your session has ended: sign in again."}
				}
				return c.Redirect(http.StatusSeeOther, "/signin?next="+url.QueryEscape(c.Request().URL.RequestURI()))
			}
			if c.Request().Method == http.MethodPost && !csrfOK(sess, c.FormValue("csrf")) {
				return &pageError{status: http.StatusForbidden, title: "Refused", message: "The form was not sent from this session's page: reload the page and try again."}
			}
			switch {
			case a == tenantOnly && sess.Operator:
				return &pageError{status: http.StatusForbidden, title: "For tenants", message: "An operator's token acts for no tenant: sign in with a tenant's token to see apps, or open the console."}
			case a == operatorOnly && !sess.Operator:
				return &pageError{status: http.StatusForbidden, title: "For operators", message: "The operator console needs an operator's token."}
			}
			return next(c)
		}
	}
}

func (d *Dashboard) session(c echo.Context) (session, error) {
	ck, err := c.Cookie(sessionCookie)
	if err != nil {
		return session{}, errNoSession
	}
	return d.sealer.open(ck.Value, d.now())
}

func sessionOf(c echo.Context) session {
	s, _ := c.Get(sessionKey).(session)
	return s
}

// client returns an API client acting with the session's token.
func (d *Dashboard) client(c echo.Context) *apiclient.Client {
	cl, err := apiclient.New(d.api, sessionOf(c).Token, d.httpClient)
	if err != nil {
		// New fails only on a malformed base URL, which New refused.
		panic(err)
	}
	return cl
}

// pageError is an error page.
type pageError struct {
	status         int
	title, message string
}

func (e *pageError) Error() string { return e.message }

// handleError renders an error page. The API's answers keep their status
// and message: a tenant opening another tenant's app gets the API's 404.
// A token the API no longer takes ends the session.
func (d *Dashboard) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		if !errors.Is(err, context.Canceled) {
			d.log.Error(err, "Page failed after it started", "path", c.Request().URL.Path)
		}
		return
	}
	pe := &pageError{}
	var ae *apiclient.Error
	var ee *echo.HTTPError
	switch {
	case errors.As(err, &pe):
	case errors.As(err, &ae):
		pe = &pageError{status: ae.Status, title: http.StatusText(ae.Status), message: ae.Message}
		if ae.Status == http.StatusUnauthorized {
			c.SetCookie(d.cookie("", time.Time{}))
			pe.title, pe.message = "Signed out", "The platform no longer takes your token ("+ae.Message+"). Sign in again."
		}
		if ae.Status == http.StatusNotFound {
			pe.title = "Not found"
		}
	case errors.As(err, &ee):
		pe = &pageError{status: ee.Code, title: http.StatusText(ee.Code), message: fmt.Sprint(ee.Message)}
		if ee.Code == http.StatusNotFound {
			pe.message = "There is no such page."
		}
	case errors.Is(err, context.Canceled):
		return
	default:
		d.log.Error(err, "Page failed", "path", c.Request().URL.Path)
		pe = &pageError{status: http.StatusInternalServerError, title: "Something broke", message: "The page could not be made: the operator's logs say more."}
	}
	if err := d.render(c, pe.status, "error", map[string]any{"Title": pe.title, "Message": pe.message}); err != nil {
		d.log.Error(err, "Rendering an error page failed")
	}
}

// page is what every template gets besides its own data.
type page struct {
	Title   string
	Session session
	// Who is whom the session acts for now, as the API says: its Role
	// decides which forms a page offers (the API decides anyway).
	Who  apiclient.WhoAmI
	Path string
	Data any
}

const whoKey = "bex.who"

// who asks the API, once per request, whom a tenant's session acts for
// now: a role changed since the sign-in shows at once. It is empty for an
// operator, without a session, or when the API does not answer (the page
// then offers no changes).
func (d *Dashboard) who(c echo.Context) apiclient.WhoAmI {
	if w, ok := c.Get(whoKey).(apiclient.WhoAmI); ok {
		return w
	}
	var w apiclient.WhoAmI
	if sess := sessionOf(c); sess.Token != "" && !sess.Operator {
		if got, err := d.client(c).WhoAmI(c.Request().Context()); err == nil {
			w = got
		}
	}
	c.Set(whoKey, w)
	return w
}

// render executes a page template into the answer.
func (d *Dashboard) render(c echo.Context, status int, name string, data map[string]any) error {
	t, ok := d.pages[name]
	if !ok {
		return fmt.Errorf("no page template %q", name)
	}
	title, _ := data["Title"].(string)
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", page{Title: title, Session: sessionOf(c), Who: d.who(c), Path: c.Request().URL.Path, Data: data}); err != nil {
		return fmt.Errorf("rendering %s: %w", name, err)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.HTMLBlob(status, buf.Bytes())
}

// WithAPI returns a handler that serves the API's routes (under
// /api/v1) with apiHandler and every other path with the dashboard, so
// that both share one origin.
func (d *Dashboard) WithAPI(apiHandler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == apiPrefix || strings.HasPrefix(r.URL.Path, apiPrefix+"/") {
			apiHandler.ServeHTTP(w, r)
			return
		}
		d.echo.ServeHTTP(w, r)
	})
}

// apiPrefix is where the API answers (web/api.Prefix).
const apiPrefix = "/api/v1"
