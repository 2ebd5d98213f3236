package api_test

import (
	"net/http"
	"testing"
	"time"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/web/api/apiclient"
	"bex.co/bex/web/api/apitest"
)

// testSessions: a session token acts as its parent, under its name; it
// cannot open another session and stops working when ended.
func testSessions(t *testing.T, cp *controlplane.ControlPlane) {
	e := apitest.Start(t, cp)
	_, token := e.TenantToken(t, "sessacme")
	a := call(t, e, http.MethodPost, "/sessions", token, apiclient.CreateSessionRequest{TTLSeconds: -1})
	if a.status != http.StatusUnprocessableEntity || a.err().Field != "ttlSeconds" {
		t.Errorf("a negative ttl: %d %s, want 422 on ttlSeconds", a.status, a.body)
	}
	a = call(t, e, http.MethodPost, "/sessions", token, nil)
	wantStatus(t, "opening a session", a, http.StatusCreated)
	var s apiclient.Session
	a.decode(t, &s)
	if s.Token == "" || s.Token == token || s.Tenant != "sessacme" || s.Operator || time.Until(s.ExpiresAt) < 11*time.Hour {
		t.Errorf("session = %+v", s)
	}
	var who apiclient.WhoAmI
	call(t, e, http.MethodGet, "/whoami", s.Token, nil).decode(t, &who)
	if who.Tenant != "sessacme" || who.Token != "test" {
		t.Errorf("whoami with the session token = %+v, want the parent's tenant and name", who)
	}
	wantStatus(t, "a session from a session", call(t, e, http.MethodPost, "/sessions", s.Token, nil), http.StatusForbidden)
	wantStatus(t, "ending a token that is no session", call(t, e, http.MethodDelete, "/sessions/current", token, nil), http.StatusConflict)
	wantStatus(t, "ending the session", call(t, e, http.MethodDelete, "/sessions/current", s.Token, nil), http.StatusNoContent)
	wantStatus(t, "the ended session's token", call(t, e, http.MethodGet, "/whoami", s.Token, nil), http.StatusUnauthorized)
	wantStatus(t, "the parent token after the session ended", call(t, e, http.MethodGet, "/whoami", token, nil), http.StatusOK)
}
