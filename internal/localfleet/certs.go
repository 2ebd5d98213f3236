package localfleet

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"bex.co/bex/internal/pki"
)

// certValidity is how long the certificates a machine issues itself are
// valid, as kubeadm's: a year.
const certValidity = 365 * 24 * time.Hour

// nodePKI is what a control-plane machine holds of the cluster's PKI: the
// CAs Cluster API generated (written by the bootstrap data) and what
// "kubeadm init phase certs" issues from them on the node.
type nodePKI struct {
	dir          string // certificatesDir under the machine's root
	ca           *pki.KeyPair
	frontProxyCA *pki.KeyPair
	// APIServerExpiry is when apiserver.crt expires, what Cluster API's
	// certificates-expiry annotation reports.
	APIServerExpiry time.Time
}

// loadNodePKI reads the CAs the bootstrap data wrote under dir.
func loadNodePKI(dir string) (*nodePKI, error) {
	p := &nodePKI{dir: dir}
	var err error
	if p.ca, err = (pki.Files{CertFile: filepath.Join(dir, "ca.crt"), KeyFile: filepath.Join(dir, "ca.key")}).Read(); err != nil {
		return nil, fmt.Errorf("reading the cluster CA the bootstrap data wrote: %w", err)
	}
	if p.frontProxyCA, err = (pki.Files{CertFile: filepath.Join(dir, "front-proxy-ca.crt"), KeyFile: filepath.Join(dir, "front-proxy-ca.key")}).Read(); err != nil {
		return nil, fmt.Errorf("reading the front-proxy CA the bootstrap data wrote: %w", err)
	}
	return p, nil
}

// issue writes the certificates kubeadm issues on a control-plane node,
// keeping those already there that still cover what they must: the
// apiserver's serving certificate (for the hostname, the machine's address,
// the control-plane endpoint, the kubernetes Service's names and first
// address, and certSANs), its kubelet client certificate, and the
// front-proxy client certificate.
func (p *nodePKI) issue(cc *clusterConfiguration, hostname string, ip net.IP, endpointHost string) error {
	domain := cc.dnsDomain()
	serving := pki.Spec{
		CommonName: "kube-apiserver",
		DNSNames: []string{hostname, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc." + domain, "localhost"},
		IPAddresses: []net.IP{ip, net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if svc, err := firstServiceIP(cc.serviceSubnet()); err == nil {
		serving.IPAddresses = append(serving.IPAddresses, svc)
	}
	for _, name := range append([]string{endpointHost}, cc.APIServer.CertSANs...) {
		if a := net.ParseIP(name); a != nil {
			serving.IPAddresses = append(serving.IPAddresses, a)
		} else if name != "" {
			serving.DNSNames = append(serving.DNSNames, name)
		}
	}
	kp, err := p.ensure("apiserver", p.ca, serving)
	if err != nil {
		return err
	}
	p.APIServerExpiry = kp.Cert.NotAfter
	if _, err := p.ensure("apiserver-kubelet-client", p.ca, clientSpec("kube-apiserver-kubelet-client", "kubeadm:cluster-admins")); err != nil {
		return err
	}
	_, err = p.ensure("front-proxy-client", p.frontProxyCA, clientSpec("front-proxy-client"))
	return err
}

// ensure reads name.crt/.key in the certificates directory, and issues
// them anew with ca when missing, not signed by ca, or not covering spec.
func (p *nodePKI) ensure(name string, ca *pki.KeyPair, spec pki.Spec) (*pki.KeyPair, error) {
	f := pki.Files{CertFile: filepath.Join(p.dir, name+".crt"), KeyFile: filepath.Join(p.dir, name+".key")}
	if kp, err := f.Read(); err == nil && kp.Cert.CheckSignatureFrom(ca.Cert) == nil && pki.Covers(kp.Cert, spec) && pki.ValidFor(kp.Cert, 24*time.Hour) {
		return kp, nil
	}
	spec.NotAfter = time.Now().Add(certValidity)
	kp, err := ca.Issue(spec)
	if err != nil {
		return nil, fmt.Errorf("issuing %s: %w", name, err)
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, err
	}
	if err := f.Write(kp); err != nil {
		return nil, fmt.Errorf("writing %s: %w", name, err)
	}
	return kp, nil
}

// clientConfig returns a config for host that presents a client
// certificate of the cluster CA for user in groups: the admin's
// (system:masters, as kubeadm's super-admin.conf) or the node's
// (system:node:NAME in system:nodes, as kubeadm's kubelet.conf).
func (p *nodePKI) clientConfig(host, user string, groups ...string) (*rest.Config, error) {
	spec := clientSpec(user, groups...)
	spec.NotAfter = time.Now().Add(certValidity)
	kp, err := p.ca.Issue(spec)
	if err != nil {
		return nil, err
	}
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.ca.CertPEM(),
			CertData: kp.CertPEM(),
			KeyData:  keyPEM,
		},
		QPS: 50, Burst: 100,
	}, nil
}

func clientSpec(user string, groups ...string) pki.Spec {
	return pki.Spec{CommonName: user, Organization: groups, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// firstServiceIP is the kubernetes Service's address: the first address of
// the service subnet (the first one when it is dual-stack).
func firstServiceIP(subnet string) (net.IP, error) {
	subnet, _, _ = strings.Cut(subnet, ",")
	_, n, err := net.ParseCIDR(subnet)
	if err != nil {
		return nil, err
	}
	ip := append(net.IP(nil), n.IP.To16()...)
	ip[len(ip)-1]++
	return ip, nil
}
