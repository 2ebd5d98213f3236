package registration

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
)

func TestEnsureServingCert(t *testing.T) {
	dir := t.TempDir()
	sc, err := EnsureServingCert(dir, "bex-apiserver", "bex-system")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(sc.CertFile, sc.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sc.CA) {
		t.Fatal("CA bundle holds no certificate")
	}
	// What the aggregator checks, and what direct clients on this host use.
	for _, name := range []string{"bex-apiserver.bex-system.svc", "localhost", "127.0.0.1"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.bex-system.svc"}); err == nil {
		t.Error("the certificate verifies for another service")
	}

	again, err := EnsureServingCert(dir, "bex-apiserver", "bex-system")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.CA, sc.CA) {
		t.Error("a second call replaced a current certificate")
	}
	other, err := EnsureServingCert(dir, "scheduler", "bex-system")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other.CA, sc.CA) {
		t.Error("a certificate for another service name was kept")
	}
	if ca, _ := os.ReadFile(other.CAFile); !bytes.Equal(ca, other.CA) {
		t.Error("ca.crt differs from the returned CA bundle")
	}
}
