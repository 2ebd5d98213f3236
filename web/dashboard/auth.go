package dashboard

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"

	"bex.co/bex/web/api/apiclient"
)

const (
	// signInCookie carries the sign-in form's CSRF secret (a double-submit
	// cookie): a sign-in has no session yet to hold one.
	signInCookie = "bex_signin"
	// signInFormTTL is how long a sign-in form stays good.
	signInFormTTL = time.Hour
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

// anonymousForm puts a fresh CSRF secret for a form that has no session
// yet (sign-in, joining with an invitation) in the cookie name, sent back
// to path only (a double-submit cookie), and returns it for the form.
func anonymousForm(c echo.Context, name, path string) string {
	secret := rand.Text()
	c.SetCookie(&http.Cookie{
		Name: name, Value: secret, Path: path, MaxAge: int(signInFormTTL / time.Second),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	})
	return secret
}

// anonymousFormOK checks the form's CSRF secret against the cookie name
// and returns it.
func anonymousFormOK(c echo.Context, name string) (string, bool) {
	ck, err := c.Cookie(name)
	if err != nil || !csrfOK(session{CSRF: ck.Value}, c.FormValue("csrf")) {
		return "", false
	}
	return ck.Value, true
}

// dropAnonymousForm removes the cookie of an anonymous form once used.
func dropAnonymousForm(c echo.Context, name, path string) {
	c.SetCookie(&http.Cookie{Name: name, Path: path, MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

// signInPage shows the form, with a fresh CSRF secret in it and in the
// sign-in cookie.
func (d *Dashboard) signInPage(c echo.Context) error {
	secret := anonymousForm(c, signInCookie, "/signin")
	return d.render(c, http.StatusOK, "signin", map[string]any{"Title": "Sign in", "Next": safeNext(c.QueryParam("next")), "CSRF": secret})
}

// signIn checks the form's CSRF secret against the sign-in cookie, then
// opens a session with the API: the cookie holds a session token of its
// own, never the token pasted, so that signing out can revoke it.
func (d *Dashboard) signIn(c echo.Context) error {
	csrf, ok := anonymousFormOK(c, signInCookie)
	if !ok {
		return &pageError{status: http.StatusForbidden, title: "Refused", message: "The sign-in form was not sent from this site's sign-in page, or it is more than an hour old: open the sign-in page again."}
	}
	token := strings.TrimSpace(c.FormValue("token"))
	next := safeNext(c.FormValue("next"))
	fail := func(msg string) error {
		return d.render(c, http.StatusUnauthorized, "signin", map[string]any{"Title": "Sign in", "Next": next, "CSRF": csrf, "Error": msg})
	}
	if token == "" {
		return fail("Paste an API token: `bex login` prints where to find yours, and make run writes one to .bex/env as BEX_TOKEN.")
	}
	s, err := d.openSession(c, token)
	if apiclient.IsStatus(err, http.StatusUnauthorized) {
		return fail("That token was refused: it is unknown, revoked or expired.")
	}
	if apiclient.IsStatus(err, http.StatusForbidden) {
		return fail("That is a session's token: sign in with an API token.")
	}
	if err != nil {
		return err
	}
	dropAnonymousForm(c, signInCookie, "/signin")
	if next == "" {
		next = "/apps"
		if s.Operator {
			next = "/console"
		}
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// openSession asks the API for a session of token and sets the session
// cookie that holds it; the request's session is the new one from then on.
func (d *Dashboard) openSession(c echo.Context, token string) (session, error) {
	cl, err := apiclient.New(d.api, token, d.httpClient)
	if err != nil {
		return session{}, err
	}
	s, err := cl.CreateSession(c.Request().Context(), apiclient.CreateSessionRequest{TTLSeconds: int64(d.ttl / time.Second)})
	if err != nil {
		return session{}, err
	}
	sess := session{Token: s.Token, Tenant: s.Tenant, Operator: s.Operator, CSRF: newCSRF(), Expires: s.ExpiresAt.Unix()}
	value, err := d.sealer.seal(sess)
	if err != nil {
		return session{}, err
	}
	c.SetCookie(d.cookie(value, s.ExpiresAt))
	c.Set(sessionKey, sess)
	return sess, nil
}

// signOut revokes the session's token at the API, so that a copy of the
// cookie is worth nothing, and drops the cookie.
func (d *Dashboard) signOut(c echo.Context) error {
	err := d.client(c).EndSession(c.Request().Context())
	var ae *apiclient.Error
	if err != nil && !(errors.As(err, &ae) && ae.Status < 500) {
		// Keep the cookie: the session may still work, and the user must
		// know. A 4xx means it works no more (or holds no session token).
		return err
	}
	c.SetCookie(d.cookie("", time.Time{}))
	return c.Redirect(http.StatusSeeOther, "/signin")
}

// safeNext keeps a redirect target only when it is a path of this site:
// it starts with one "/", and neither it nor its unescaped form holds a
// backslash, a control character or white space (browsers drop tabs and
// newlines from URLs, so "/\t/evil.example" would lead to
// //evil.example). Anything else, and the sign-in page itself, gives "".
func safeNext(next string) string {
	if len(next) > 2048 || strings.HasPrefix(next, "/signin") {
		return ""
	}
	unescaped, err := url.PathUnescape(next)
	if err != nil {
		return ""
	}
	for _, s := range []string{next, unescaped} {
		if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.ContainsFunc(s, unsafeInURL) {
			return ""
		}
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	return next
}

func unsafeInURL(r rune) bool {
	return r == '\\' || unicode.IsControl(r) || unicode.IsSpace(r)
}
