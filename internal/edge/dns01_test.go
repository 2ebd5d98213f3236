package edge_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"bex.co/bex/internal/acmetest"
	"bex.co/bex/internal/dnstest"
	"bex.co/bex/internal/edge"
	"bex.co/bex/internal/rfc2136"
	"bex.co/bex/test/platformtest"
)

// TestServerWildcardDNS01 runs a Server with DNS-01 through a DNS server
// that takes signed updates for example.test, and pebble validating
// against it. The wildcard Route in the zone gets one certificate for
// *.example.test before any client asks, and its names are served with
// it, charging nothing to the tenant's budget of one name; an exact Route
// still gets its own certificate by HTTP-01, and a wildcard Route outside
// the zone one per name under the budget. Once the Route is gone, its names
// are no longer served.
func TestServerWildcardDNS01(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dns := dnstest.Start(t)
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	secret := base64.StdEncoding.EncodeToString(raw)
	dns.AcceptUpdates("example.test", dnstest.Key{Name: "edge", Secret: secret})
	for _, n := range []string{"www.shop.test", "n1.wild.test", "n2.wild.test"} {
		dns.SetA(n, "127.0.0.1")
	}

	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpsL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpPort, httpsPort := httpL.Addr().(*net.TCPAddr).Port, httpsL.Addr().(*net.TCPAddr).Port
	pebble := acmetest.Start(t, acmetest.Options{HTTPPort: httpPort, TLSPort: httpsPort, DNSServer: dns.Addr()})

	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "app at %s", r.Host) })
	table := &edge.Table{Apps: apps{{"acme", "web"}: {up}, {"shop", "web"}: {up}}}
	wildRoute := edge.RouteEntry{Hostname: "*.example.test", Tenant: "acme", App: "web"}
	others := []edge.RouteEntry{
		{Hostname: "www.shop.test", Tenant: "shop", App: "web"},
		{Hostname: "*.wild.test", Tenant: "acme", App: "web"},
	}
	table.SetRoutes(append([]edge.RouteEntry{wildRoute}, others...))
	srv, err := edge.NewServer(edge.ServerOptions{
		Table: table, Storage: &certmagic.FileStorage{Path: t.TempDir()},
		ACME: &edge.ACME{Directory: pebble.DirectoryURL(), RootCAs: pebble.DirectoryCA(), DNS01: &edge.DNS01{
			Zone:      "example.test",
			Provider:  &rfc2136.Provider{Server: dns.Addr(), Zone: "example.test", KeyName: "edge", Secret: secret},
			Resolvers: []string{dns.Addr()},
		}},
		HTTPPort: httpPort, HTTPSPort: httpsPort, ListenHost: "127.0.0.1", CertificateBudget: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, httpL, httpsL) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		srv.Close()
	})

	// Obtained for the Route, before any handshake.
	platformtest.Eventually(t, 5*time.Minute, "the wildcard certificate", func(ctx context.Context) error {
		st, err := srv.Certificates().State(ctx, "*.example.test")
		switch {
		case err != nil:
			return err
		case st.Issued:
			return nil
		case st.Failure != nil:
			return fmt.Errorf("not issued, the last attempt failed: %s", st.Failure.Error)
		}
		return errors.New("not issued yet")
	})
	roots, err := pebble.IssuerRoots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) (*x509.Certificate, error) {
		tr := &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, httpsL.Addr().String())
			},
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: name},
		}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: time.Minute}).Get("https://" + name + "/")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "app at "+name {
			return nil, fmt.Errorf("answered %q", body)
		}
		return resp.TLS.PeerCertificates[0], nil
	}

	// The edge caches the certificate just after it stores it, which is
	// what State reads.
	platformtest.Eventually(t, 5*time.Minute, "the edge to serve the wildcard certificate", func(context.Context) error {
		_, err := get("a.example.test")
		return err
	})
	var serials []string
	for _, n := range []string{"a.example.test", "b.example.test", "c.example.test"} {
		cert, err := get(n)
		if err != nil {
			t.Fatalf("%s: %v\npebble:\n%s", n, err, pebble.Log())
		}
		if !slices.Equal(cert.DNSNames, []string{"*.example.test"}) {
			t.Errorf("%s: certificate for %v, want *.example.test", n, cert.DNSNames)
		}
		serials = append(serials, cert.SerialNumber.String())
		if o := pebble.Orders(n); o != 0 {
			t.Errorf("pebble saw %d orders for %s", o, n)
		}
	}
	if serials[0] != serials[1] || serials[0] != serials[2] {
		t.Errorf("different certificates under one wildcard: %v", serials)
	}
	if o := pebble.Orders("*.example.test"); o != 1 {
		t.Errorf("pebble saw %d orders for *.example.test, want 1", o)
	}
	if v := dns.TXT("_acme-challenge.example.test"); len(v) != 0 {
		t.Errorf("the challenge record is left: %q", v)
	}

	// An exact name: HTTP-01 or TLS-ALPN-01 on demand, its own certificate.
	if cert, err := get("www.shop.test"); err != nil || !slices.Equal(cert.DNSNames, []string{"www.shop.test"}) {
		t.Errorf("www.shop.test: %v", err)
	}
	// A wildcard outside the zone: one certificate per name, and the
	// tenant's budget of one, untouched by the names above, takes one.
	if cert, err := get("n1.wild.test"); err != nil || !slices.Equal(cert.DNSNames, []string{"n1.wild.test"}) {
		t.Errorf("n1.wild.test, the first name of the budget: %v", err)
	}
	if _, err := get("n2.wild.test"); err == nil {
		t.Error("n2.wild.test was served past the budget")
	}

	// The Route goes: its names are no longer served.
	table.SetRoutes(others)
	platformtest.Eventually(t, 5*time.Minute, "a.example.test to be refused", func(context.Context) error {
		if cert, err := get("a.example.test"); err == nil {
			return fmt.Errorf("still served, with a certificate for %v", cert.DNSNames)
		}
		return nil
	})
}
