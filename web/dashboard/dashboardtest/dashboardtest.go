// Package dashboardtest runs the web dashboard (package web/dashboard) for
// tests, in front of an API that apitest runs: the tests of the dashboard's
// pages and the browser tests use it.
package dashboardtest

import (
	"crypto/rand"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr/testr"

	"bex.co/bex/web/api/apitest"
	"bex.co/bex/web/dashboard"
)

// Start runs the dashboard in front of the API of e, with a fresh cookie
// key, on an httptest server that stops when t ends.
func Start(t *testing.T, e *apitest.Env) *httptest.Server {
	t.Helper()
	return StartAt(t, e.URL)
}

// StartAt is Start in front of the API server at api (another of an
// Env's, such as one given other options).
func StartAt(t *testing.T, api string) *httptest.Server {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	d, err := dashboard.New(dashboard.Options{API: api, CookieKey: key, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)
	return srv
}
