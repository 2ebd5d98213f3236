package edge_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/acmetest"
	"bex.co/bex/internal/domains"
	"bex.co/bex/test/platformtest"
)

// TestWildcardRouteCertificateBudget asks bex-edge, with a budget of two
// new names per tenant and hour, for four names under a tenant's wildcard
// Route, with certificates from pebble. The first two get certificates,
// the other two fail the TLS handshake as an unknown name does, pebble saw
// exactly two orders, and the Route's status says that the budget is
// spent and until when.
func TestWildcardRouteCertificateBudget(t *testing.T) {
	const budget = 2
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := platformtest.BuildBinaries(t, "bex-edge")
	cp, dbURL, scheme, kc := startCluster(t)

	wildcardApp(ctx, t, cp.RESTConfig(), kc, "wild-test", "*.wild.test")

	ports := freePorts(t, 3)
	httpPort, httpsPort := ports[0], ports[1]
	pebble := acmetest.Start(t, acmetest.Options{HTTPPort: httpPort, TLSPort: httpsPort})
	names := []string{"n1.wild.test", "n2.wild.test", "n3.wild.test", "n4.wild.test"}
	for _, n := range names {
		pebble.SetA(n, "127.0.0.1")
	}
	// The tenant proves it owns the wildcard's domain, as the Route asks.
	pebble.AddTXT(domains.ChallengeName("*.wild.test"), domains.Token("apps.test", "acme", "*.wild.test"))
	startRouteController(ctx, t, cp.RESTConfig(), scheme, dbURL, pebble)
	waitRoute(t, kc, "wild-test", platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason)
	e := startEdge(ctx, t, bin, "edge", ports,
		"--kubeconfig", cp.KubeconfigPath(), "--database-url", dbURL,
		"--acme-directory", pebble.DirectoryURL(), "--acme-ca-file", pebble.DirectoryCAFile(),
		"--app-domain", "apps.test", "--certificate-budget", fmt.Sprint(budget))
	roots, err := pebble.IssuerRoots(ctx)
	must(t, err)

	for i, n := range names {
		body, _, err := tlsGet(ctx, e.https, n, roots)
		if i < budget {
			if err != nil || body != "wild at "+n {
				t.Errorf("name %d of the budget, %s: %q, %v", i+1, n, body, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s, past the budget, was served: %q", n, body)
		}
	}
	// A name that got its certificate keeps it.
	if body, _, err := tlsGet(ctx, e.https, names[0], roots); err != nil || body != "wild at "+names[0] {
		t.Errorf("%s after the budget was spent: %q, %v", names[0], body, err)
	}
	// The refusal is the handshake failure of an unknown name.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", e.https),
		&tls.Config{ServerName: names[budget], RootCAs: roots})
	if err == nil {
		conn.Close()
		t.Errorf("a TLS handshake for %s completed past the budget", names[budget])
	}

	orders := 0
	for _, n := range names {
		orders += pebble.Orders(n)
	}
	if orders != budget {
		t.Errorf("pebble saw %d orders for %v, want %d", orders, names, budget)
	}

	rt := waitRoute(t, kc, "wild-test", platformv1alpha1.RouteCertificateReadyCondition, platformv1alpha1.RouteIssuanceBudgetExhaustedReason)
	c := meta.FindStatusCondition(rt.Status.Conditions, platformv1alpha1.RouteCertificateReadyCondition)
	for _, want := range []string{"refused a certificate for " + names[budget], fmt.Sprintf("got certificates for %d new names in the last 1h0m0s", budget), "--certificate-budget"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("CertificateReady message %q does not say %q", c.Message, want)
		}
	}
	t.Logf("CertificateReady: %s", c.Message)
}

// wildcardApp serves app shop of tenant acme, which answers "wild at
// <host>", behind its Service, with a Route name for the wildcard host.
func wildcardApp(ctx context.Context, t *testing.T, cfg *rest.Config, kc client.Client, name, host string) {
	t.Helper()
	appIP, appPort := serveApp(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "wild at %s", r.Host)
	})
	prepareTenant(ctx, t, cfg, "acme")
	makeService(ctx, t, kc, "acme", "shop", appLabels("acme", "shop"), appIP, appPort)
	must(t, kc.Create(ctx, &platformv1alpha1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "shop"}}))
	must(t, kc.Create(ctx, &platformv1alpha1.Route{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
		Spec:       platformv1alpha1.RouteSpec{Hostname: host, AppRef: platformv1alpha1.AppReference{Name: "shop"}},
	}))
}
