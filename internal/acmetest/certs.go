package acmetest

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"bex.co/bex/internal/pki"
)

// directoryCerts is the throwaway CA that signs the certificate pebble (and
// the order-counting proxy in front of it) serves the ACME directory and the
// management interface with. It has nothing to do with the CA pebble issues
// from.
type directoryCerts struct {
	ca      *pki.KeyPair
	serving *pki.KeyPair // for 127.0.0.1 and localhost
	caFile  string
	files   pki.Files // serving's
}

// newDirectoryCerts creates a CA and a certificate for 127.0.0.1 and
// localhost signed by it, and writes them as PEM files into dir.
func newDirectoryCerts(dir string) (*directoryCerts, error) {
	notAfter := time.Now().Add(24 * time.Hour)
	ca, err := pki.NewCA(pki.Spec{CommonName: "acmetest directory CA", NotAfter: notAfter})
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	serving, err := ca.Issue(pki.Spec{
		CommonName:  "localhost",
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotAfter:    notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("creating server certificate: %w", err)
	}
	c := &directoryCerts{
		ca:      ca,
		serving: serving,
		caFile:  filepath.Join(dir, "directory-ca.pem"),
		files: pki.Files{
			CertFile: filepath.Join(dir, "directory-cert.pem"),
			KeyFile:  filepath.Join(dir, "directory-key.pem"),
			CertMode: 0o600,
		},
	}
	if err := os.WriteFile(c.caFile, ca.CertPEM(), 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", filepath.Base(c.caFile), err)
	}
	if err := c.files.Write(serving); err != nil {
		return nil, err
	}
	return c, nil
}
