package controlplane

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"bex.co/bex/internal/pki"
)

// Names every apiserver's serving certificate carries: peers verify each
// other for kubernetes.default.svc.
var servingDNSNames = []string{
	"kubernetes", "kubernetes.default", "kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local", "localhost",
}

const (
	// FrontProxyClientName is the common name of the certificate apiservers
	// present when they proxy to a peer or to an aggregated API.
	FrontProxyClientName = "front-proxy-client"
	// AdminUser is the user of the admin kubeconfig, in group system:masters.
	AdminUser = "bex-admin"
)

// certValidity is how long every certificate of the plane is valid.
const certValidity = 10 * 365 * 24 * time.Hour

// caKeyUsage is the key usage of the plane's CAs.
const caKeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign | x509.KeyUsageCRLSign

// keyPair is a certificate with its key, and the PEM files that hold them.
type keyPair struct {
	*pki.KeyPair
	pki.Files
}

// planePKI holds the plane's certificate authorities and shared credentials.
type planePKI struct {
	dir          string
	ca           *keyPair // cluster CA: serving certs, client certs, peer CA
	frontProxyCA *keyPair
	frontProxy   *keyPair // front-proxy-client
	admin        *keyPair
	saKeyFile    string
	saPubFile    string
}

// loadOrCreatePKI reads the PKI in dir, creating what is missing.
func loadOrCreatePKI(dir string) (*planePKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating pki directory: %w", err)
	}
	p := &planePKI{dir: dir}
	var err error
	if p.ca, err = loadOrCreate(dir, "ca", nil, pki.Spec{CommonName: "bex-ca"}); err != nil {
		return nil, err
	}
	if p.frontProxyCA, err = loadOrCreate(dir, "front-proxy-ca", nil, pki.Spec{CommonName: "bex-front-proxy-ca"}); err != nil {
		return nil, err
	}
	if p.frontProxy, err = loadOrCreate(dir, "front-proxy-client", p.frontProxyCA, clientSpec(FrontProxyClientName)); err != nil {
		return nil, err
	}
	if p.admin, err = loadOrCreate(dir, "admin", p.ca, clientSpec(AdminUser, "system:masters")); err != nil {
		return nil, err
	}
	sa, err := loadOrCreate(dir, "sa", nil, pki.Spec{CommonName: "service-accounts"})
	if err != nil {
		return nil, err
	}
	p.saKeyFile = sa.KeyFile
	p.saPubFile = filepath.Join(dir, "sa.pub")
	if _, err := os.Stat(p.saPubFile); err != nil {
		der, err := x509.MarshalPKIXPublicKey(sa.Key.Public())
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(p.saPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
			return nil, fmt.Errorf("writing service account key: %w", err)
		}
	}
	return p, nil
}

// serving returns the serving certificate of the apiserver with the given
// hostname and address, creating it when missing. Besides the server's own
// address it carries the load balancer's, so that clients of the load
// balancer verify it. A certificate that lacks a name or address (one issued
// before the plane had a load balancer address) is issued anew.
func (p *planePKI) serving(hostname string, ip net.IP) (*keyPair, error) {
	name := "apiserver-" + hostname
	spec := pki.Spec{
		CommonName:  "kube-apiserver",
		DNSNames:    append([]string{hostname}, servingDNSNames...),
		IPAddresses: []net.IP{ip, net.ParseIP(LoadBalancerIP), net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return loadOrReissue(p.dir, name, p.ca, spec)
}

// clientCert issues a client certificate for user in groups, signed by the
// cluster CA, and returns its PEM certificate and key.
func (p *planePKI) clientCert(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	kp, err := newKeyPair(p.ca, clientSpec(user, groups...))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = kp.KeyPEM()
	if err != nil {
		return nil, nil, err
	}
	return kp.CertPEM(), keyPEM, nil
}

// clientSpec is the certificate of user in groups.
func clientSpec(user string, groups ...string) pki.Spec {
	return pki.Spec{CommonName: user, Organization: groups, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// loadOrCreate reads the key pair name.crt and name.key in dir, or, when one
// of them is missing, creates it with newKeyPair and writes it there.
func loadOrCreate(dir, name string, signer *keyPair, spec pki.Spec) (*keyPair, error) {
	kp := &keyPair{Files: pki.Files{
		CertFile: filepath.Join(dir, name+".crt"),
		KeyFile:  filepath.Join(dir, name+".key"),
		CertMode: 0o644,
	}}
	var err error
	if kp.KeyPair, err = kp.Read(); err == nil {
		return kp, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s certificate: %w", name, err)
	}
	if kp.KeyPair, err = newKeyPair(signer, spec); err != nil {
		return nil, fmt.Errorf("creating %s certificate: %w", name, err)
	}
	if err := kp.Files.Write(kp.KeyPair); err != nil {
		return nil, fmt.Errorf("writing %s certificate: %w", name, err)
	}
	return kp, nil
}

// newKeyPair issues spec, valid for certValidity, signed by signer, or as a
// self-signed CA when signer is nil.
func newKeyPair(signer *keyPair, spec pki.Spec) (*pki.KeyPair, error) {
	spec.NotAfter = time.Now().Add(certValidity)
	if signer == nil {
		spec.KeyUsage = caKeyUsage
		return pki.NewCA(spec)
	}
	return signer.Issue(spec)
}
