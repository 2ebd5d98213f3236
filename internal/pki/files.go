package pki

import (
	"fmt"
	"io/fs"
	"os"
)

// Files are the two PEM files a key pair is kept in. Their directory must
// exist.
type Files struct {
	CertFile, KeyFile string
	// CertMode is the mode a new certificate file gets; zero means 0o644,
	// for a certificate other users and processes read (a CA to trust). A
	// new key file is always 0o600. Write leaves an existing file's mode.
	CertMode fs.FileMode
	// ECKey makes Write encode the key as an "EC PRIVATE KEY" block
	// (SEC 1) instead of a "PRIVATE KEY" block (PKCS #8). Read takes
	// either.
	ECKey bool
}

// Read reads the key pair in f. When either file is missing, the error
// wraps fs.ErrNotExist; a key that is not the certificate's is an error.
func (f Files) Read() (*KeyPair, error) {
	certPEM, err := os.ReadFile(f.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return nil, err
	}
	return parseKeyPair(certPEM, keyPEM, f.CertFile, f.KeyFile)
}

// Write writes kp into f, the key first: a caller that issues anew when the
// certificate file is missing never finds a certificate without its key.
func (f Files) Write(kp *KeyPair) error {
	encode := kp.KeyPEM
	if f.ECKey {
		encode = kp.ECKeyPEM
	}
	keyPEM, err := encode()
	if err != nil {
		return err
	}
	if err := os.WriteFile(f.KeyFile, keyPEM, 0o600); err != nil {
		return fmt.Errorf("writing key: %w", err)
	}
	mode := f.CertMode
	if mode == 0 {
		mode = 0o644
	}
	if err := os.WriteFile(f.CertFile, kp.CertPEM(), mode); err != nil {
		return fmt.Errorf("writing certificate: %w", err)
	}
	return nil
}
