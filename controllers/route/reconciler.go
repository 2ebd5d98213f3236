package route

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/edge"
)

// ControllerName names the Route controller in logs and metrics.
const ControllerName = "route"

// Field indexes of Routes.
const (
	// hostIndex keys a Route by its hostname.
	hostIndex = "spec.hostname"
	// coverIndex keys a Route by the domain a wildcard one label above its
	// hostname is over: example.com for www.example.com and for
	// *.example.com. Every Route whose hostname overlaps one's has its key.
	coverIndex  = "spec.hostname.cover"
	appIndex    = "spec.appRef.name"
	secretIndex = "spec.tls.secretName"
)

const (
	// DefaultPendingRecheck is how soon a Route that is not served is
	// observed again: DNS records and certificates change outside
	// Kubernetes.
	DefaultPendingRecheck = 15 * time.Second
	// DefaultReadyRecheck is how soon a served Route is observed again.
	DefaultReadyRecheck = time.Hour
	// DefaultMaxConcurrentReconciles is how many Routes are reconciled at
	// once when the Reconciler does not say: a reconcile mostly waits on
	// DNS and the apiserver.
	DefaultMaxConcurrentReconciles = 8
	// lookupTimeout bounds one DNS lookup.
	lookupTimeout = 5 * time.Second
	// probeLabel replaces the '*' of a wildcard hostname to look it up.
	probeLabel = "bex-dns-probe"
)

// Resolver looks hostnames up in DNS; *net.Resolver implements it.
//
// LookupHost returns the IPv4 and IPv6 addresses host resolves to,
// following CNAME records. LookupTXT returns the TXT records of name, the
// strings of each joined. A name that does not exist or has no such record
// returns an error; a *net.DNSError with IsNotFound set says so. It must be
// safe for concurrent use and give up when ctx ends.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// CertificateStates says what the edge's shared certificate storage holds
// for a hostname; *edge.Certificates implements it.
//
// State returns the zero state for a hostname nobody obtained a certificate
// for, and an error only when the storage cannot be read. It must be safe
// for concurrent use.
type CertificateStates interface {
	State(ctx context.Context, host string) (edge.CertificateState, error)
}

var (
	_ Resolver          = (*net.Resolver)(nil)
	_ CertificateStates = (*edge.Certificates)(nil)
)

// Reconciler reconciles Routes.
type Reconciler struct {
	// Client reads Routes and Apps (cached); it reads no Secret.
	Client client.Client
	// Reader reads spec.tls.secretName's Secret: the manager's APIReader,
	// uncached, so that the manager holds no Secret's data (it watches
	// Secrets' metadata only). One GET per reconcile of a Route with a
	// Secret of its own.
	Reader client.Reader
	// DNS looks hostnames up: the TXT records that prove a tenant owns a
	// hostname, and where the hostname points. Required. With no
	// EdgeAddresses, DNSReady is Unknown: whether a hostname points at the
	// edge is not checked.
	DNS Resolver
	// EdgeAddresses are the edge's public IP addresses, which a hostname
	// must resolve to.
	EdgeAddresses []string
	// AppDomain is the domain of default hostnames (<app>-<tenant>.<domain>,
	// a port is ignored): DNSReady's message offers a CNAME to the app's
	// default hostname (empty offers A records only). The domain and the
	// names under it are the platform's: a Route may claim only a default
	// hostname of its own tenant's Apps there, with no TXT record. It is
	// also part of every ownership token, which the API must compute with
	// the same domain.
	AppDomain string
	// ReservedHostnames are more names the platform serves itself (the
	// API, dashboard, git and registry hosts): no Route is admitted for
	// them (domains.Policy.Reserved).
	ReservedHostnames []string
	// Certificates reads certificate state for spec.tls.mode Auto; nil
	// leaves CertificateReady Unknown for those Routes.
	Certificates CertificateStates
	// PendingRecheck and ReadyRecheck override DefaultPendingRecheck and
	// DefaultReadyRecheck.
	PendingRecheck, ReadyRecheck time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxConcurrentReconciles is how many Routes are reconciled at once
	// (one Route is never reconciled twice at once); 0 means
	// DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
}

// SetupWithManager registers the reconciler. It watches Routes (a change
// to one wakes every Route whose hostname overlaps its own, so that the
// next oldest takes over a deleted one's), Apps (a Route is admitted once its App
// exists) and the metadata of Secrets (spec.tls.secretName: a change of a
// Secret's data changes its resourceVersion, so it is seen too).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Reader == nil {
		return errors.New("route reconciler: Client and Reader are required")
	}
	if r.DNS == nil {
		return errors.New("route reconciler: DNS is nil: hostnames are proved by DNS TXT records")
	}
	for _, a := range r.EdgeAddresses {
		if _, err := netip.ParseAddr(a); err != nil {
			return fmt.Errorf("route reconciler: edge address %q is not an IP address", a)
		}
	}
	for _, ix := range []struct {
		field string
		value func(*platformv1alpha1.Route) string
	}{
		{hostIndex, func(rt *platformv1alpha1.Route) string { return rt.Spec.Hostname }},
		{coverIndex, func(rt *platformv1alpha1.Route) string { return coverKey(rt.Spec.Hostname) }},
		{appIndex, func(rt *platformv1alpha1.Route) string { return rt.Spec.AppRef.Name }},
		{secretIndex, func(rt *platformv1alpha1.Route) string { return rt.Spec.TLS.SecretName }},
	} {
		err := mgr.GetFieldIndexer().IndexField(context.Background(), &platformv1alpha1.Route{}, ix.field, func(o client.Object) []string {
			if v := ix.value(o.(*platformv1alpha1.Route)); v != "" {
				return []string{v}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("indexing routes by %s: %w", ix.field, err)
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)}).
		For(&platformv1alpha1.Route{}).
		Watches(&platformv1alpha1.Route{}, handler.EnqueueRequestsFromMapFunc(r.overlapping)).
		Watches(&platformv1alpha1.App{}, handler.EnqueueRequestsFromMapFunc(r.routesOf(appIndex))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.routesOf(secretIndex)), builder.OnlyMetadata).
		Complete(r)
}

// overlapping maps a Route to every Route whose hostname overlaps its own:
// for a name, the Routes of the name and of the wildcard one label up
// (two index lookups, however many names share the domain); for a
// wildcard, every Route under it.
func (r *Reconciler) overlapping(ctx context.Context, obj client.Object) []reconcile.Request {
	host := obj.(*platformv1alpha1.Route).Spec.Hostname
	var routes []platformv1alpha1.Route
	var err error
	if isWildcard(host) {
		routes, err = r.list(ctx, client.MatchingFields{coverIndex: coverKey(host)})
	} else {
		routes, err = r.withHostnames(ctx, host, wildcardOver(host))
	}
	if err != nil {
		logf.FromContext(ctx).Error(err, "Listing routes to wake", "object", klog.KObj(obj))
		return nil
	}
	return requestsFor(routes, func(rt *platformv1alpha1.Route) bool { return domains.Overlap(host, rt.Spec.Hostname) })
}

// routesOf maps an object to the Routes of its namespace that name it in
// the indexed field.
func (r *Reconciler) routesOf(index string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		routes, err := r.list(ctx, client.InNamespace(obj.GetNamespace()), client.MatchingFields{index: obj.GetName()})
		if err != nil {
			logf.FromContext(ctx).Error(err, "Listing routes to wake", "object", klog.KObj(obj))
			return nil
		}
		return requestsFor(routes, nil)
	}
}

// list lists the Routes of opts.
func (r *Reconciler) list(ctx context.Context, opts ...client.ListOption) ([]platformv1alpha1.Route, error) {
	var list platformv1alpha1.RouteList
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// withHostnames lists the Routes of each hostname, through hostIndex.
func (r *Reconciler) withHostnames(ctx context.Context, hosts ...string) ([]platformv1alpha1.Route, error) {
	var out []platformv1alpha1.Route
	for _, h := range hosts {
		routes, err := r.list(ctx, client.MatchingFields{hostIndex: h})
		if err != nil {
			return nil, err
		}
		out = append(out, routes...)
	}
	return out, nil
}

// requestsFor returns the requests of the routes that keep accepts (nil:
// all).
func requestsFor(routes []platformv1alpha1.Route, keep func(*platformv1alpha1.Route) bool) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(routes))
	for i := range routes {
		if rt := &routes[i]; keep == nil || keep(rt) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rt.Namespace, Name: rt.Name}})
		}
	}
	return reqs
}

func isWildcard(host string) bool { return strings.HasPrefix(host, "*.") }

// wildcardOver is the wildcard one label above host: *.example.com for
// www.example.com.
func wildcardOver(host string) string { return "*." + coverKey(host) }

// coverKey is a hostname's coverIndex key: the hostname without its first
// label.
func coverKey(host string) string {
	_, parent, _ := strings.Cut(host, ".")
	return parent
}

// scope is what one reconcile observed.
type scope struct {
	route *platformv1alpha1.Route
	now   time.Time

	// refusal is why no tenant may have the hostname; nil when any may.
	refusal *domains.Refusal
	// defaultApp is set when the hostname is under the app domain: the
	// App of the Route's tenant whose default hostname it is.
	defaultApp string
	// token is the TXT value that proves the Route's tenant owns the
	// hostname.
	token string
	// txtValues are the TXT values at the hostname's challenge name, or
	// txtErr why DNS did not answer.
	txtValues []string
	txtErr    error
	// verified is set when the tenant proved it owns the hostname (or,
	// DNS not answering, had proved it when last looked).
	verified bool
	// claimedByOtherTenant is set when another tenant holds the hostname
	// or one that overlaps it: its Route is verified, and older or this one
	// is not verified. otherClaim is that tenant's hostname when it is not
	// this Route's own: a wildcard over it, or a name the wildcard covers.
	claimedByOtherTenant bool
	otherClaim           string
	// olderSibling is the older Route of the same namespace for the same
	// hostname and path prefix; nil when there is none.
	olderSibling *platformv1alpha1.Route
	// app is the App the Route names; nil when it does not exist.
	app *platformv1alpha1.App

	// dnsChecked is set when the hostname was looked up: lookupName (a
	// probe name for a wildcard) resolved to resolved, or failed with
	// lookupErr.
	dnsChecked bool
	lookupName string
	resolved   []string
	lookupErr  error
	// edgeAddresses are what the hostname must resolve to; cnameTarget is
	// the app's default hostname, "" when unknown.
	edgeAddresses []string
	cnameTarget   string

	// certObserved is set when cert holds the storage's state (mode Auto).
	certObserved bool
	cert         edge.CertificateState
	// secretProblem says what is wrong with spec.tls.secretName's Secret
	// (mode Secret), "" when it holds a certificate for the hostname valid
	// until secretNotAfter.
	secretProblem  string
	secretNotAfter time.Time
}

// Reconcile observes the Route and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	rt := &platformv1alpha1.Route{}
	if err := r.Client.Get(ctx, req.NamespacedName, rt); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log := logf.FromContext(ctx).WithValues("route", klog.KObj(rt), "hostname", rt.Spec.Hostname)
	ctx = logf.IntoContext(ctx, log)
	if !rt.DeletionTimestamp.IsZero() {
		// A Route holds nothing outside its object: no finalizer, nothing
		// to clean up. The Routes claiming its hostname are woken by the
		// watch.
		return reconcile.Result{}, nil
	}

	base := rt.DeepCopy()
	s := &scope{route: rt, now: r.now()}
	defer func() {
		if retErr == nil {
			rt.Status.ObservedGeneration = rt.Generation
		}
		if equality.Semantic.DeepEqual(base.Status, rt.Status) {
			return // nothing to write
		}
		if err := r.Client.Status().Patch(ctx, rt, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, fmt.Errorf("patching status: %w", err))
		}
	}()

	for _, observe := range []func(context.Context, *scope) error{
		r.observeOwnership,
		r.observeClaims,
		r.observeApp,
		r.observeDNS,
		r.observeCertificate,
	} {
		if err := observe(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
	}
	setConditions(s)
	return reconcile.Result{RequeueAfter: r.recheckAfter(rt)}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// recheckAfter is when a Route is observed again: soon unless it is
// served.
func (r *Reconciler) recheckAfter(rt *platformv1alpha1.Route) time.Duration {
	if isReady(rt) {
		return cmp.Or(r.ReadyRecheck, DefaultReadyRecheck)
	}
	return cmp.Or(r.PendingRecheck, DefaultPendingRecheck)
}

// claimOrder orders the Routes claiming a hostname: oldest first, then by
// namespace and name.
func claimOrder(a, b *platformv1alpha1.Route) int {
	if c := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// policy is the platform's rule for hostnames.
func (r *Reconciler) policy() domains.Policy {
	return domains.Policy{AppDomain: r.AppDomain, Reserved: r.ReservedHostnames}
}

// observeOwnership checks the hostname against the platform's names and
// public suffixes and looks its TXT record up: the facts every claim on
// the hostname is judged by.
func (r *Reconciler) observeOwnership(ctx context.Context, s *scope) error {
	host, p := s.route.Spec.Hostname, r.policy()
	s.token = domains.Token(r.AppDomain, s.route.Namespace, host)
	if s.refusal = p.Check(host); s.refusal != nil {
		return nil
	}
	if d := domainOnly(r.AppDomain); d != "" && strings.HasSuffix(host, "."+d) {
		app, ok := p.DefaultHostnameApp(s.route.Namespace, host)
		if !ok {
			s.refusal = &domains.Refusal{Reason: platformv1alpha1.RouteHostnameReservedReason,
				Message: fmt.Sprintf("%s is under the platform's domain %s, where a Route may claim only the default hostname of an app of its own tenant (<app>-%s.%s); use a domain of your own", host, d, s.route.Namespace, d)}
			return nil
		}
		s.defaultApp = app
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	s.txtValues, s.txtErr = domains.TXTValues(lctx, r.DNS, host)
	if s.txtErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// claimVerified reports whether the tenant of claim c proved it owns the
// hostname, from the facts observeOwnership gathered. When DNS did not
// answer, a claim keeps what it was last found to be.
func (r *Reconciler) claimVerified(ctx context.Context, s *scope, c *platformv1alpha1.Route) (bool, error) {
	host := s.route.Spec.Hostname
	switch {
	case s.refusal != nil:
		return false, nil
	case s.defaultApp != "":
		app, ok := r.policy().DefaultHostnameApp(c.Namespace, host)
		if !ok {
			return false, nil
		}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: app}, &platformv1alpha1.App{})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reading app %s/%s: %w", c.Namespace, app, err)
		}
		return true, nil
	case s.txtErr != nil:
		return meta.IsStatusConditionTrue(c.Status.Conditions, platformv1alpha1.RouteDomainVerifiedCondition), nil
	}
	return domains.Verified(s.txtValues, r.AppDomain, c.Namespace, host), nil
}

// observeClaims finds which tenant holds the hostname and whether an older
// Route of the same tenant routes the same path prefix. The Routes whose
// hostnames overlap (the same name, or a wildcard and a name it covers)
// claim the same requests; a claim counts only when its tenant proved it
// owns the claim's hostname. Claims are granted oldest first, each unless
// it overlaps a claim of another tenant granted before it: the earlier
// claim holds, whether the two name the same hostname or one is a wildcard
// over the other, and a claim that lost holds nothing against later ones.
// A tenant that proved nothing holds nothing, however old its Route. Within
// the holding tenant the oldest Route for each path prefix is admitted.
//
// This Route's proof is looked up here (claimVerified); that of a Route for
// another hostname is what its own reconcile observed last, its
// DomainVerified condition of its current generation.
func (r *Reconciler) observeClaims(ctx context.Context, s *scope) error {
	host := s.route.Spec.Hostname
	near, err := r.claimsNear(ctx, host)
	if err != nil {
		return fmt.Errorf("listing routes near %s: %w", host, err)
	}
	claims := make([]*platformv1alpha1.Route, 0, len(near)+1)
	for i := range near {
		if c := &near[i]; c.DeletionTimestamp.IsZero() && c.UID != s.route.UID {
			claims = append(claims, c)
		}
	}
	claims = append(claims, s.route) // the cache may not have it yet
	slices.SortFunc(claims, claimOrder)
	verified := map[string]bool{} // namespace → proved this Route's hostname
	proved := func(c *platformv1alpha1.Route) (bool, error) {
		if c.Spec.Hostname != host {
			return provedLast(c), nil
		}
		if v, seen := verified[c.Namespace]; seen {
			return v, nil
		}
		v, err := r.claimVerified(ctx, s, c)
		verified[c.Namespace] = v
		return v, err
	}
	var granted []*platformv1alpha1.Route
	for _, c := range claims {
		ok, err := proved(c)
		if err != nil {
			return err
		}
		if ok && !slices.ContainsFunc(granted, func(g *platformv1alpha1.Route) bool {
			return g.Namespace != c.Namespace && domains.Overlap(g.Spec.Hostname, c.Spec.Hostname)
		}) {
			granted = append(granted, c)
		}
	}
	s.verified = verified[s.route.Namespace]
	if i := slices.IndexFunc(granted, func(g *platformv1alpha1.Route) bool {
		return g.Namespace != s.route.Namespace && domains.Overlap(g.Spec.Hostname, host)
	}); i >= 0 {
		s.claimedByOtherTenant = true
		if other := granted[i].Spec.Hostname; other != host {
			s.otherClaim = other
		}
		return nil
	}
	prefix := pathPrefix(s.route)
	for _, c := range claims {
		if c.Namespace == s.route.Namespace && c.Spec.Hostname == host && pathPrefix(c) == prefix {
			if c.UID != s.route.UID {
				s.olderSibling = c
			}
			return nil
		}
	}
	return nil
}

// claimsNear lists the Routes that bear on who holds host: every Route
// that overlaps it, and every Route that overlaps one of those. For a
// wildcard those are all the Routes under its domain. For a name they are
// the Routes of the name and of the wildcard one label up, and the other
// names under that wildcard only when one of its Routes proved its
// hostname: only then can the wildcard be granted, and whether it is
// depends on them. So a Route's reconcile reads its own hostname's claims,
// not every name that shares its domain (ten thousand tenants' names under
// one domain would make each reconcile read them all).
func (r *Reconciler) claimsNear(ctx context.Context, host string) ([]platformv1alpha1.Route, error) {
	cover := client.MatchingFields{coverIndex: coverKey(host)}
	if isWildcard(host) {
		return r.list(ctx, cover)
	}
	routes, err := r.withHostnames(ctx, host, wildcardOver(host))
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(routes, func(rt platformv1alpha1.Route) bool { return isWildcard(rt.Spec.Hostname) && provedLast(&rt) }) {
		return r.list(ctx, cover)
	}
	return routes, nil
}

// provedLast reports whether the last reconcile of rt, at its current
// generation, found that its tenant proved its hostname.
func provedLast(rt *platformv1alpha1.Route) bool {
	cond := meta.FindStatusCondition(rt.Status.Conditions, platformv1alpha1.RouteDomainVerifiedCondition)
	return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == rt.Generation
}

func pathPrefix(rt *platformv1alpha1.Route) string { return cmp.Or(rt.Spec.PathPrefix, "/") }

func (r *Reconciler) observeApp(ctx context.Context, s *scope) error {
	app := &platformv1alpha1.App{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.route.Namespace, Name: s.route.Spec.AppRef.Name}, app)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading app %s: %w", s.route.Spec.AppRef.Name, err)
	}
	s.app = app
	if d := domainOnly(r.AppDomain); d != "" {
		s.cnameTarget = app.Name + "-" + app.Namespace + "." + d
	}
	return nil
}

// domainOnly strips a port and dots from an app domain.
func domainOnly(d string) string {
	if h, _, err := net.SplitHostPort(d); err == nil {
		d = h
	}
	return strings.Trim(strings.ToLower(d), ".")
}

func (r *Reconciler) observeDNS(ctx context.Context, s *scope) error {
	if r.DNS == nil || len(r.EdgeAddresses) == 0 {
		return nil
	}
	s.dnsChecked, s.edgeAddresses = true, r.EdgeAddresses
	s.lookupName = s.route.Spec.Hostname
	if rest, ok := strings.CutPrefix(s.lookupName, "*."); ok {
		s.lookupName = probeLabel + "." + rest
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	s.resolved, s.lookupErr = r.DNS.LookupHost(lctx, s.lookupName)
	if s.lookupErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

func (r *Reconciler) observeCertificate(ctx context.Context, s *scope) error {
	switch s.route.Spec.TLS.Mode {
	case platformv1alpha1.TLSModeNone:
		return nil
	case platformv1alpha1.TLSModeSecret:
		return r.observeSecret(ctx, s)
	}
	if r.Certificates == nil {
		return nil
	}
	st, err := r.Certificates.State(ctx, s.route.Spec.Hostname)
	if err != nil {
		return fmt.Errorf("reading the certificate state of %s: %w", s.route.Spec.Hostname, err)
	}
	s.certObserved, s.cert = true, st
	return nil
}

// observeSecret checks that spec.tls.secretName holds a certificate and key
// that serve the hostname now.
func (r *Reconciler) observeSecret(ctx context.Context, s *scope) error {
	name := s.route.Spec.TLS.SecretName
	sec := &corev1.Secret{}
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: s.route.Namespace, Name: name}, sec)
	switch {
	case apierrors.IsNotFound(err):
		s.secretProblem = fmt.Sprintf("Secret %q not found: create a kubernetes.io/tls Secret with tls.crt and tls.key", name)
		return nil
	case err != nil:
		return fmt.Errorf("reading secret %s: %w", name, err)
	}
	s.secretProblem, s.secretNotAfter = checkCertificate(sec, s.route.Spec.Hostname, s.now)
	return nil
}

// checkCertificate says what is wrong with sec as the certificate of host
// at now, or returns "" and the certificate's expiry.
func checkCertificate(sec *corev1.Secret, host string, now time.Time) (string, time.Time) {
	pair, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return fmt.Sprintf("Secret %q does not hold a certificate and its key in tls.crt and tls.key: %v", sec.Name, err), time.Time{}
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Sprintf("Secret %q: parsing tls.crt: %v", sec.Name, err), time.Time{}
	}
	if strings.HasPrefix(host, "*.") {
		if !slices.Contains(leaf.DNSNames, host) {
			return fmt.Sprintf("Secret %q: the certificate is not for %s (it is for %s)", sec.Name, host, strings.Join(leaf.DNSNames, ", ")), time.Time{}
		}
	} else if err := leaf.VerifyHostname(host); err != nil {
		return fmt.Sprintf("Secret %q: the certificate is not for %s (it is for %s)", sec.Name, host, strings.Join(leaf.DNSNames, ", ")), time.Time{}
	}
	if now.After(leaf.NotAfter) {
		return fmt.Sprintf("Secret %q: the certificate expired at %s", sec.Name, leaf.NotAfter.UTC().Format(time.RFC3339)), time.Time{}
	}
	if now.Before(leaf.NotBefore) {
		return fmt.Sprintf("Secret %q: the certificate is valid only from %s", sec.Name, leaf.NotBefore.UTC().Format(time.RFC3339)), time.Time{}
	}
	return "", leaf.NotAfter
}
