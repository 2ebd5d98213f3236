package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"bex.co/bex/internal/quota"
	"bex.co/bex/internal/runtime"
	"bex.co/bex/internal/store"
	"bex.co/bex/web/api/apiclient"
)

// Prefix is where the API is served.
const Prefix = "/api/v1"

// Options are what New needs. Every field but ReadinessChecks is required.
type Options struct {
	// Store holds tenants, tokens, SSH keys, builds, releases and the audit
	// log.
	Store *store.Store
	// Kube reaches the management cluster, with a scheme that has the core
	// and platform.bex.co kinds.
	Kube client.Client
	// Deployer rolls apps back.
	Deployer Releaser
	// Logs reads apps' runtime output.
	Logs LogSource
	// Instances reads what runs of apps (bex ps).
	Instances InstanceSource
	// GitBase is the git receiver's base URL: an app's remote is
	// <GitBase>/<tenant>/<app>.git.
	GitBase string
	// AppDomain is the domain under which apps answer:
	// https://<app>-<tenant>.<AppDomain> (the edge redirects plain HTTP there).
	AppDomain string
	// EdgeAddresses are the edge's public IP addresses, which the DNS
	// records of custom hostnames may point at with A and AAAA records;
	// optional (a CNAME to the app's default hostname always works).
	EdgeAddresses []string
	// ReservedHostnames are names the platform serves itself (the API,
	// dashboard, git and registry hosts; "*.name" for name and everything
	// under it), refused as custom hostnames; optional. The Route
	// controller must be given the same.
	ReservedHostnames []string
	// Log receives the server's own failures.
	Log logr.Logger
	// ReadinessChecks must all pass for GET /api/v1/healthz to answer 200;
	// the store's connection is always checked.
	ReadinessChecks []func(context.Context) error
	// MaxLogStreamsPerTenant caps the logs (of builds and of apps) that one
	// tenant follows at once through this server; the stream past it is
	// answered 429. Zero means DefaultMaxLogStreamsPerTenant.
	MaxLogStreamsPerTenant int
	// RunKeepAlive is how often an attached one-off run that writes
	// nothing is sent an empty keep-alive frame, so that a proxy that
	// closes idle connections (nginx's proxy_read_timeout, a cloud load
	// balancer's idle timeout) keeps it. Zero means DefaultRunKeepAlive;
	// a negative value sends none.
	RunKeepAlive time.Duration

	// Quotas are the platform's default quotas of a tenant; nil means
	// quota.NewDefaults().
	Quotas *quota.Defaults

	// AppMetrics, when set, keeps the apps' CPU, memory, restarts and
	// latency series (GET /apps/{app}/metrics); nil answers that route
	// 501.
	AppMetrics AppMetricsSource

	// LocalFleet, when set, lets operators create and delete clusters of
	// the platform's local fleet (make run); Kube's scheme must then have
	// infrastructure.bex.co's kinds. Nil answers those routes 501.
	LocalFleet LocalFleet

	// RunHeartbeat is how often Run records that the server is alive for
	// the one-off runs it runs, and sweeps the runs of servers that
	// stopped answering; zero means DefaultRunHeartbeat.
	RunHeartbeat time.Duration
	// RunLostAfter is how long a server may go unseen before its running
	// runs are marked lost; zero means DefaultRunLostAfter. It must be at
	// least three heartbeats.
	RunLostAfter time.Duration
	// RunReaper, when set, is the runtime whose one-off runs' instances
	// can outlive this server (a workload cluster's Pods): Run stops the
	// instance of each run it marks lost there, and has it delete the
	// instances of ended runs past their retention. Nil leaves them to
	// their time limits and the apps' next runs.
	RunReaper runtime.RunReaper
}

// Server is the platform API.
type Server struct {
	store     *store.Store
	kube      client.Client
	deployer  Releaser
	logs      LogSource
	instances InstanceSource
	gitBase   string
	appDomain string
	edgeAddrs []string
	// reservedHosts are Options.ReservedHostnames.
	reservedHosts []string
	log           logr.Logger
	checks        []func(context.Context) error
	streams       *streamLimiter
	// runs are the one-off runs this server runs (runstops.go).
	runs *localRuns
	// unwritten are the ends of runs this server could not record yet
	// (lostruns.go).
	unwritten unwrittenEnds
	// reaper is Options.RunReaper; lost are the runs this server marked
	// lost whose instances it has still to stop there, and lastRunSweep
	// when it last had it sweep (lostruns.go).
	reaper       runtime.RunReaper
	lost         pendingRuns[lostRun]
	lastRunSweep time.Time
	// runKeepAlive is Options.RunKeepAlive, defaulted.
	runKeepAlive time.Duration
	// serverID names this server process in the runs it records, and
	// its heartbeats (lostruns.go).
	serverID                   string
	runHeartbeat, runLostAfter time.Duration

	quotas *quota.Defaults

	localFleet    LocalFleet
	appMetricsSrc AppMetricsSource
	// localMu makes one local cluster at a time (localfleet.go).
	localMu sync.Mutex

	echo   *echo.Echo
	routes []route
}

// New returns the API server for opts. It fails when a required option is
// missing or malformed.
func New(opts Options) (*Server, error) {
	var missing []string
	for name, isNil := range map[string]bool{
		"Store": opts.Store == nil, "Kube": opts.Kube == nil, "Deployer": opts.Deployer == nil, "Logs": opts.Logs == nil, "Instances": opts.Instances == nil,
		"GitBase": opts.GitBase == "", "AppDomain": opts.AppDomain == "",
	} {
		if isNil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("creating API server: missing %s", strings.Join(missing, ", "))
	}
	if u, err := url.Parse(opts.GitBase); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("creating API server: GitBase %q is not an absolute URL", opts.GitBase)
	}
	if strings.Contains(opts.AppDomain, "/") || strings.HasPrefix(opts.AppDomain, ".") {
		return nil, fmt.Errorf("creating API server: AppDomain %q is not a domain", opts.AppDomain)
	}
	for _, a := range opts.EdgeAddresses {
		if _, err := netip.ParseAddr(a); err != nil {
			return nil, fmt.Errorf("creating API server: EdgeAddresses: %q is not an IP address", a)
		}
	}
	if opts.MaxLogStreamsPerTenant < 0 {
		return nil, fmt.Errorf("creating API server: MaxLogStreamsPerTenant %d is negative", opts.MaxLogStreamsPerTenant)
	}
	maxStreams := opts.MaxLogStreamsPerTenant
	if maxStreams == 0 {
		maxStreams = DefaultMaxLogStreamsPerTenant
	}
	keepAlive := opts.RunKeepAlive
	if keepAlive == 0 {
		keepAlive = DefaultRunKeepAlive
	}
	heartbeat, lostAfter := cmp.Or(opts.RunHeartbeat, DefaultRunHeartbeat), cmp.Or(opts.RunLostAfter, DefaultRunLostAfter)
	if heartbeat < 0 || lostAfter < 3*heartbeat {
		return nil, fmt.Errorf("creating API server: RunLostAfter %s must be at least three RunHeartbeats of %s", lostAfter, heartbeat)
	}
	s := &Server{
		runKeepAlive:  keepAlive,
		streams:       newStreamLimiter(maxStreams),
		runs:          newLocalRuns(opts.Store, opts.Log, runStopPoll),
		serverID:      uuid.NewString(),
		runHeartbeat:  heartbeat,
		runLostAfter:  lostAfter,
		store:         opts.Store,
		kube:          opts.Kube,
		deployer:      opts.Deployer,
		logs:          opts.Logs,
		instances:     opts.Instances,
		appMetricsSrc: opts.AppMetrics,
		gitBase:       strings.TrimSuffix(opts.GitBase, "/"),
		appDomain:     opts.AppDomain,
		edgeAddrs:     slices.Clone(opts.EdgeAddresses),
		reservedHosts: slices.Clone(opts.ReservedHostnames),
		log:           opts.Log,
		checks:        opts.ReadinessChecks,
		quotas:        opts.Quotas,
		localFleet:    opts.LocalFleet,
		reaper:        opts.RunReaper,
	}
	if s.quotas == nil {
		s.quotas = quota.NewDefaults()
	} else if err := s.quotas.Validate(); err != nil {
		return nil, fmt.Errorf("creating API server: %w", err)
	}
	s.routes = s.routeTable()
	s.echo = s.newEcho()
	return s, nil
}

// newEcho returns the echo instance that serves s.routes.
func (s *Server) newEcho() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// Source addresses are the peer's: nothing in front of the API is
	// trusted to say otherwise.
	e.IPExtractor = echo.ExtractIPDirect()
	e.HTTPErrorHandler = s.handleError
	for _, r := range s.routes {
		e.Add(r.method, Prefix+r.path, r.handler, s.authenticate(r.access))
	}
	return e
}

// Handler returns the API's HTTP handler; it serves Prefix and answers 404
// elsewhere.
func (s *Server) Handler() http.Handler { return s.echo }

// access says who may call a route.
type access int

const (
	public          access = iota // anyone, without a token
	anyToken                      // any valid token
	operator                      // an operator's token
	tenantViewer                  // a tenant's token acting as a viewer or more
	tenantDeveloper               // a tenant's token acting as a developer or admin
	tenantAdmin                   // a tenant's token acting as an admin
)

// role is the least tenant role a route of this access needs; "" for a
// route that is not a tenant's.
func (a access) role() store.Role {
	switch a {
	case tenantViewer:
		return store.RoleViewer
	case tenantDeveloper:
		return store.RoleDeveloper
	case tenantAdmin:
		return store.RoleAdmin
	}
	return ""
}

// String names who may call: public, any token, operator, or the least
// tenant role.
func (a access) String() string {
	switch a {
	case public:
		return "public"
	case anyToken:
		return "any token"
	case operator:
		return "operator"
	}
	return string(a.role())
}

// principal is who calls: the token, for a tenant's token its tenant, the
// user who owns the token, if one does, and the role the token acts with.
type principal struct {
	token  store.Token
	tenant store.Tenant
	email  string
	// role is the tenant role the token acts with (its user's, or admin
	// for a machine token, narrowed by its scope), or RoleOperator.
	role store.Role
}

// actor names the principal in audit entries and releases: the token's
// user, or "token:<name>" for a machine token.
func (p principal) actor() string {
	if p.email != "" {
		return p.email
	}
	return "token:" + p.token.Name
}

const principalKey = "bex.principal"

func principalOf(c echo.Context) principal {
	p, _ := c.Get(principalKey).(principal)
	return p
}

// authenticate checks the bearer token against what the route needs. A
// tenant's token acts with its user's role at the time of the request (a
// machine token's is admin), narrowed by its scope; a route that needs
// more answers 403 naming the role it needs.
func (s *Server) authenticate(a access) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if a == public {
				return next(c)
			}
			secret, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
			if !ok || strings.TrimSpace(secret) == "" {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="bex"`)
				return errUnauthenticated("missing token: send Authorization: Bearer <token>")
			}
			ctx := c.Request().Context()
			tok, err := s.store.AuthenticateToken(ctx, strings.TrimSpace(secret))
			if errors.Is(err, store.ErrUnauthenticated) {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="bex", error="invalid_token"`)
				return errUnauthenticated("the token was refused: it is unknown, revoked or expired")
			}
			if err != nil {
				return err
			}
			p := principal{token: tok, role: store.RoleAdmin}
			if tok.TenantID != "" {
				if p.tenant, err = s.store.GetTenant(ctx, tok.TenantID); err != nil {
					return err
				}
			}
			if tok.UserID != "" {
				u, err := s.store.GetUser(ctx, tok.UserID)
				if err != nil {
					return err
				}
				p.email, p.role = u.Email, u.Role
			}
			p.role = tok.Scope.Limit(p.role)
			need := a.role()
			switch {
			case need != "" && tok.TenantID == "":
				return &httpError{status: http.StatusForbidden, message: "an operator's token acts for no tenant: use a tenant's token"}
			case a == operator && tok.TenantID != "":
				return &httpError{status: http.StatusForbidden, message: "this needs an operator's token"}
			case need != "" && !p.role.Covers(need):
				return roleRefused(p, need, "this")
			}
			c.Set(principalKey, p)
			return next(c)
		}
	}
}

// roleRefused is the 403 answer to a tenant's token whose role is below
// need for what: it names the role needed, the one the token has and why.
func roleRefused(p principal, need store.Role, what string) error {
	why := fmt.Sprintf("your role in tenant %s is %s: an admin can change it (bex members set-role)", p.tenant.Name, p.role)
	if p.token.Scope != store.ScopeFull {
		why = fmt.Sprintf("the token's scope is %s, so it acts as a %s: use a token with a wider scope", p.token.Scope, p.role)
	}
	return &httpError{status: http.StatusForbidden, role: string(need),
		message: fmt.Sprintf("%s needs the %s role: %s", what, need, why)}
}

// httpError is an error answer.
type httpError struct {
	status  int
	message string
	field   string
	quota   string
	// role is the tenant role a 403 says is needed.
	role string
	// conflicts are the quotas a 409 to a quota patch names.
	conflicts []apiclient.QuotaConflict
}

func (e *httpError) Error() string { return e.message }

func errUnauthenticated(msg string) error {
	return &httpError{status: http.StatusUnauthorized, message: msg}
}

// invalid is a 422 answer about a field of the input.
func invalid(field, format string, args ...any) error {
	return &httpError{status: http.StatusUnprocessableEntity, field: field, message: fmt.Sprintf(format, args...)}
}

// invalidField is the 422 on field of a store check's err (one wrapping
// store.ErrInvalid), its message without the wrapped error's words.
func invalidField(field string, err error) error {
	return invalid(field, "%s", strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+" "))
}

// badRequest is a 400 answer: the request could not be read.
func badRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

// notFound is a 404 answer.
func notFound(format string, args ...any) error {
	return &httpError{status: http.StatusNotFound, message: fmt.Sprintf(format, args...)}
}

// handleError turns any error a handler returns into a JSON answer. Errors
// of the store and of the apiserver map to their statuses; the database out
// of reach is 503 with Retry-After; any other is logged and answered 500
// without detail.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		// A stream that failed midway: the status is sent already.
		s.log.Error(err, "Stream failed", "method", c.Request().Method, "path", c.Path())
		return
	}
	var he *httpError
	var ee *echo.HTTPError
	var qe *store.QuotaError
	var nd *runtime.NotDeployedError
	switch {
	case errors.As(err, &he):
	case errors.As(err, &qe):
		// A change a quota refused (a scale, a release past the instances
		// quota) is a 403 naming it, whatever else it says.
		he = &httpError{status: http.StatusForbidden, message: err.Error(), quota: qe.Quota}
	case errors.As(err, &nd):
		// What serves is unchanged; the tenant reads why.
		he = &httpError{status: http.StatusConflict, message: err.Error()}
	case errors.As(err, &ee):
		he = &httpError{status: ee.Code, message: fmt.Sprint(ee.Message)}
		if ee.Code == http.StatusNotFound {
			he.message = "no such route: see " + Prefix + "/openapi.json"
		}
	case errors.Is(err, store.ErrNotFound), apierrors.IsNotFound(err):
		he = &httpError{status: http.StatusNotFound, message: err.Error()}
	case errors.Is(err, store.ErrConflict), apierrors.IsAlreadyExists(err):
		he = &httpError{status: http.StatusConflict, message: err.Error()}
	case apierrors.IsConflict(err):
		he = &httpError{status: http.StatusConflict, message: "changed by someone else meanwhile: try again"}
	case errors.Is(err, store.ErrInvalid), apierrors.IsInvalid(err):
		he = &httpError{status: http.StatusUnprocessableEntity, message: err.Error()}
	case errors.Is(err, context.Canceled):
		return // the client went away
	case store.Unavailable(err):
		s.log.Error(err, "Database unavailable", "method", c.Request().Method, "path", c.Path())
		c.Response().Header().Set("Retry-After", "5")
		he = &httpError{status: http.StatusServiceUnavailable, message: store.UnavailableMessage}
	default:
		s.log.Error(err, "Request failed", "method", c.Request().Method, "path", c.Path())
		he = &httpError{status: http.StatusInternalServerError, message: "internal error: the operator's logs say more"}
	}
	if err := c.JSON(he.status, errorBody{Message: he.message, Field: he.field, Quota: he.quota, Role: he.role, Conflicts: he.conflicts}); err != nil {
		s.log.Error(err, "Writing error answer failed")
	}
}

type errorBody struct {
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Quota   string `json:"quota,omitempty"`
	Role    string `json:"role,omitempty"`

	Conflicts []apiclient.QuotaConflict `json:"conflicts,omitempty"`
}

// audit records a change made for the caller. A failure to record it is
// logged: the change is made and the caller is told so.
func (s *Server) audit(c echo.Context, action, target string, details map[string]any) {
	s.auditIn(c, principalOf(c).tenant.ID, action, target, details)
}

// auditIn is audit of an action on the tenant with the ID, which need not
// be the principal's: an operator's change of a tenant's members is in
// that tenant's audit log.
func (s *Server) auditIn(c echo.Context, tenantID, action, target string, details map[string]any) {
	p := principalOf(c)
	e := store.AuditEntry{
		TenantID:   tenantID,
		Actor:      p.actor(),
		Action:     action,
		Target:     target,
		SourceAddr: c.Request().RemoteAddr,
	}
	if details == nil {
		details = map[string]any{}
	}
	details["tokenID"] = p.token.ID
	b, err := json.Marshal(details)
	if err == nil {
		e.Details = b
		err = s.store.Audit(context.WithoutCancel(c.Request().Context()), e)
	}
	if err != nil {
		s.log.Error(err, "Writing audit entry failed", "action", action, "target", target, "actor", e.Actor)
	}
}

// bind decodes a JSON body into v, refusing unknown fields, anything after
// the value and a Content-Encoding. An empty body leaves v as it is when
// optional.
func bind(c echo.Context, v any, optional bool) error {
	if enc := c.Request().Header.Get(echo.HeaderContentEncoding); enc != "" && !strings.EqualFold(enc, "identity") {
		return &httpError{status: http.StatusUnsupportedMediaType,
			message: fmt.Sprintf("Content-Encoding %q is not supported: send the JSON body as it is, without Content-Encoding", enc)}
	}
	dec := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) && optional {
			return nil
		}
		return badRequest("the body is not the JSON this route takes: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("the body is not the JSON this route takes: something follows its JSON value; send one JSON object")
	}
	return nil
}
