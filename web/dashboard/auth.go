package dashboard

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

// home sends a signed-in user to their first page, anyone else to sign in.
func (d *Dashboard) home(c echo.Context) error {
	sess := sessionOf(c)
	switch {
	case sess.Token == "":
		return c.Redirect(http.StatusSeeOther, "/signin")
	case sess.Operator:
		return c.Redirect(http.StatusSeeOther, "/console")
	default:
		return c.Redirect(http.StatusSeeOther, "/apps")
	}
}

func (d *Dashboard) signInPage(c echo.Context) error {
	return d.render(c, http.StatusOK, "signin", map[string]any{"Title": "Sign in", "Next": safeNext(c.QueryParam("next"))})
}

// signIn checks the token with the API and opens a session for it.
func (d *Dashboard) signIn(c echo.Context) error {
	token := strings.TrimSpace(c.FormValue("token"))
	next := safeNext(c.FormValue("next"))
	fail := func(msg string) error {
		return d.render(c, http.StatusUnauthorized, "signin", map[string]any{"Title": "Sign in", "Next": next, "Error": msg})
	}
	if token == "" {
		return fail("Paste an API token: `bex login` prints where to find yours, and make run writes one to .bex/env as BEX_TOKEN.")
	}
	cl, err := apiclient.New(d.api, token, d.httpClient)
	if err != nil {
		return err
	}
	who, err := cl.WhoAmI(c.Request().Context())
	if apiclient.IsStatus(err, http.StatusUnauthorized) {
		return fail("That token was refused: it is unknown or revoked.")
	}
	if err != nil {
		return err
	}
	expires := d.now().Add(d.ttl)
	value, err := d.sealer.seal(session{Token: token, Tenant: who.Tenant, Operator: who.Operator, CSRF: newCSRF(), Expires: expires.Unix()})
	if err != nil {
		return err
	}
	c.SetCookie(d.cookie(value, expires))
	if next == "" {
		next = "/apps"
		if who.Operator {
			next = "/console"
		}
	}
	return c.Redirect(http.StatusSeeOther, next)
}

func (d *Dashboard) signOut(c echo.Context) error {
	c.SetCookie(d.cookie("", time.Time{}))
	return c.Redirect(http.StatusSeeOther, "/signin")
}

// safeNext keeps a redirect target only when it is a path of this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.HasPrefix(next, "/signin") {
		return ""
	}
	return next
}
