package gitserver

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/pktline"

	"bex.co/bex/internal/bytesize"
	"bex.co/bex/internal/steptime"
)

const (
	serviceReceivePack = "git-receive-pack"
	serviceUploadPack  = "git-upload-pack"
)

// accessError is a refusal the client must see, with its HTTP status.
type accessError struct {
	status int
	msg    string
}

func (e *accessError) Error() string { return e.msg }

var (
	errRepoNotFound = &accessError{status: http.StatusNotFound, msg: "repository not found"}
	errInternal     = &accessError{status: http.StatusInternalServerError, msg: "internal error; try again later"}
	errUnavailable  = &accessError{status: http.StatusServiceUnavailable, msg: "the platform's database is unavailable: nothing was changed; push again shortly"}
)

func errAppMissing(app string) error {
	return &accessError{
		status: http.StatusNotFound,
		msg:    fmt.Sprintf("app %s does not exist: create it with `bex apps create %s`", app, app),
	}
}

// authorize checks that p may use tenant's app and opens its repository,
// creating it on first use. The errors it returns are *accessError.
func (s *Server) authorize(ctx context.Context, p Principal, tenant, app string) (*repo, error) {
	if !validName(tenant) || !validName(app) || p.Tenant != tenant {
		// Another tenant's app gets the answer of a path that does not exist.
		return nil, errRepoNotFound
	}
	info, err := s.repos.Lookup(ctx, tenant, app)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, errAppMissing(app)
	case errors.Is(err, ErrUnavailable):
		s.log.Error(err, "Looking up app failed", "tenant", tenant, "app", app)
		return nil, errUnavailable
	case err != nil:
		s.log.Error(err, "Looking up app failed", "tenant", tenant, "app", app)
		return nil, errInternal
	}
	r, err := s.openRepo(p, app, info)
	if err != nil {
		s.log.Error(err, "Opening repository failed", "tenant", tenant, "app", app)
		return nil, errInternal
	}
	return r, nil
}

// pushDenied is the refusal of a push by p, if p may not push.
func pushDenied(p Principal) error {
	if p.PushDenied == "" {
		return nil
	}
	return &accessError{status: http.StatusForbidden, msg: "push refused: " + p.PushDenied}
}

// HTTPHandler serves git's smart HTTP protocol at
// /<tenant>/<app>.git/{info/refs,git-receive-pack,git-upload-pack}, with the
// tenant API token as the basic-auth password. Mount it at the root of its
// own host or port, or strip a prefix with http.StripPrefix.
func (s *Server) HTTPHandler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

func (s *Server) serveHTTP(w http.ResponseWriter, req *http.Request) {
	tenant, app, rest, ok := splitPath(req.URL.Path)
	var service string
	switch {
	case !ok:
	case rest == "info/refs" && req.Method == http.MethodGet:
		service = req.URL.Query().Get("service")
		if service != serviceReceivePack && service != serviceUploadPack {
			httpError(w, http.StatusForbidden, "only git's smart HTTP protocol is supported; upgrade git")
			return
		}
	case (rest == serviceReceivePack || rest == serviceUploadPack) && req.Method == http.MethodPost:
		service = rest
	}
	if service == "" {
		httpError(w, http.StatusNotFound, errRepoNotFound.msg)
		return
	}

	ctx := req.Context()
	if rest == serviceReceivePack {
		ctx = timePush(ctx)
	}
	stopAuth := steptime.Start(ctx, stepAuth)
	user, password, ok := req.BasicAuth()
	if !ok || password == "" {
		unauthorized(w)
		return
	}
	p, err := s.auth.AuthenticatePassword(ctx, user, password)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		unauthorized(w)
		return
	case err == nil && p.Tenant == "":
		err = errors.New("authenticator returned a principal without a tenant")
		fallthrough
	case errors.Is(err, ErrUnavailable):
		s.log.Error(err, "Authenticating token failed")
		w.Header().Set("Retry-After", "5")
		httpError(w, http.StatusServiceUnavailable, errUnavailable.msg)
		return
	case err != nil:
		s.log.Error(err, "Authenticating token failed")
		httpError(w, http.StatusInternalServerError, errInternal.msg)
		return
	}
	r, err := s.authorize(ctx, p, tenant, app)
	if err == nil && service == serviceReceivePack {
		err = pushDenied(p)
	}
	if err != nil {
		var ae *accessError
		errors.As(err, &ae)
		httpError(w, ae.status, ae.msg)
		return
	}
	stopAuth()

	h := w.Header()
	h.Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
	h.Set("Expires", "Fri, 01 Jan 1980 00:00:00 GMT")
	h.Set("Pragma", "no-cache")
	if rest == "info/refs" {
		h.Set("Content-Type", "application/x-"+service+"-advertisement")
		prefix := [][]byte{[]byte("# service=" + service), pktline.Flush}
		if service == serviceReceivePack {
			err = s.advertiseReceivePack(w, r, prefix)
		} else {
			err = s.advertiseUploadPack(w, r, prefix)
		}
		if err != nil {
			s.log.Error(err, "Advertising references failed", "tenant", tenant, "app", app)
		}
		return
	}

	if ct := req.Header.Get("Content-Type"); ct != "application/x-"+service+"-request" {
		httpError(w, http.StatusUnsupportedMediaType, "unexpected content type "+ct)
		return
	}
	// Bodies are bounded as they are read, decompressed or not: a fetch's
	// wants and haves, a push's commands and pack (plus what the client
	// sends after a pack over the limit, when it compressed it). A few KiB
	// of gzip can inflate to gigabytes.
	var body io.Reader = req.Body
	var limited *limitedReader
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			httpError(w, http.StatusBadRequest, "bad gzip body: "+err.Error())
			return
		}
		defer func() { _ = gz.Close() }()
		body = gz
		if service == serviceReceivePack {
			limited = newLimitedReader(body, maxCommandBytes+s.maxPush, "the push, once decompressed,",
				"the "+bytesize.Format(s.maxPush)+" limit of a push")
			body = limited
		}
	default:
		httpError(w, http.StatusUnsupportedMediaType, "unsupported Content-Encoding "+enc+": send gzip or nothing")
		return
	}
	if service == serviceUploadPack {
		limited = newLimitedReader(body, maxUploadRequestBytes, "the fetch request", "")
		body = limited
	}
	h.Set("Content-Type", "application/x-"+service+"-result")
	rc := http.NewResponseController(w)
	flush := func() { _ = rc.Flush() }
	sw := &startedWriter{w: w}
	if service == serviceReceivePack {
		err = s.receivePack(ctx, r, body, sw, flush)
	} else {
		err = s.uploadPack(req.Context(), r, body, sw, true)
	}
	var tooLarge *bodyTooLargeError
	if !errors.As(err, &tooLarge) {
		tooLarge = limited.tooLarge()
	}
	if tooLarge != nil && !sw.started {
		// Nothing was stored nor answered.
		s.log.Info("Request body too large", "service", service, "tenant", tenant, "app", app, "reason", tooLarge.Error())
		httpError(w, http.StatusRequestEntityTooLarge, tooLarge.Error())
		return
	}
	if err != nil {
		s.log.Error(err, "Serving git request failed", "service", service, "tenant", tenant, "app", app)
	}
}

// startedWriter records whether the answer has started, after which its
// status can no longer change.
type startedWriter struct {
	w       io.Writer
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	s.started = true
	return s.w.Write(p)
}

// splitPath splits /<tenant>/<app>.git/<rest>.
func splitPath(p string) (tenant, app, rest string, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 3)
	if len(parts) != 3 || !strings.HasSuffix(parts[1], ".git") {
		return "", "", "", false
	}
	return parts[0], strings.TrimSuffix(parts[1], ".git"), parts[2], true
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="bex"`)
	httpError(w, http.StatusUnauthorized, "authentication required: use a bex API token as the password")
}

// httpError answers in text/plain, which git shows to the user as
// "remote: <msg>".
func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}
