package registration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
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

// EnsureServingCert returns the serving certificate in dir (ca.crt,
// tls.crt, tls.key), making a new CA and certificate when they are missing,
// expire within a week, or do not carry every name. The certificate is for
// <service>.<namespace>.svc, localhost and 127.0.0.1.
func EnsureServingCert(dir, service, namespace string) (*ServingCert, error) {
	sc := &ServingCert{
		CertFile: filepath.Join(dir, "tls.crt"),
		KeyFile:  filepath.Join(dir, "tls.key"),
		CAFile:   filepath.Join(dir, "ca.crt"),
	}
	names := []string{DNSName(service, namespace), DNSName(service, namespace) + ".cluster.local", "localhost"}
	if ca, ok := currentCert(sc, names); ok {
		sc.CA = ca
		return sc, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating certificate directory: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "bex-apiserver-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1),
		Subject:      pkix.Name{CommonName: DNSName(service, namespace)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	sc.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for _, f := range []struct {
		path string
		data []byte
	}{
		{sc.CAFile, sc.CA},
		{sc.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
		{sc.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})},
	} {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", filepath.Base(f.path), err)
		}
	}
	return sc, nil
}

// currentCert returns the CA PEM when the files in sc hold a key pair that
// chains to the CA, carries names, and is valid for at least a week.
func currentCert(sc *ServingCert, names []string) ([]byte, bool) {
	caPEM, err := os.ReadFile(sc.CAFile)
	if err != nil {
		return nil, false
	}
	pair, err := tls.LoadX509KeyPair(sc.CertFile, sc.KeyFile)
	if err != nil {
		return nil, false
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || time.Until(cert.NotAfter) < 7*24*time.Hour {
		return nil, false
	}
	for _, n := range names {
		if !slices.Contains(cert.DNSNames, n) {
			return nil, false
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, false
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: names[0]}); err != nil {
		return nil, false
	}
	return caPEM, true
}
