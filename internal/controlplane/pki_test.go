package controlplane

import (
	"net"
	"slices"
	"testing"
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
	old, err := loadOrCreate(p.dir, "apiserver-old", p.ca, certSpec{
		cn: "kube-apiserver", dnsNames: []string{"old"}, ips: []net.IP{ip}, server: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(old.cert.IPAddresses, lbIP.Equal) {
		t.Fatal("the certificate issued the old way already carries the load balancer's IP")
	}

	for _, name := range []string{"old", "new"} {
		kp, err := p.serving(name, ip)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []net.IP{ip, lbIP} {
			if !slices.ContainsFunc(kp.cert.IPAddresses, want.Equal) {
				t.Fatalf("serving certificate of %q lacks %s: %v", name, want, kp.cert.IPAddresses)
			}
		}
		if !slices.Contains(kp.cert.DNSNames, "kubernetes.default.svc") || !slices.Contains(kp.cert.DNSNames, name) {
			t.Fatalf("serving certificate of %q lacks a name: %v", name, kp.cert.DNSNames)
		}
		again, err := p.serving(name, ip)
		if err != nil {
			t.Fatal(err)
		}
		if !again.cert.Equal(kp.cert) {
			t.Fatalf("a complete certificate of %q was issued anew", name)
		}
	}
}
