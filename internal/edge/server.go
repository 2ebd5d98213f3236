package edge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"bex.co/bex/internal/httpserve"
)

// LetsEncrypt is the production ACME directory, bex-edge's default.
const LetsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"

// ACME configures certificates from an ACME CA (Let's Encrypt in
// production, pebble in tests).
type ACME struct {
	// Directory is the CA's directory URL.
	Directory string
	// Email is the account's contact address; may be empty.
	Email string
	// RootCAs, when set, are trusted for the directory's own HTTPS (pebble
	// serves it with its own CA).
	RootCAs *x509.CertPool
	// DNS01, when set, gives each wildcard Route one certificate for the
	// wildcard by the DNS-01 challenge.
	DNS01 *DNS01
}

// DNS01 is how the edge solves ACME DNS-01 challenges: the only ones a CA
// takes for a wildcard name. With it, each wildcard Route in the Table
// under Zone ("*.example.com") gets one certificate for the wildcard,
// obtained as soon as the Route is in the Table (not on a first handshake:
// a DNS change may take a while to show) and renewed in the background
// like any managed certificate; every name under the Route is served with
// it, so no name is charged to the tenant's CertificateBudget and the CA
// sees one order per Route instead of one per name. Until the certificate is
// obtained, handshakes for names under the Route fail; failures are
// recorded under the wildcard as for any hostname. Exact names, and names
// under wildcard Routes outside Zone, keep HTTP-01 and TLS-ALPN-01 on
// demand.
type DNS01 struct {
	// Zone is the DNS zone Provider can change: wildcard Routes in it
	// ("*.example.com" or "*.shop.example.com" in "example.com") get
	// wildcard certificates.
	Zone string
	// Provider publishes and deletes the challenge's TXT record,
	// _acme-challenge.<domain>.
	Provider certmagic.DNSProvider
	// Resolvers are the DNS servers (host:port) asked for the zone's SOA
	// and, before the CA is told to look, for the TXT record; empty means
	// the system's resolvers and then the zone's authoritative servers.
	Resolvers []string
}

// ServerOptions configures a Server.
type ServerOptions struct {
	// Table decides where requests go and which hostnames get certificates.
	Table *Table
	// Storage keeps certificates, ACME accounts and locks; replicas that
	// share it share certificates and obtain each one once.
	Storage certmagic.Storage
	// ACME or LocalCA is the issuer; exactly one must be set.
	ACME    *ACME
	LocalCA *LocalCA
	// HTTPPort and HTTPSPort are the ports clients reach the edge on: the
	// redirect to HTTPS names HTTPSPort (omitted when 443), and ACME
	// challenges are answered on both. 0 means 80 and 443.
	HTTPPort, HTTPSPort int
	// ListenHost is the address the ports are bound on; certmagic needs it
	// to know that the challenge ports are already served.
	ListenHost string
	// Transport reaches upstreams; see Options.
	Transport http.RoundTripper
	// Metrics, when set, receives the per-route metrics.
	Metrics prometheus.Registerer
	// Observe, when set, is called with each request once its response
	// has ended (the per-app series of internal/appmetrics). It must not
	// block.
	Observe func(Observation)
	// AccessLog writes one line per request to Log.
	AccessLog bool
	// Log receives errors, certificate events and, with AccessLog, requests.
	Log logr.Logger
	// Timeouts bound slow and idle clients on both ports; the zero value
	// takes Timeouts().
	Timeouts httpserve.Timeouts
	// CertificateBudget is how many new hostnames one tenant's Routes get
	// certificates for per BudgetWindow (see CertificateBudget); 0 sets no
	// limit. Apps' default hostnames are not counted: there is one per app,
	// nor names under a wildcard Route with ACME.DNS01 set: they share the
	// wildcard's certificate.
	CertificateBudget int
}

// Timeouts are the edge's limits on both ports:
//   - ReadHeader 10 s: clients send headers at once; one dripping them is
//     an attack (slow loris). A TLS handshake counts in it.
//   - Idle 120 s: a kept-alive connection waiting for its next request.
//   - Read and Write none: bodies stream between the client and the app,
//     both ways, for as long as the app wants (uploads, downloads,
//     server-sent events); a WebSocket leaves the server's deadlines when
//     the edge hijacks it. How long a request may take is the app's
//     business, as on Heroku and Render.
func Timeouts() httpserve.Timeouts {
	return httpserve.Timeouts{ReadHeader: 10 * time.Second, Idle: 120 * time.Second}
}

// Server is the edge: the Proxy behind an HTTP port that answers ACME
// challenges and redirects to HTTPS, and an HTTPS port whose certificates
// certmagic obtains on demand, only for hostnames the Table claims.
type Server struct {
	opts  ServerOptions
	proxy *Proxy
	cache *certmagic.Cache
	magic *certmagic.Config
	acme  *certmagic.ACMEIssuer
	certs *Certificates
	log   logr.Logger

	// wild obtains and renews wildcard Routes' certificates by DNS-01; nil
	// without ACME.DNS01. It shares cache with magic.
	wild *certmagic.Config
	// wildZone is ACME.DNS01.Zone, lower-case and without outer dots.
	wildZone string
	// wildClaims are the wildcards wild manages, each with the cancel of
	// the context its first obtaining runs in; only manageWildcards uses it.
	wildClaims map[string]context.CancelFunc

	// metrics is nil without ServerOptions.Metrics.
	metrics *Metrics

	// budget is nil without a CertificateBudget.
	budget *CertificateBudget
	// refusedMu guards refused: claim → the Until of the refusal last
	// recorded for it, so that a flood of refused names writes one record.
	refusedMu sync.Mutex
	refused   map[string]time.Time
}

// NewServer returns a Server; Close releases it.
func NewServer(opts ServerOptions) (*Server, error) {
	switch {
	case opts.Table == nil:
		return nil, errors.New("edge: no route table")
	case opts.Storage == nil:
		return nil, errors.New("edge: no certificate storage")
	case (opts.ACME == nil) == (opts.LocalCA == nil):
		return nil, errors.New("edge: set exactly one of ACME and LocalCA")
	case opts.ACME != nil && opts.ACME.DNS01 != nil && (opts.ACME.DNS01.Provider == nil || strings.Trim(opts.ACME.DNS01.Zone, ".") == ""):
		return nil, errors.New("edge: DNS-01 needs a DNS provider and its zone")
	case opts.CertificateBudget < 0:
		return nil, fmt.Errorf("edge: the certificate budget %d is negative (0 sets no limit)", opts.CertificateBudget)
	}
	if opts.HTTPPort == 0 {
		opts.HTTPPort = 80
	}
	if opts.HTTPSPort == 0 {
		opts.HTTPSPort = 443
	}
	log := opts.Log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	s := &Server{opts: opts, log: log, refused: map[string]time.Time{}}
	if opts.CertificateBudget > 0 {
		s.budget = &CertificateBudget{Names: opts.CertificateBudget, Storage: opts.Storage}
	}

	var observers []func(Observation)
	if opts.Metrics != nil {
		m, err := NewMetrics(opts.Metrics)
		if err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
		observers = append(observers, m.observe)
		s.metrics = m
	}
	if opts.Observe != nil {
		observers = append(observers, opts.Observe)
	}
	if opts.AccessLog {
		alog := log.WithName("access")
		observers = append(observers, func(o Observation) { accessLog(alog, o) })
	}
	popts := Options{Transport: opts.Transport, Log: log}
	if len(observers) > 0 {
		popts.Observe = func(o Observation) {
			for _, f := range observers {
				f(o)
			}
		}
	}
	proxy, err := New(opts.Table, popts)
	if err != nil {
		return nil, err
	}
	s.proxy = proxy

	s.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(c certmagic.Certificate) (*certmagic.Config, error) {
			if s.wild != nil && slices.ContainsFunc(c.Names, isWildcard) {
				return s.wild, nil
			}
			return s.magic, nil
		},
		Logger: zap.NewNop(),
	})
	s.magic = certmagic.New(s.cache, certmagic.Config{
		Storage: opts.Storage,
		Logger:  zap.NewNop(),
		OnDemand: &certmagic.OnDemandConfig{
			DecisionFunc: s.decide,
		},
		OnEvent: s.onEvent,
	})
	if opts.LocalCA != nil {
		s.magic.Issuers = []certmagic.Issuer{opts.LocalCA}
	} else {
		account := certmagic.ACMEIssuer{
			CA:           opts.ACME.Directory,
			TestCA:       opts.ACME.Directory,
			Email:        opts.ACME.Email,
			Agreed:       true,
			TrustedRoots: opts.ACME.RootCAs,
			Logger:       zap.NewNop(),
		}
		onDemand := account
		onDemand.ListenHost, onDemand.AltHTTPPort, onDemand.AltTLSALPNPort = opts.ListenHost, opts.HTTPPort, opts.HTTPSPort
		s.acme = certmagic.NewACMEIssuer(s.magic, onDemand)
		s.magic.Issuers = []certmagic.Issuer{s.acme}
		if d := opts.ACME.DNS01; d != nil {
			s.wild = certmagic.New(s.cache, certmagic.Config{Storage: opts.Storage, Logger: zap.NewNop(), OnEvent: s.onEvent})
			// The same directory and account: the certificates are stored
			// under the same issuer key as the others.
			wild := account
			wild.DNS01Solver = &certmagic.DNS01Solver{DNSManager: certmagic.DNSManager{
				DNSProvider: d.Provider, Resolvers: d.Resolvers, Logger: zap.NewNop(),
			}}
			s.wild.Issuers = []certmagic.Issuer{certmagic.NewACMEIssuer(s.wild, wild)}
			s.wildZone = strings.Trim(strings.ToLower(d.Zone), ".")
			s.wildClaims = map[string]context.CancelFunc{}
		}
	}
	keys := make([]string, 0, len(s.magic.Issuers))
	for _, is := range s.magic.Issuers {
		keys = append(keys, is.IssuerKey())
	}
	s.certs = &Certificates{Storage: opts.Storage, IssuerKeys: keys}
	return s, nil
}

// decide is certmagic's on-demand decision, made for a name with no
// certificate in memory, before it is loaded from the storage or obtained,
// and before each renewal: the name must be claimed, and a new name under
// a tenant's Route must fit the tenant's budget.
func (s *Server) decide(ctx context.Context, name string) error {
	name = strings.ToLower(name)
	c, ok := s.opts.Table.Claimant(name)
	if !ok {
		return fmt.Errorf("no Route or app claims %s", name)
	}
	if c.Route == "" || s.budget == nil || s.certs.Stored(ctx, name) {
		return nil
	}
	ok, until, err := s.budget.Spend(ctx, c.Tenant, name)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	s.recordRefusal(ctx, c, name, until)
	return fmt.Errorf("tenant %s got certificates for %d new names in the last %v, its budget; %s waits until %s",
		c.Tenant, s.budget.Names, BudgetWindow, name, until.UTC().Format(time.RFC3339))
}

// recordRefusal stores the refusal of name under the Route that claims it,
// once per Route and budget period on this replica.
func (s *Server) recordRefusal(ctx context.Context, c Claimant, name string, until time.Time) {
	s.refusedMu.Lock()
	seen := s.refused[c.Route].Equal(until)
	s.refused[c.Route] = until
	s.refusedMu.Unlock()
	if seen {
		return
	}
	s.log.Info("Certificate refused: the tenant's budget is spent", "host", name, "route", c.Route, "tenant", c.Tenant, "until", until)
	err := s.certs.RecordRefusal(context.WithoutCancel(ctx), c.Route, CertificateRefusal{
		At: time.Now(), Name: name, Tenant: c.Tenant, Budget: s.budget.Names, Window: BudgetWindow, Until: until,
	})
	if err != nil {
		s.log.Error(err, "Recording a refused certificate", "host", name, "route", c.Route)
		s.refusedMu.Lock()
		delete(s.refused, c.Route)
		s.refusedMu.Unlock()
	}
}

// Certificates returns the view of certificate state in the shared storage.
func (s *Server) Certificates() *Certificates { return s.certs }

// onEvent records certificate outcomes in the shared storage, where the
// Route controller reads them, and logs them.
func (s *Server) onEvent(ctx context.Context, event string, data map[string]any) error {
	name, _ := data["identifier"].(string)
	switch event {
	case "cert_obtained":
		s.log.Info("Certificate obtained", "host", name)
		if err := s.certs.ClearFailure(ctx, name); err != nil {
			s.log.Error(err, "Clearing a certificate failure", "host", name)
		}
	case "cert_failed":
		cause, _ := data["error"].(error)
		if cause == nil {
			cause = errors.New("unknown error")
		}
		s.log.Info("Certificate failed", "host", name, "err", cause.Error())
		if err := s.certs.RecordFailure(context.WithoutCancel(ctx), name, time.Now(), cause); err != nil {
			s.log.Error(err, "Recording a certificate failure", "host", name)
		}
	}
	return nil
}

// TLSConfig returns the HTTPS listener's configuration: certificates on
// demand, HTTP/2 and HTTP/1.1, and ACME's TLS-ALPN challenge.
func (s *Server) TLSConfig() *tls.Config {
	c := s.magic.TLSConfig()
	c.NextProtos = []string{"h2", "http/1.1", "acme-tls/1"}
	c.MinVersion = tls.VersionTLS12
	c.GetCertificate = s.getCertificate
	return c
}

// getCertificate serves a name under a wildcard Route with the wildcard's
// certificate when DNS-01 obtains those, and every other name (and every
// TLS-ALPN challenge) through the on-demand configuration.
func (s *Server) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if s.wild == nil || slices.Equal(hello.SupportedProtos, []string{"acme-tls/1"}) {
		return s.magic.GetCertificate(hello)
	}
	c, ok := s.opts.Table.Claimant(strings.ToLower(hello.ServerName))
	if !ok || !s.dns01Covers(c.Route) {
		return s.magic.GetCertificate(hello)
	}
	cert, err := s.wild.GetCertificate(hello)
	if err != nil {
		return nil, fmt.Errorf("the certificate for %s, which serves %s, is not obtained yet: %w", c.Route, hello.ServerName, err)
	}
	return cert, nil
}

func isWildcard(name string) bool { return strings.HasPrefix(name, "*.") }

// dns01Covers reports whether claim is a wildcard whose certificate DNS-01
// obtains: one in the zone the DNS provider changes.
func (s *Server) dns01Covers(claim string) bool {
	if s.wild == nil || !isWildcard(claim) {
		return false
	}
	domain := strings.TrimPrefix(claim, "*.")
	return domain == s.wildZone || strings.HasSuffix(domain, "."+s.wildZone)
}

// manageWildcards keeps wild managing exactly the wildcard Routes of the
// table, until ctx is done: a new one starts being obtained (or loaded from
// the storage, where another replica may have put it) at once, in the
// background, retried with backoff; a removed one stops being obtained and
// renewed.
func (s *Server) manageWildcards(ctx context.Context) {
	defer func() {
		for claim, cancel := range s.wildClaims {
			cancel()
			delete(s.wildClaims, claim)
		}
	}()
	for {
		changed := s.opts.Table.Changed()
		want := slices.DeleteFunc(s.opts.Table.WildcardClaims(), func(c string) bool { return !s.dns01Covers(c) })
		for claim, cancel := range s.wildClaims {
			if slices.Contains(want, claim) {
				continue
			}
			cancel()
			delete(s.wildClaims, claim)
			s.cache.RemoveManaged([]certmagic.SubjectIssuer{{Subject: claim}})
			s.log.Info("Wildcard certificate no longer managed", "claim", claim)
		}
		for _, claim := range want {
			if _, ok := s.wildClaims[claim]; ok {
				continue
			}
			cctx, cancel := context.WithCancel(ctx)
			if err := s.wild.ManageAsync(cctx, []string{claim}); err != nil {
				cancel()
				s.log.Error(err, "Managing a wildcard certificate", "claim", claim)
				continue
			}
			s.wildClaims[claim] = cancel
			s.log.Info("Wildcard certificate managed by DNS-01", "claim", claim)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// Forgetting what the edge keeps per claim: at most once per forgetGap,
// after the Table's Routes change and every forgetInterval (an app whose
// default hostname stops being served changes no Route).
const (
	forgetGap      = 5 * time.Second
	forgetInterval = time.Minute
)

// forgetGone drops the metrics series and round-robin counters of the
// claims the Table no longer serves, until ctx is done, so that ten
// thousand apps created and deleted leave nothing behind.
func (s *Server) forgetGone(ctx context.Context) {
	tick := time.NewTicker(forgetInterval)
	defer tick.Stop()
	for {
		changed := s.opts.Table.Changed()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
		s.forget()
		select {
		case <-ctx.Done():
			return
		case <-time.After(forgetGap):
		}
	}
}

// forget drops, once, what the edge keeps for claims the Table no longer
// serves.
func (s *Server) forget() {
	s.proxy.forget(s.opts.Table.claimed)
	if s.metrics != nil {
		if n := s.metrics.forget(s.opts.Table.Serves); n > 0 {
			s.log.V(1).Info("Metrics of gone routes deleted", "routes", n)
		}
	}
}

// HTTPSHandler serves the HTTPS port.
func (s *Server) HTTPSHandler() http.Handler { return s.proxy }

// HTTPHandler serves the HTTP port: ACME HTTP-01 challenges, Routes that
// asked for plain HTTP, a redirect to HTTPS for every other claimed
// hostname, and 404 for the rest.
func (s *Server) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.acme != nil && s.acme.HandleHTTPChallenge(w, r) {
			return
		}
		host := NormalizeHost(r.Host)
		route, upstreams, ok := s.opts.Table.Resolve(host, r.URL.Path)
		if !ok || route.PlainHTTP {
			// The proxy answers unknown hosts with its 404 page.
			s.proxy.serve(w, r, host, route, upstreams, ok)
			return
		}
		target := "https://" + host
		if s.opts.HTTPSPort != 443 {
			target += ":" + strconv.Itoa(s.opts.HTTPSPort)
		}
		target += r.URL.RequestURI()
		http.Redirect(w, r, target, http.StatusPermanentRedirect)
	})
}

// Serve serves the HTTP and HTTPS ports until ctx is done, then shuts both
// down, letting requests in flight finish for up to 10 s.
func (s *Server) Serve(ctx context.Context, httpL, httpsL net.Listener) error {
	t := s.opts.Timeouts
	if t == (httpserve.Timeouts{}) {
		t = Timeouts()
	}
	httpSrv := t.Server(s.HTTPHandler())
	httpsSrv := t.Server(s.HTTPSHandler())
	httpsSrv.TLSConfig = s.TLSConfig()
	g, gctx := errgroup.WithContext(ctx)
	if s.wild != nil {
		g.Go(func() error { s.manageWildcards(gctx); return nil })
	}
	g.Go(func() error { s.forgetGone(gctx); return nil })
	g.Go(func() error { return ignoreClosed(httpSrv.Serve(httpL)) })
	g.Go(func() error { return ignoreClosed(httpsSrv.ServeTLS(httpsL, "", "")) })
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(httpSrv.Shutdown(sctx), httpsSrv.Shutdown(sctx))
	})
	return g.Wait()
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops certificate maintenance.
func (s *Server) Close() { s.cache.Stop() }

// ACMEIssuerKey is the issuer key of certificates from the ACME directory:
// where certmagic stores them, for readers of the storage such as the Route
// controller.
func ACMEIssuerKey(directory string) string {
	return (&certmagic.ACMEIssuer{CA: directory}).IssuerKey()
}
