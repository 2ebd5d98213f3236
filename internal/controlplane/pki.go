package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
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

// keyPair is a certificate with its key, and the PEM files that hold them.
type keyPair struct {
	cert     *x509.Certificate
	key      crypto.Signer
	certFile string
	keyFile  string
}

// pki holds the plane's certificate authorities and shared credentials.
type pki struct {
	dir          string
	ca           *keyPair // cluster CA: serving certs, client certs, peer CA
	frontProxyCA *keyPair
	frontProxy   *keyPair // front-proxy-client
	admin        *keyPair
	saKeyFile    string
	saPubFile    string
}

// loadOrCreatePKI reads the PKI in dir, creating what is missing.
func loadOrCreatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating pki directory: %w", err)
	}
	p := &pki{dir: dir}
	var err error
	if p.ca, err = loadOrCreate(dir, "ca", nil, certSpec{cn: "bex-ca", ca: true}); err != nil {
		return nil, err
	}
	if p.frontProxyCA, err = loadOrCreate(dir, "front-proxy-ca", nil, certSpec{cn: "bex-front-proxy-ca", ca: true}); err != nil {
		return nil, err
	}
	if p.frontProxy, err = loadOrCreate(dir, "front-proxy-client", p.frontProxyCA, certSpec{cn: FrontProxyClientName, client: true}); err != nil {
		return nil, err
	}
	if p.admin, err = loadOrCreate(dir, "admin", p.ca, certSpec{cn: AdminUser, orgs: []string{"system:masters"}, client: true}); err != nil {
		return nil, err
	}
	sa, err := loadOrCreate(dir, "sa", nil, certSpec{cn: "service-accounts", ca: true})
	if err != nil {
		return nil, err
	}
	p.saKeyFile = sa.keyFile
	p.saPubFile = filepath.Join(dir, "sa.pub")
	if _, err := os.Stat(p.saPubFile); err != nil {
		der, err := x509.MarshalPKIXPublicKey(sa.key.Public())
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
func (p *pki) serving(hostname string, ip net.IP) (*keyPair, error) {
	name := "apiserver-" + hostname
	spec := certSpec{
		cn:       "kube-apiserver",
		dnsNames: append([]string{hostname}, servingDNSNames...),
		ips:      []net.IP{ip, net.ParseIP(LoadBalancerIP), net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		server:   true,
	}
	kp, err := loadOrCreate(p.dir, name, p.ca, spec)
	if err != nil || covers(kp.cert, spec) {
		return kp, err
	}
	if err := os.Remove(kp.certFile); err != nil {
		return nil, fmt.Errorf("replacing %s: %w", kp.certFile, err)
	}
	return loadOrCreate(p.dir, name, p.ca, spec)
}

// covers reports whether cert carries every name and address of spec.
func covers(cert *x509.Certificate, spec certSpec) bool {
	for _, n := range spec.dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	for _, ip := range spec.ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// ClientCert issues a client certificate for user in groups, signed by the
// cluster CA, and returns its PEM certificate and key.
func (p *pki) clientCert(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	kp, err := newKeyPair(p.ca, certSpec{cn: user, orgs: groups, client: true})
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(kp.key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

type certSpec struct {
	cn       string
	orgs     []string
	dnsNames []string
	ips      []net.IP
	ca       bool
	client   bool
	server   bool
}

func loadOrCreate(dir, name string, signer *keyPair, spec certSpec) (*keyPair, error) {
	kp := &keyPair{certFile: filepath.Join(dir, name+".crt"), keyFile: filepath.Join(dir, name+".key")}
	certPEM, cerr := os.ReadFile(kp.certFile)
	keyPEM, kerr := os.ReadFile(kp.keyFile)
	if cerr == nil && kerr == nil {
		if err := kp.parse(certPEM, keyPEM); err != nil {
			return nil, fmt.Errorf("reading %s: %w", kp.certFile, err)
		}
		return kp, nil
	}
	fresh, err := newKeyPair(signer, spec)
	if err != nil {
		return nil, fmt.Errorf("creating %s certificate: %w", name, err)
	}
	fresh.certFile, fresh.keyFile = kp.certFile, kp.keyFile
	keyDER, err := x509.MarshalPKCS8PrivateKey(fresh.key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(fresh.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", fresh.keyFile, err)
	}
	if err := os.WriteFile(fresh.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: fresh.cert.Raw}), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", fresh.certFile, err)
	}
	return fresh, nil
}

func (kp *keyPair) parse(certPEM, keyPEM []byte) error {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return err
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return errors.New("key cannot sign")
	}
	kp.cert, kp.key = cert, signer
	return nil
}

func newKeyPair(signer *keyPair, spec certSpec) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		DNSNames:     spec.dnsNames,
		IPAddresses:  spec.ips,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if spec.ca {
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	parent, parentKey := tmpl, crypto.Signer(key)
	if signer != nil {
		parent, parentKey = signer.cert, signer.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}
