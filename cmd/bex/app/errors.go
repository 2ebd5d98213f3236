package app

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/web/api/apiclient"
)

// The kinds of a failed command, as Error.Kind says them. Each has its
// exit code (Error.ExitCode).
const (
	// KindUsage: bex refused the command line: a flag or argument it does
	// not know or cannot read, one missing (before calling the API), or a
	// name that several objects have where one is meant (exit 2).
	KindUsage = "usage"
	// KindInvalid: the API refused the input, 400, 422 or another 4xx not
	// below; Field names the input at fault when it can (exit 2).
	KindInvalid = "invalid"
	// KindNotFound: 404, or something bex looked for and did not find
	// (exit 3).
	KindNotFound = "not_found"
	// KindConflict: 409: taken already, or a state that refuses the
	// change (exit 4).
	KindConflict = "conflict"
	// KindUnauthenticated: 401, or not logged in (exit 5).
	KindUnauthenticated = "unauthenticated"
	// KindForbidden: 403: the token may not do this, or a quota refused
	// it (Quota names it) (exit 5).
	KindForbidden = "forbidden"
	// KindUnavailable: 429, 503, or the API out of reach: try again later
	// (exit 1).
	KindUnavailable = "unavailable"
	// KindServer: the API failed, 500 and other 5xx (exit 1).
	KindServer = "server"
	// KindError: any other failure (exit 1).
	KindError = "error"
)

// Exit codes of bex, by kind of error.
const (
	ExitOK       = 0
	ExitError    = 1 // KindServer, KindUnavailable, KindError
	ExitUsage    = 2 // KindUsage, KindInvalid
	ExitNotFound = 3
	ExitConflict = 4
	ExitAuth     = 5 // KindUnauthenticated, KindForbidden
)

// Error is a failed command as scripts read it: its kind, which gives the
// exit code, its message, and for an answer of the API its HTTP status and
// the field or quota at fault. Run writes it to standard error as
// "bex: message" or, with -o json, as {"error": Error}.
type Error struct {
	Kind string `json:"kind"`
	// Status is the API's HTTP status; 0 when bex failed before or
	// without an answer.
	Status  int    `json:"status,omitempty"`
	Message string `json:"message"`
	// Field names the input at fault, for KindInvalid (and some
	// KindConflict: a name taken).
	Field string `json:"field,omitempty"`
	// Quota names the tenant's quota that refused the request, for
	// KindForbidden.
	Quota string `json:"quota,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// ExitCode is the exit code of the error's kind.
func (e *Error) ExitCode() int {
	switch e.Kind {
	case KindUsage, KindInvalid:
		return ExitUsage
	case KindNotFound:
		return ExitNotFound
	case KindConflict:
		return ExitConflict
	case KindUnauthenticated, KindForbidden:
		return ExitAuth
	}
	return ExitError
}

// ErrorOf says what kind of failure err is, from what it wraps: an *Error
// a command made, a command line refused (command.UsageError), an error
// answer of the API (*apiclient.Error, by its status), the API out of
// reach; anything else is KindError. The message is err's own, with
// whatever context the command added.
func ErrorOf(err error) *Error {
	if err == nil {
		return nil
	}
	out := &Error{Kind: KindError, Message: err.Error()}
	var e *Error
	var ue *command.UsageError
	var apiErr *apiclient.Error
	var netErr *net.OpError
	var urlErr *url.Error
	switch {
	case errors.As(err, &e):
		out.Kind, out.Status, out.Field, out.Quota = e.Kind, e.Status, e.Field, e.Quota
	case errors.As(err, &ue):
		out.Kind = KindUsage
	case errors.As(err, &apiErr):
		out.Kind, out.Status, out.Field, out.Quota = statusKind(apiErr.Status), apiErr.Status, apiErr.Field, apiErr.Quota
		if error(apiErr) == err {
			out.Message = apiErr.Message // the field is a field of its own
		}
	case errors.As(err, &netErr), errors.As(err, &urlErr):
		out.Kind = KindUnavailable
	}
	return out
}

// statusKind is the kind of an API answer's HTTP status.
func statusKind(status int) string {
	switch {
	case status == http.StatusNotFound:
		return KindNotFound
	case status == http.StatusConflict:
		return KindConflict
	case status == http.StatusUnauthorized:
		return KindUnauthenticated
	case status == http.StatusForbidden:
		return KindForbidden
	case status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable:
		return KindUnavailable
	case status >= 400 && status < 500:
		return KindInvalid
	case status >= 500:
		return KindServer
	}
	return KindError
}

// writeError writes err to w as "bex: " and its message (with the field
// at fault), or as its JSON object {"error": ErrorOf(err)} on one line.
func writeError(w io.Writer, err error, asJSON bool) {
	if !asJSON {
		fmt.Fprintf(w, "bex: %v\n", err)
		return
	}
	_ = jsonEncoder(w).Encode(struct {
		Error *Error `json:"error"`
	}{ErrorOf(err)})
}

// usagef is a command line bex refuses, saying what to type instead.
func usagef(format string, args ...any) error {
	return command.Usage(fmt.Errorf(format, args...))
}

// notFoundf is something bex looked for and did not find.
func notFoundf(format string, args ...any) error {
	return &Error{Kind: KindNotFound, Message: fmt.Sprintf(format, args...)}
}
