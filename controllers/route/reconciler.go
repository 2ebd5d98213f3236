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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/edge"
)

// ControllerName names the Route controller in logs and metrics.
const ControllerName = "route"

// Field indexes of Routes.
const (
	hostnameIndex = "spec.hostname"
	appIndex      = "spec.appRef.name"
	secretIndex   = "spec.tls.secretName"
)

const (
	// DefaultPendingRecheck is how soon a Route that is not served is
	// observed again: DNS records and certificates change outside
	// Kubernetes.
	DefaultPendingRecheck = 15 * time.Second
	// DefaultReadyRecheck is how soon a served Route is observed again.
	DefaultReadyRecheck = time.Hour
	// lookupTimeout bounds one DNS lookup.
	lookupTimeout = 5 * time.Second
	// probeLabel replaces the '*' of a wildcard hostname to look it up.
	probeLabel = "bex-dns-probe"
)

// Resolver looks hostnames up in DNS; *net.Resolver implements it.
//
// LookupHost returns the IPv4 and IPv6 addresses host resolves to,
// following CNAME records. A name that does not exist or has no address
// returns an error; a *net.DNSError with IsNotFound set says so. It must be
// safe for concurrent use and give up when ctx ends.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
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
	Client client.Client
	// DNS looks hostnames up. With DNS nil or no EdgeAddresses, DNSReady
	// is Unknown: whether a hostname points at the edge is not checked.
	DNS Resolver
	// EdgeAddresses are the edge's public IP addresses, which a hostname
	// must resolve to.
	EdgeAddresses []string
	// AppDomain is the domain of default hostnames (<app>-<tenant>.<domain>,
	// a port is ignored): DNSReady's message offers a CNAME to the app's
	// default hostname. Empty offers A records only.
	AppDomain string
	// Certificates reads certificate state for spec.tls.mode Auto; nil
	// leaves CertificateReady Unknown for those Routes.
	Certificates CertificateStates
	// PendingRecheck and ReadyRecheck override DefaultPendingRecheck and
	// DefaultReadyRecheck.
	PendingRecheck, ReadyRecheck time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// SetupWithManager registers the reconciler. It watches Routes (a change
// to one wakes every Route claiming its hostname, so that the next oldest
// takes over a deleted one's), Apps (a Route is admitted once its App
// exists) and Secrets (spec.tls.secretName).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		return errors.New("route reconciler: Client is nil")
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
		{hostnameIndex, func(rt *platformv1alpha1.Route) string { return rt.Spec.Hostname }},
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
		For(&platformv1alpha1.Route{}).
		Watches(&platformv1alpha1.Route{}, handler.EnqueueRequestsFromMapFunc(r.sameHostname)).
		Watches(&platformv1alpha1.App{}, handler.EnqueueRequestsFromMapFunc(r.routesOf(appIndex))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.routesOf(secretIndex))).
		Complete(r)
}

// sameHostname maps a Route to every Route claiming its hostname.
func (r *Reconciler) sameHostname(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.requests(ctx, obj, client.MatchingFields{hostnameIndex: obj.(*platformv1alpha1.Route).Spec.Hostname})
}

// routesOf maps an object to the Routes of its namespace that name it in
// the indexed field.
func (r *Reconciler) routesOf(index string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		return r.requests(ctx, obj, client.InNamespace(obj.GetNamespace()), client.MatchingFields{index: obj.GetName()})
	}
}

func (r *Reconciler) requests(ctx context.Context, obj client.Object, opts ...client.ListOption) []reconcile.Request {
	var routes platformv1alpha1.RouteList
	if err := r.Client.List(ctx, &routes, opts...); err != nil {
		logf.FromContext(ctx).Error(err, "Listing routes to wake", "object", klog.KObj(obj))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(routes.Items))
	for _, rt := range routes.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rt.Namespace, Name: rt.Name}})
	}
	return reqs
}

// scope is what one reconcile observed.
type scope struct {
	route *platformv1alpha1.Route
	now   time.Time

	// claimedByOtherTenant is set when an older Route in another namespace
	// claims the hostname.
	claimedByOtherTenant bool
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
		if err := r.Client.Status().Patch(ctx, rt, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, fmt.Errorf("patching status: %w", err))
		}
	}()

	for _, observe := range []func(context.Context, *scope) error{
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

// observeClaims finds whether an older Route holds the hostname: the
// oldest claim decides the tenant that owns it, and within that tenant the
// oldest Route for each path prefix.
func (r *Reconciler) observeClaims(ctx context.Context, s *scope) error {
	var claims platformv1alpha1.RouteList
	if err := r.Client.List(ctx, &claims, client.MatchingFields{hostnameIndex: s.route.Spec.Hostname}); err != nil {
		return fmt.Errorf("listing routes for %s: %w", s.route.Spec.Hostname, err)
	}
	live := make([]*platformv1alpha1.Route, 0, len(claims.Items)+1)
	for i := range claims.Items {
		if c := &claims.Items[i]; c.DeletionTimestamp.IsZero() && c.UID != s.route.UID {
			live = append(live, c)
		}
	}
	live = append(live, s.route) // the cache may not have it yet
	slices.SortFunc(live, claimOrder)
	if live[0].Namespace != s.route.Namespace {
		s.claimedByOtherTenant = true
		return nil
	}
	prefix := pathPrefix(s.route)
	for _, c := range live {
		if c.Namespace == s.route.Namespace && pathPrefix(c) == prefix {
			if c.UID != s.route.UID {
				s.olderSibling = c
			}
			return nil
		}
	}
	return nil
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
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.route.Namespace, Name: name}, sec)
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
