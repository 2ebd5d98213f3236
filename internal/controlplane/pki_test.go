package controlplane

import (
	"crypto/x509"
	"net"
	"slices"
	"testing"

	"bex.co/bex/internal/pki"
)

// TestServingCertificateCarriesLoadBalancerIP shows that a serving
// certificate carries the load balancer's address, and that one issued
// without it (by a plane from before the load balancer) is issued anew.
func TestServingCertificateCarriesLoadBalancerIP(t *testing.T) {
	p, err := loadOrCreatePKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ip := net.ParseIP("127.0.0.11")
	lbIP := net.ParseIP(LoadBalancerIP)
	old, err := loadOrCreate(p.dir, "apiserver-old", p.ca, pki.Spec{
		CommonName: "kube-apiserver", DNSNames: []string{"old"}, IPAddresses: []net.IP{ip},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(old.Cert.IPAddresses, lbIP.Equal) {
		t.Fatal("the certificate issued the old way already carries the load balancer's IP")
	}

	for _, name := range []string{"old", "new"} {
		kp, err := p.serving(name, ip)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []net.IP{ip, lbIP} {
			if !slices.ContainsFunc(kp.Cert.IPAddresses, want.Equal) {
				t.Fatalf("serving certificate of %q lacks %s: %v", name, want, kp.Cert.IPAddresses)
			}
		}
		if !slices.Contains(kp.Cert.DNSNames, "kubernetes.default.svc") || !slices.Contains(kp.Cert.DNSNames, name) {
			t.Fatalf("serving certificate of %q lacks a name: %v", name, kp.Cert.DNSNames)
		}
		again, err := p.serving(name, ip)
		if err != nil {
			t.Fatal(err)
		}
		if !again.Cert.Equal(kp.Cert) {
			t.Fatalf("a complete certificate of %q was issued anew", name)
		}
	}
}
