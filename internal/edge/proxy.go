package edge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Route is what a Resolver matched: the app that serves a request.
type Route struct {
	Tenant, App string
	// Host is the hostname that matched, lower-case, without port.
	Host string
	// Claim is the name that claimed Host: a Route's hostname
	// ("*.example.com" for a wildcard) or an app's default hostname. There
	// are as many as there are routes, whatever hostnames clients send, so
	// metrics and per-route state key on Claim, never on Host. Empty is
	// taken as Host.
	Claim string
	// PathPrefix is the path prefix that matched; empty matches every path.
	PathPrefix string
	// PlainHTTP is true for a Route that asked for no TLS: it is served on
	// the HTTP port without a redirect, and no certificate is obtained.
	PlainHTTP bool
	// Maintenance is true when the app is in maintenance mode: the proxy
	// answers 503 with a page that says so (MaintenancePage), whatever
	// upstreams there are.
	Maintenance bool
	// MaintenancePage is the app's own maintenance page, served in place
	// of the edge's while Maintenance is set; empty for the edge's.
	MaintenancePage string
}

// claim returns Claim, or Host when the resolver set no Claim.
func (r Route) claim() string {
	if r.Claim != "" {
		return r.Claim
	}
	return r.Host
}

// Resolver finds the route for a request. Resolve is called for every
// request and for every retry, from many goroutines at once, so it must be
// safe for concurrent use and fast (no I/O). host is lower-case, without a
// port or trailing dot. ok is false when no route claims host and path (the
// proxy answers 404); a route with no upstreams gets a 503. Upstreams are
// "host:port" addresses reached over plain HTTP; the caller does not modify
// the slice.
type Resolver interface {
	Resolve(host, path string) (route Route, upstreams []string, ok bool)
}

// Options configures a Proxy.
type Options struct {
	// Transport reaches the upstreams; the default keeps up to 64 idle
	// connections per upstream and gives up a dial after 5 s, and sends a
	// request without a body on the handler's goroutine (see
	// inlineTransport).
	Transport http.RoundTripper
	// Log receives upstream errors; the default discards them.
	Log logr.Logger
	// Observe, when set, is called after every request with what happened
	// (the edge's metrics and access log).
	Observe func(Observation)
}

// Observation is one request as the Proxy served it.
type Observation struct {
	Request *http.Request
	// Route is the route that matched; Matched is false for unknown hosts.
	Route   Route
	Matched bool
	// Upstream is the address the request went to last; empty when none.
	Upstream string
	Status   int
	Bytes    int64
	Duration time.Duration
}

// Proxy is an http.Handler that routes requests to upstreams.
type Proxy struct {
	resolver Resolver
	rp       *httputil.ReverseProxy
	log      logr.Logger
	observe  func(Observation)
	next     sync.Map // route key → *atomic.Uint64
}

// New returns a Proxy routing with r.
func New(r Resolver, opts Options) (*Proxy, error) {
	if r == nil {
		return nil, errors.New("edge: resolver is nil")
	}
	base := opts.Transport
	if base == nil {
		tr := DefaultTransport()
		base = newInlineTransport(tr, tr.DialContext)
	}
	p := &Proxy{resolver: r, log: opts.Log, observe: opts.Observe}
	if p.log.GetSink() == nil {
		p.log = logr.Discard()
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:   p.rewrite,
		Transport: &retryTransport{base: base, p: p},
		// 0 still flushes at once where it matters: httputil flushes
		// every write of a text/event-stream response and of one without
		// a Content-Length. -1 would start a flush timer per response and
		// send headers and body as separate segments.
		FlushInterval: 0,
		BufferPool:    newBufferPool(),
		ErrorHandler:  p.upstreamError,
		ErrorLog:      nil,
	}
	return p, nil
}

// bufferPool lends the 32 KiB buffers ReverseProxy copies bodies with;
// without it every response allocates one.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

func (b *bufferPool) Get() []byte  { return *b.p.Get().(*[]byte) }
func (b *bufferPool) Put(s []byte) { b.p.Put(&s) }

// DefaultTransport returns the transport a Proxy uses when Options has none.
func DefaultTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// target is what ServeHTTP decided for a request, handed to rewrite and the
// retry transport through the request context.
type target struct {
	host, path string
	route      Route
	upstream   string
}

type targetKey struct{}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := NormalizeHost(r.Host)
	route, upstreams, ok := p.resolver.Resolve(host, r.URL.Path)
	p.serve(w, r, host, route, upstreams, ok)
}

// serve answers a request whose route is already resolved.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, host string, route Route, upstreams []string, ok bool) {
	var rec *recorder
	if p.observe != nil {
		rec = &recorder{ResponseWriter: w, start: time.Now()}
		w = rec
	}
	var t *target
	switch {
	case !ok:
		plain(w, http.StatusNotFound, "404 no app at this address\n")
	case route.Maintenance:
		MaintenancePage(w, r, route.App, route.MaintenancePage)
	case len(upstreams) == 0:
		plain(w, http.StatusServiceUnavailable, fmt.Sprintf("503 %s is not available: no healthy instance is running (it may be starting, restarting after a crash, or scaled to zero)\n", route.App))
	default:
		t = &target{host: host, path: r.URL.Path, route: route, upstream: p.pick(route, upstreams, "")}
		p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
	}
	if rec != nil {
		o := Observation{Request: r, Route: route, Matched: ok, Status: rec.status, Bytes: rec.bytes, Duration: time.Since(rec.start)}
		if o.Status == 0 {
			o.Status = http.StatusOK
		}
		if t != nil {
			o.Upstream = t.upstream
		}
		p.observe(o)
	}
}

// recorder notes a response's status and size. Unwrap lets
// http.ResponseController (which the reverse proxy uses to flush and to
// hijack for WebSockets) reach the underlying writer.
type recorder struct {
	http.ResponseWriter
	start  time.Time
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 || r.status < 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// pick returns the next upstream of route round-robin, avoiding "avoid"
// when there is another.
func (p *Proxy) pick(route Route, upstreams []string, avoid string) string {
	key := route.claim() + "\x00" + route.PathPrefix
	c, ok := p.next.Load(key)
	if !ok {
		c, _ = p.next.LoadOrStore(key, new(atomic.Uint64))
	}
	n := c.(*atomic.Uint64).Add(1)
	u := upstreams[n%uint64(len(upstreams))]
	if u == avoid && len(upstreams) > 1 {
		u = upstreams[(n+1)%uint64(len(upstreams))]
	}
	return u
}

// forget drops the round-robin counters of the claims for which known is
// false: those of deleted Routes and apps.
func (p *Proxy) forget(known func(claim string) bool) {
	p.next.Range(func(key, _ any) bool {
		if claim, _, _ := strings.Cut(key.(string), "\x00"); !known(claim) {
			p.next.Delete(key)
		}
		return true
	})
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(*target)
	pr.SetURL(&url.URL{Scheme: "http", Host: t.upstream})
	// The app sees the hostname the client asked for, as on Heroku and Render.
	pr.Out.Host = pr.In.Host
	pr.SetXForwarded()
}

func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The client went away; nobody reads an answer.
		return
	}
	t, _ := r.Context().Value(targetKey{}).(*target)
	if t != nil {
		p.log.Info("Upstream failed", "host", t.host, "tenant", t.route.Tenant, "app", t.route.App, "upstream", t.upstream, "err", err.Error())
	}
	plain(w, http.StatusBadGateway, "502 the app did not answer\n")
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// NormalizeHost returns the hostname of a Host header: lower-case, without
// port or trailing dot.
func NormalizeHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// retryTransport retries a request once, on another upstream, when it could
// not be delivered: always when the connection was refused (nothing was
// sent), and for idempotent methods when the connection broke before an
// answer. Only requests without a body, or whose body can be replayed, are
// retried.
type retryTransport struct {
	base http.RoundTripper
	p    *Proxy
}

func (rt *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.base.RoundTrip(req)
	if err == nil {
		return resp, nil
	}
	t, _ := req.Context().Value(targetKey{}).(*target)
	if t == nil || req.Context().Err() != nil || !retryable(req, err) {
		return nil, err
	}
	// Resolve again: at a cut-over, the table has moved on to the new release.
	route, upstreams, ok := rt.p.resolver.Resolve(t.host, t.path)
	if !ok || len(upstreams) == 0 {
		return nil, err
	}
	next := rt.p.pick(route, upstreams, t.upstream)
	retry := req.Clone(req.Context())
	retry.URL.Host = next
	if req.GetBody != nil {
		body, gerr := req.GetBody()
		if gerr != nil {
			return nil, err
		}
		retry.Body = body
	}
	t.upstream = next
	return rt.base.RoundTrip(retry)
}

func retryable(req *http.Request, err error) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return idempotent(req.Method) && !isUpgrade(req)
}

func isUpgrade(req *http.Request) bool {
	return req.Header.Get("Upgrade") != ""
}
