package app_test

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/web/api/apiclient"
)

// TestErrorKinds: each kind of failure gets its kind and exit code, the
// API's status, field and quota, and its message, from whatever wraps it.
func TestErrorKinds(t *testing.T) {
	apiErr := func(status int, msg, field, quota string) error {
		return &apiclient.Error{Status: status, ErrorBody: apiclient.ErrorBody{Message: msg, Field: field, Quota: quota}}
	}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name string
		err  error
		want app.Error
		code int
	}{
		{"flag", command.Usage(errors.New("unknown flag: --al")), app.Error{Kind: app.KindUsage, Message: "unknown flag: --al"}, 2},
		{"422", apiErr(422, "app name too long", "name", ""), app.Error{Kind: app.KindInvalid, Status: 422, Message: "app name too long", Field: "name"}, 2},
		{"400", apiErr(400, "the body is not JSON", "", ""), app.Error{Kind: app.KindInvalid, Status: 400, Message: "the body is not JSON"}, 2},
		{"413", apiErr(413, "too large", "", ""), app.Error{Kind: app.KindInvalid, Status: 413, Message: "too large"}, 2},
		{"404", apiErr(404, `app "nope" not found`, "", ""), app.Error{Kind: app.KindNotFound, Status: 404, Message: `app "nope" not found`}, 3},
		{"404 wrapped", fmt.Errorf("reading app: %w", apiErr(404, "gone", "", "")), app.Error{Kind: app.KindNotFound, Status: 404, Message: "reading app: gone"}, 3},
		{"not found here", &app.Error{Kind: app.KindNotFound, Message: "no SSH key"}, app.Error{Kind: app.KindNotFound, Message: "no SSH key"}, 3},
		{"409", apiErr(409, "exists already", "name", ""), app.Error{Kind: app.KindConflict, Status: 409, Message: "exists already", Field: "name"}, 4},
		{"401", apiErr(401, "the token was refused", "", ""), app.Error{Kind: app.KindUnauthenticated, Status: 401, Message: "the token was refused"}, 5},
		{"403", apiErr(403, "this needs an operator's token", "", ""), app.Error{Kind: app.KindForbidden, Status: 403, Message: "this needs an operator's token"}, 5},
		{"403 quota", apiErr(403, "the tenant's apps quota (3) is reached", "", "apps"), app.Error{Kind: app.KindForbidden, Status: 403, Message: "the tenant's apps quota (3) is reached", Quota: "apps"}, 5},
		{"429", apiErr(429, "too many log streams", "", ""), app.Error{Kind: app.KindUnavailable, Status: 429, Message: "too many log streams"}, 1},
		{"503", apiErr(503, "the database is out of reach", "", ""), app.Error{Kind: app.KindUnavailable, Status: 503, Message: "the database is out of reach"}, 1},
		{"500", apiErr(500, "internal error", "", ""), app.Error{Kind: app.KindServer, Status: 500, Message: "internal error"}, 1},
		{"501", apiErr(501, "no local fleet", "", ""), app.Error{Kind: app.KindServer, Status: 501, Message: "no local fleet"}, 1},
		{"unreachable", fmt.Errorf("calling the API: %w", dial), app.Error{Kind: app.KindUnavailable, Message: "calling the API: dial tcp: connection refused"}, 1},
		{"other", errors.New("verification failed"), app.Error{Kind: app.KindError, Message: "verification failed"}, 1},
	} {
		got := app.ErrorOf(tc.err)
		if *got != tc.want || got.ExitCode() != tc.code {
			t.Errorf("%s: %+v exit %d, want %+v exit %d", tc.name, *got, got.ExitCode(), tc.want, tc.code)
		}
	}
	if app.ErrorOf(nil) != nil {
		t.Error("ErrorOf(nil) is not nil")
	}
}
