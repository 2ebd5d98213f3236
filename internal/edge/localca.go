package edge

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/certmagic"
)

// LocalCA is a certificate authority kept in a directory, the issuer of
// embedded mode: there is no public DNS name to prove, so the edge signs
// certificates for claimed hostnames itself and the user trusts the CA's
// certificate (BEX_CA). It implements certmagic.Issuer.
type LocalCA struct {
	cert     *x509.Certificate
	key      crypto.Signer
	certFile string
	// Validity is how long an issued certificate is valid; certmagic renews
	// it when a third is left.
	Validity time.Duration
}

var _ certmagic.Issuer = (*LocalCA)(nil)

// LocalCAIssuerKey is the issuer key of certificates a LocalCA issued.
const LocalCAIssuerKey = "bex-local-ca"

// LoadOrCreateLocalCA loads the CA in dir (ca.crt, ca.key), creating it the
// first time.
func LoadOrCreateLocalCA(dir string) (*LocalCA, error) {
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	certPEM, err := os.ReadFile(certFile)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createLocalCA(dir, certFile, keyFile); err != nil {
			return nil, fmt.Errorf("creating the local CA in %s: %w", dir, err)
		}
		certPEM, err = os.ReadFile(certFile)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the local CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading the local CA's key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("the local CA in %s is not PEM; delete ca.crt and ca.key to make a new one", dir)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", certFile, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", keyFile, err)
	}
	return &LocalCA{cert: cert, key: key, certFile: certFile, Validity: 30 * 24 * time.Hour}, nil
}

func createLocalCA(dir, certFile, keyFile string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "bex local CA (" + host + ")", Organization: []string{"bex"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// CertFile is the path of the CA's certificate, for clients to trust.
func (ca *LocalCA) CertFile() string { return ca.certFile }

// Pool returns a pool holding the CA's certificate.
func (ca *LocalCA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// IssuerKey implements certmagic.Issuer.
func (ca *LocalCA) IssuerKey() string { return LocalCAIssuerKey }

// Issue implements certmagic.Issuer: it signs the request's names.
func (ca *LocalCA) Issue(ctx context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("checking the certificate request's signature: %w", err)
	}
	if len(csr.DNSNames) == 0 && len(csr.IPAddresses) == 0 {
		return nil, errors.New("the certificate request names no host")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"bex"}},
		DNSNames:     csr.DNSNames,
		IPAddresses:  csr.IPAddresses,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(ca.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate for %v: %w", csr.DNSNames, err)
	}
	return &certmagic.IssuedCertificate{Certificate: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}
