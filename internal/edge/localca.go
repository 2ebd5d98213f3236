package edge

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/certmagic"

	"bex.co/bex/internal/pki"
)

// LocalCA is a certificate authority kept in a directory, the issuer of
// embedded mode: there is no public DNS name to prove, so the edge signs
// certificates for claimed hostnames itself and the user trusts the CA's
// certificate (BEX_CA). It implements certmagic.Issuer.
type LocalCA struct {
	ca       *pki.KeyPair
	certFile string
	// Validity is how long an issued certificate is valid; certmagic renews
	// it when a third is left.
	Validity time.Duration
}

var _ certmagic.Issuer = (*LocalCA)(nil)

// LocalCAIssuerKey is the issuer key of certificates a LocalCA issued.
const LocalCAIssuerKey = "bex-local-ca"

// LoadOrCreateLocalCA loads the CA in dir (ca.crt, ca.key), creating it the
// first time, when there is no ca.crt.
func LoadOrCreateLocalCA(dir string) (*LocalCA, error) {
	files := pki.Files{CertFile: filepath.Join(dir, "ca.crt"), KeyFile: filepath.Join(dir, "ca.key"), ECKey: true}
	if _, err := os.Stat(files.CertFile); errors.Is(err, fs.ErrNotExist) {
		if err := createLocalCA(dir, files); err != nil {
			return nil, fmt.Errorf("creating the local CA in %s: %w", dir, err)
		}
	}
	ca, err := files.Read()
	if err != nil {
		return nil, fmt.Errorf("reading the local CA (delete ca.crt and ca.key in %s to make a new one): %w", dir, err)
	}
	return &LocalCA{ca: ca, certFile: files.CertFile, Validity: 30 * 24 * time.Hour}, nil
}

func createLocalCA(dir string, files pki.Files) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	host, _ := os.Hostname()
	ca, err := pki.NewCA(pki.Spec{
		CommonName:     "bex local CA (" + host + ")",
		Organization:   []string{"bex"},
		NotAfter:       time.Now().AddDate(10, 0, 0),
		MaxPathLenZero: true,
	})
	if err != nil {
		return err
	}
	return files.Write(ca)
}

// CertFile is the path of the CA's certificate, for clients to trust.
func (ca *LocalCA) CertFile() string { return ca.certFile }

// Pool returns a pool holding the CA's certificate.
func (ca *LocalCA) Pool() *x509.CertPool { return ca.ca.Pool() }

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
	now := time.Now()
	cert, err := ca.ca.Sign(pki.Spec{
		Organization: []string{"bex"},
		DNSNames:     csr.DNSNames,
		IPAddresses:  csr.IPAddresses,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(ca.Validity),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, csr.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate for %v: %w", csr.DNSNames, err)
	}
	return &certmagic.IssuedCertificate{Certificate: pki.EncodeCert(cert)}, nil
}
