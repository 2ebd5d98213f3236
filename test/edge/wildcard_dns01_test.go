package edge_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	platformv1alpha1 "bex.co/bex/apis/platform/v1alpha1"
	"bex.co/bex/internal/acmetest"
	"bex.co/bex/internal/certstore"
	"bex.co/bex/internal/dnstest"
	"bex.co/bex/internal/domains"
	"bex.co/bex/internal/store"
	"bex.co/bex/test/platformtest"
)

// TestWildcardRouteDNS01 runs bex-edge with a DNS server that takes RFC
// 2136 updates signed with the edge's TSIG key, and pebble validating
// against that server, in front of a tenant's wildcard Route. With a
// certificate budget of one name, three names under the Route are all
// served with one certificate for the wildcard itself: pebble saw one
// order, for the wildcard, and none for the names; the challenge's TXT
// record is gone afterwards; the tenant's budget was not charged; and the
// Route's status names the wildcard certificate.
func TestWildcardRouteDNS01(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := platformtest.BuildBinaries(t, "bex-edge")
	cp, dbURL, scheme, kc := startCluster(t)

	wildcardApp(ctx, t, cp.RESTConfig(), kc, "wild-example", "*.example.test")

	// The operator's DNS: the primary of example.test, which takes updates
	// signed with the edge's key. The CA and the Route controller resolve
	// with it too.
	dns := dnstest.Start(t)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	dns.AcceptUpdates("example.test", dnstest.Key{Name: "bex-edge", Secret: base64.StdEncoding.EncodeToString(secret)})
	secretFile := filepath.Join(t.TempDir(), "tsig")
	must(t, os.WriteFile(secretFile, []byte(base64.StdEncoding.EncodeToString(secret)+"\n"), 0o600))
	// The tenant proves it owns the wildcard's domain, as the Route asks.
	dns.SetTXT(domains.ChallengeName("*.example.test"), domains.Token("apps.test", "acme", "*.example.test"))

	ports := freePorts(t, 3)
	httpPort, httpsPort := ports[0], ports[1]
	pebble := acmetest.Start(t, acmetest.Options{HTTPPort: httpPort, TLSPort: httpsPort, DNSServer: dns.Addr()})
	startRouteController(ctx, t, cp.RESTConfig(), scheme, dbURL, pebble)
	waitRoute(t, kc, "wild-example", platformv1alpha1.RouteAdmittedCondition, platformv1alpha1.RouteAcceptedReason)
	e := startEdge(ctx, t, bin, "edge", ports,
		"--kubeconfig", cp.KubeconfigPath(), "--database-url", dbURL,
		"--acme-directory", pebble.DirectoryURL(), "--acme-ca-file", pebble.DirectoryCAFile(),
		"--app-domain", "apps.test", "--certificate-budget", "1",
		"--acme-dns-rfc2136-server", dns.Addr(), "--acme-dns-rfc2136-zone", "example.test",
		"--acme-dns-rfc2136-tsig-key", "bex-edge", "--acme-dns-rfc2136-tsig-secret-file", secretFile)

	// The certificate is obtained once the Route is admitted, before any
	// client asks.
	rt := waitRoute(t, kc, "wild-example", platformv1alpha1.RouteCertificateReadyCondition, platformv1alpha1.RouteCertificateIssuedReason)
	if c := meta.FindStatusCondition(rt.Status.Conditions, platformv1alpha1.RouteCertificateReadyCondition); !strings.Contains(c.Message, "*.example.test") {
		t.Errorf("CertificateReady does not name the wildcard certificate: %q", c.Message)
	}

	roots, err := pebble.IssuerRoots(ctx)
	must(t, err)
	// None of the names has an address record: no HTTP-01 or TLS-ALPN-01
	// validation could succeed.
	names := []string{"a.example.test", "b.example.test", "c.example.test"}
	var serials []string
	for _, n := range names {
		body, cert, err := tlsGet(ctx, e.https, n, roots)
		if err != nil || body != "wild at "+n {
			t.Fatalf("%s: %q, %v\npebble:\n%s", n, body, err, pebble.Log())
		}
		if !slices.Equal(cert.DNSNames, []string{"*.example.test"}) {
			t.Errorf("%s was served a certificate for %v, want one for *.example.test", n, cert.DNSNames)
		}
		serials = append(serials, cert.SerialNumber.String())
	}
	if serials[0] != serials[1] || serials[1] != serials[2] {
		t.Errorf("the names were served different certificates: serials %v", serials)
	}

	if n := pebble.Orders("*.example.test"); n != 1 {
		t.Errorf("pebble saw %d orders for *.example.test, want 1", n)
	}
	for _, n := range names {
		if o := pebble.Orders(n); o != 0 {
			t.Errorf("pebble saw %d orders for %s, want none", o, n)
		}
	}
	platformtest.Eventually(t, 10*time.Minute, "the challenge record to be deleted", func(context.Context) error {
		if v := dns.TXT("_acme-challenge.example.test"); len(v) != 0 {
			return fmt.Errorf("_acme-challenge.example.test holds %q", v)
		}
		return nil
	})

	// The budget's ledger, in the storage the edge shares, charged nothing.
	st, err := store.Open(ctx, dbURL)
	must(t, err)
	defer st.Close()
	storage, err := certstore.New(st.Pool(), certstore.Options{})
	must(t, err)
	if storage.Exists(ctx, "bex/budget/acme.json") {
		data, _ := storage.Load(ctx, "bex/budget/acme.json")
		t.Errorf("the tenant's certificate budget was charged: %s", data)
	}
}
