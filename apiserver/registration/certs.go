package registration

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"bex.co/bex/internal/pki"
)

// ServingCert is a serving certificate of bex-apiserver and the CA that
// signed it, as files.
type ServingCert struct {
	CertFile, KeyFile, CAFile string
	// CA is the PEM of the CA certificate: the APIService's caBundle.
	CA []byte
}

// DNSName returns the name the aggregator verifies a service's serving
// certificate for.
func DNSName(service, namespace string) string { return service + "." + namespace + ".svc" }

// renewBefore is how long before it expires the serving certificate is
// issued anew.
const renewBefore = 7 * 24 * time.Hour

// EnsureServingCert returns the serving certificate in dir (ca.crt,
// tls.crt, tls.key), making a new CA and certificate when they are missing,
// expire within a week, or do not carry every name. The certificate is for
// <service>.<namespace>.svc, localhost and 127.0.0.1. The CA's key is not
// kept: a new certificate comes with a new CA.
func EnsureServingCert(dir, service, namespace string) (*ServingCert, error) {
	sc := &ServingCert{
		CertFile: filepath.Join(dir, "tls.crt"),
		KeyFile:  filepath.Join(dir, "tls.key"),
		CAFile:   filepath.Join(dir, "ca.crt"),
	}
	files := pki.Files{CertFile: sc.CertFile, KeyFile: sc.KeyFile, CertMode: 0o600, ECKey: true}
	now := time.Now()
	name := DNSName(service, namespace)
	spec := pki.Spec{
		CommonName:  name,
		DNSNames:    []string{name, name + ".cluster.local", "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotAfter:    now.AddDate(1, 0, 0),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ca, ok := currentCert(sc.CAFile, files, spec); ok {
		sc.CA = ca
		return sc, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating certificate directory: %w", err)
	}
	ca, err := pki.NewCA(pki.Spec{
		CommonName: "bex-apiserver-ca",
		NotAfter:   now.AddDate(10, 0, 0),
		KeyUsage:   x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	serving, err := ca.Issue(spec)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	sc.CA = ca.CertPEM()
	if err := os.WriteFile(sc.CAFile, sc.CA, 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", filepath.Base(sc.CAFile), err)
	}
	if err := files.Write(serving); err != nil {
		return nil, err
	}
	return sc, nil
}

// currentCert returns the PEM in caFile when files hold a key pair that
// chains to that CA, carries the names of spec, and is valid for at least
// renewBefore.
func currentCert(caFile string, files pki.Files, spec pki.Spec) ([]byte, bool) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, false
	}
	kp, err := files.Read()
	if err != nil || !pki.ValidFor(kp.Cert, renewBefore) || !pki.Covers(kp.Cert, spec) {
		return nil, false
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, false
	}
	if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: spec.DNSNames[0]}); err != nil {
		return nil, false
	}
	return caPEM, true
}
