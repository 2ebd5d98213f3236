package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// KeyPair is a certificate and the private key of its public key. A KeyPair
// whose certificate is a CA issues and signs other certificates.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Spec says what a certificate is for. The serial number is random.
type Spec struct {
	// CommonName and Organization make the subject; a kube-apiserver reads
	// a client certificate's as the user and its groups.
	CommonName   string
	Organization []string
	// DNSNames and IPAddresses are the names a serving certificate is
	// valid for.
	DNSNames    []string
	IPAddresses []net.IP
	// NotBefore is when the certificate becomes valid; zero means an hour
	// ago, so that a peer whose clock is a little behind accepts it.
	NotBefore time.Time
	// NotAfter is when it expires; it must be set.
	NotAfter time.Time
	// KeyUsage zero means x509.KeyUsageDigitalSignature for a certificate
	// a CA issues, and x509.KeyUsageCertSign|x509.KeyUsageCRLSign for a CA.
	KeyUsage x509.KeyUsage
	// ExtKeyUsage is x509.ExtKeyUsageServerAuth for a serving certificate,
	// x509.ExtKeyUsageClientAuth for a client certificate.
	ExtKeyUsage []x509.ExtKeyUsage
	// MaxPathLenZero makes a CA that signs only end-entity certificates.
	MaxPathLenZero bool
}

// NewCA makes a new key and a self-signed CA certificate for spec.
func NewCA(spec Spec) (*KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl, err := spec.template()
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.MaxPathLenZero = spec.MaxPathLenZero
	if spec.KeyUsage == 0 {
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}
	cert, err := create(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-signing: %w", err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// Issue makes a new key and a certificate for it and spec, signed by ca.
func (ca *KeyPair) Issue(spec Spec) (*KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	cert, err := ca.Sign(spec, key.Public())
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// Sign returns a certificate for pub and spec signed by ca, for a key ca
// does not hold (that of a certificate request).
func (ca *KeyPair) Sign(spec Spec, pub crypto.PublicKey) (*x509.Certificate, error) {
	tmpl, err := spec.template()
	if err != nil {
		return nil, err
	}
	if spec.KeyUsage == 0 {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	cert, err := create(tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	return cert, nil
}

// Pool returns a new pool holding kp's certificate, to trust it as a CA.
func (kp *KeyPair) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(kp.Cert)
	return pool
}

// TLSCertificate returns kp for a tls.Config's Certificates.
func (kp *KeyPair) TLSCertificate() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}
}

// Covers reports whether cert carries every DNS name and IP address of
// spec; a certificate that lacks one is to be issued anew.
func Covers(cert *x509.Certificate, spec Spec) bool {
	for _, n := range spec.DNSNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	for _, ip := range spec.IPAddresses {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// ValidFor reports whether cert is valid now and still is d from now.
func ValidFor(cert *x509.Certificate, d time.Duration) bool {
	now := time.Now()
	return !now.Before(cert.NotBefore) && !now.Add(d).After(cert.NotAfter)
}

func (spec Spec) template() (*x509.Certificate, error) {
	if spec.NotAfter.IsZero() {
		return nil, errors.New("certificate spec sets no NotAfter")
	}
	notBefore := spec.NotBefore
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	return &x509.Certificate{
		// A nil SerialNumber makes x509.CreateCertificate pick a random one.
		Subject:     pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		DNSNames:    spec.DNSNames,
		IPAddresses: spec.IPAddresses,
		NotBefore:   notBefore,
		NotAfter:    spec.NotAfter,
		KeyUsage:    spec.KeyUsage,
		ExtKeyUsage: spec.ExtKeyUsage,
	}, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	return key, nil
}

func create(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}
