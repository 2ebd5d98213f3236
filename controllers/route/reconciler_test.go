package route

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/internal/dnstest"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/edge"
	"bex.co/bex/test/platformtest"
)

// newScheme has the kinds the Route controller reads (package controllers
// has the same, but imports this one).
func newScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := platformv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// runController runs r, with a manager of its own, against the apiserver
// at cfg until ctx ends; it returns a client for the test and a function
// that creates the test's objects or ends the test.
func runController(ctx context.Context, t *testing.T, cfg *rest.Config, r *Reconciler) (client.Client, func(...client.Object)) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 newScheme(t),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Each test of the package runs its own manager of this controller.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Client, r.Reader = mgr.GetClient(), mgr.GetAPIReader()
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()

	c, err := client.New(cfg, client.Options{Scheme: newScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c, func(objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
			}
		}
	}
}

const (
	edgeAddr  = "192.0.2.10"
	issuerKey = "acme-v02.api.letsencrypt.org-directory"
	appDomain = "apps.bex.test:8080"
)

// prove publishes the TXT values that prove the tenants own host, as its
// owner would in its DNS zone.
func prove(dns *dnstest.Server, host string, tenants ...string) {
	vals := make([]string, 0, len(tenants))
	for _, t := range tenants {
		vals = append(vals, domains.Token(appDomain, t, host))
	}
	dns.SetTXT(domains.ChallengeName(host), vals...)
}

// TestRouteController runs the Route controller against a real apiserver,
// a real DNS server on loopback and a real certmagic file storage read
// through edge.Certificates. Tenant A's hostnames carry its TXT records
// from the start. Rechecks are an hour apart, so that every change seen
// here comes from a watch: a deleted Route hands its hostname over, an App
// that appears admits its Routes, a Secret that appears makes its
// certificate ready. The manager lists and watches no Secret but their
// metadata: it holds no Secret's data.
func TestRouteController(t *testing.T) {
	cp := cptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dns := dnstest.Start(t)
	for host, addr := range map[string]string{
		"www.example.test":                edgeAddr,
		"api.example.test":                "198.51.100.7",
		"fail.example.test":               edgeAddr,
		"plain.example.test":              edgeAddr,
		"own.example.test":                edgeAddr,
		"bex-dns-probe.wild.example.test": edgeAddr,
	} {
		dns.SetA(host, addr)
	}
	for _, host := range []string{"www.example.test", "api.example.test", "fail.example.test", "plain.example.test", "own.example.test", "*.wild.example.test"} {
		prove(dns, host, "rt-a")
	}
	certs := &edge.Certificates{Storage: &certmagic.FileStorage{Path: t.TempDir()}, IssuerKeys: []string{issuerKey}}
	crt, _ := selfSigned(t, time.Now().Add(-time.Hour), time.Now().Add(60*24*time.Hour), "www.example.test")
	if err := certs.Storage.Store(ctx, certmagic.StorageKeys.SiteCert(issuerKey, "www.example.test"), crt); err != nil {
		t.Fatal(err)
	}
	caAnswer := errors.New("acme: error: 403 :: POST :: urn:ietf:params:acme:error:unauthorized :: Invalid response from http://fail.example.test/.well-known/acme-challenge/abc: 404")
	if err := certs.RecordFailure(ctx, "fail.example.test", time.Now(), caAnswer); err != nil {
		t.Fatal(err)
	}

	cfg := rest.CopyConfig(cp.RESTConfig())
	var secretLists platformtest.SecretLists
	cfg.Wrap(secretLists.Wrap)
	c, create := runController(ctx, t, cfg, &Reconciler{
		DNS: dns.Resolver(), EdgeAddresses: []string{edgeAddr}, AppDomain: appDomain,
		Certificates: certs, PendingRecheck: time.Hour, ReadyRecheck: time.Hour,
	})
	app := func(ns, name string) *platformv1alpha1.App {
		return &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	route := func(ns, name, host, appName, path string, mode platformv1alpha1.TLSMode) *platformv1alpha1.Route {
		return &platformv1alpha1.Route{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: platformv1alpha1.RouteSpec{
				Hostname: host, AppRef: platformv1alpha1.AppReference{Name: appName}, PathPrefix: path,
				TLS: platformv1alpha1.RouteTLS{Mode: mode},
			},
		}
	}
	create(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rt-a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rt-b"}},
		app("rt-a", "web"), app("rt-b", "web"),
	)

	// Tenant A's Route: admitted, DNS points here, certificate stored.
	www := route("rt-a", "www", "www.example.test", "web", "", platformv1alpha1.TLSModeAuto)
	create(www)
	got := waitCondition(ctx, t, c, www, platformv1alpha1.RouteReadyCondition, platformv1alpha1.RouteServingReason, "Serving https://www.example.test.")
	for _, want := range []struct{ typ, reason string }{
		{platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason},
		{platformv1alpha1.RouteDomainVerifiedCondition, platformv1alpha1.RouteTXTRecordFoundReason},
		{platformv1alpha1.RouteDNSReadyCondition, platformv1alpha1.RouteDNSPointingHereReason},
		{platformv1alpha1.RouteCertificateReadyCondition, platformv1alpha1.RouteCertificateIssuedReason},
	} {
		if cond := meta.FindStatusCondition(got.Status.Conditions, want.typ); cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != want.reason {
			t.Errorf("%s = %+v, want True/%s", want.typ, cond, want.reason)
		}
	}
	if got.Status.ObservedGeneration != got.Generation || got.Spec.PathPrefix != "/" {
		t.Errorf("observedGeneration %d, generation %d, pathPrefix %q", got.Status.ObservedGeneration, got.Generation, got.Spec.PathPrefix)
	}

	// The same tenant may route another path prefix of its hostname; a
	// second Route for the same prefix is refused.
	wwwAPI := route("rt-a", "www-api", "www.example.test", "web", "/api", platformv1alpha1.TLSModeAuto)
	wwwDup := route("rt-a", "www-dup", "www.example.test", "web", "/", platformv1alpha1.TLSModeAuto)
	create(wwwAPI, wwwDup)
	waitCondition(ctx, t, c, wwwAPI, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason, "www.example.test/api routes to process web of app web")
	waitCondition(ctx, t, c, wwwDup, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteHostnameClaimedReason, "Route www, which is older")

	// Tenant B claims A's hostname without proof: refused, without naming
	// tenant A.
	stolen := route("rt-b", "www", "www.example.test", "web", "/shop", platformv1alpha1.TLSModeAuto)
	create(stolen)
	got = waitCondition(ctx, t, c, stolen, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteHostnameClaimedReason, "already in use by another tenant")
	waitCondition(ctx, t, c, stolen, platformv1alpha1.RouteDomainVerifiedCondition, platformv1alpha1.RouteAwaitingTXTRecordReason, domains.Token(appDomain, "rt-b", "www.example.test"))
	if cond := meta.FindStatusCondition(got.Status.Conditions, platformv1alpha1.RouteAdmittedCondition); strings.Contains(cond.Message, "rt-a") {
		t.Errorf("the refusal names the other tenant: %q", cond.Message)
	}
	waitCondition(ctx, t, c, stolen, platformv1alpha1.RouteReadyCondition, platformv1alpha1.RouteNotServingReason, "Admitted is False (HostnameClaimed)")

	// A Route to an App that does not exist yet, on a hostname that points
	// elsewhere; the App appearing admits it.
	api := route("rt-a", "api", "api.example.test", "shop", "", platformv1alpha1.TLSModeAuto)
	create(api)
	waitCondition(ctx, t, c, api, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAppNotFoundReason, `App "shop" does not exist`)
	waitCondition(ctx, t, c, api, platformv1alpha1.RouteDNSReadyCondition, platformv1alpha1.RouteDNSNotPointingHereReason,
		"DNS not pointing here: api.example.test resolves to 198.51.100.7")
	create(app("rt-a", "shop"))
	got = waitCondition(ctx, t, c, api, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason, "")
	if cond := meta.FindStatusCondition(got.Status.Conditions, platformv1alpha1.RouteDNSReadyCondition); !strings.Contains(cond.Message, "create a CNAME record for api.example.test to shop-rt-a.apps.bex.test (or, at the apex of a zone, A/AAAA records to 192.0.2.10)") {
		t.Errorf("DNSReady message %q does not say which record to create", cond.Message)
	}
	waitCondition(ctx, t, c, api, platformv1alpha1.RouteReadyCondition, platformv1alpha1.RouteNotServingReason, "DNSReady is False")

	// The CA refused the last attempt: its answer is shown.
	fail := route("rt-a", "fail", "fail.example.test", "web", "", platformv1alpha1.TLSModeAuto)
	// No TLS: served over HTTP as soon as DNS points here; a wildcard is
	// looked up through a probe name.
	plain := route("rt-a", "plain", "plain.example.test", "web", "", platformv1alpha1.TLSModeNone)
	wild := route("rt-a", "wild", "*.wild.example.test", "web", "", platformv1alpha1.TLSModeNone)
	// Nothing issued yet.
	own := route("rt-a", "own", "own.example.test", "web", "", platformv1alpha1.TLSModeAuto)
	create(fail, plain, wild, own)
	waitCondition(ctx, t, c, fail, platformv1alpha1.RouteCertificateReadyCondition, platformv1alpha1.RouteChallengeFailedReason,
		"urn:ietf:params:acme:error:unauthorized :: Invalid response from http://fail.example.test/.well-known/acme-challenge/abc: 404")
	waitCondition(ctx, t, c, fail, platformv1alpha1.RouteReadyCondition, platformv1alpha1.RouteNotServingReason, "CertificateReady is False (ChallengeFailed)")
	waitCondition(ctx, t, c, plain, platformv1alpha1.RouteReadyCondition, platformv1alpha1.RouteServingReason, "Serving http://plain.example.test.")
	waitCondition(ctx, t, c, wild, platformv1alpha1.RouteDNSReadyCondition, platformv1alpha1.RouteDNSPointingHereReason, "looked up as bex-dns-probe.wild.example.test")
	waitCondition(ctx, t, c, own, platformv1alpha1.RouteCertificateReadyCondition, platformv1alpha1.RouteCertificatePendingReason,
		"a certificate is obtained on the first HTTPS request to own.example.test once DNS points here")

	// A certificate of the tenant's own, in a Secret that appears later.
	byo := route("rt-a", "byo", "own.example.test", "web", "/byo", platformv1alpha1.TLSModeSecret)
	byo.Spec.TLS.SecretName = "own-tls"
	create(byo)
	waitCondition(ctx, t, c, byo, platformv1alpha1.RouteCertificateReadyCondition, platformv1alpha1.RouteSecretInvalidReason, `Secret "own-tls" not found`)
	ownCrt, ownKey := selfSigned(t, time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour), "own.example.test")
	create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "rt-a", Name: "own-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: ownCrt, corev1.TLSPrivateKeyKey: ownKey},
	})
	waitCondition(ctx, t, c, byo, platformv1alpha1.RouteReadyCondition, platformv1alpha1.RouteServingReason, "Serving https://own.example.test/byo.")
	if reqs := secretLists.Requests(); len(reqs) > 0 {
		t.Fatalf("the manager listed or watched Secrets with their data (a full Secret cache): %s", strings.Join(reqs, "; "))
	}

	// The domain's owner publishes tenant B's value beside A's, and tenant
	// A lets go of the hostname: tenant B's Route is admitted and, DNS and
	// the certificate being in place, served.
	prove(dns, "www.example.test", "rt-a", "rt-b")
	for _, rt := range []*platformv1alpha1.Route{www, wwwDup, wwwAPI} {
		if err := c.Delete(ctx, rt); err != nil {
			t.Fatal(err)
		}
	}
	waitCondition(ctx, t, c, stolen, platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason, "")
	waitCondition(ctx, t, c, stolen, platformv1alpha1.RouteReadyCondition, platformv1alpha1.RouteServingReason, "Serving https://www.example.test/shop.")
}

// waitCondition polls until the Route's condition typ has reason and a
// message containing substr, and returns the Route.
func waitCondition(ctx context.Context, t *testing.T, c client.Client, rt *platformv1alpha1.Route, typ, reason, substr string) *platformv1alpha1.Route {
	t.Helper()
	var last *metav1.Condition
	for {
		got := &platformv1alpha1.Route{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(rt), got); err != nil {
			t.Fatal(err)
		}
		last = meta.FindStatusCondition(got.Status.Conditions, typ)
		if last != nil && last.Reason == reason && strings.Contains(last.Message, substr) {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("route %s: %s never reached reason %s with %q; last: %+v", rt.Name, typ, reason, substr, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
