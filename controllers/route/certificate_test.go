package route

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// selfSigned returns a PEM certificate and key for names, valid from
// notBefore to notAfter.
func selfSigned(t *testing.T, notBefore, notAfter time.Time, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: notBefore, NotAfter: notAfter,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func TestCheckCertificate(t *testing.T) {
	valid, validKey := selfSigned(t, now.Add(-time.Hour), now.Add(90*24*time.Hour), "www.example.com", "example.com")
	wild, wildKey := selfSigned(t, now.Add(-time.Hour), now.Add(90*24*time.Hour), "*.example.com")
	expired, expiredKey := selfSigned(t, now.Add(-48*time.Hour), now.Add(-time.Hour), "www.example.com")
	_, otherKey := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour), "x.example.com")
	for _, tc := range []struct {
		name      string
		host      string
		crt, key  []byte
		wantIssue string // "" = valid
	}{
		{"valid", "www.example.com", valid, validKey, ""},
		{"valid for the apex too", "example.com", valid, validKey, ""},
		{"wildcard certificate for a name", "shop.example.com", wild, wildKey, ""},
		{"wildcard route", "*.example.com", wild, wildKey, ""},
		{"wildcard route, certificate for one name", "*.example.com", valid, validKey, "is not for *.example.com (it is for www.example.com, example.com)"},
		{"other name", "api.example.com", valid, validKey, "is not for api.example.com"},
		{"expired", "www.example.com", expired, expiredKey, "expired at"},
		{"key of another certificate", "www.example.com", valid, otherKey, "does not hold a certificate and its key"},
		{"empty", "www.example.com", nil, nil, "does not hold a certificate and its key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Data: map[string][]byte{corev1.TLSCertKey: tc.crt, corev1.TLSPrivateKeyKey: tc.key}}
			issue, notAfter := checkCertificate(sec, tc.host, now)
			if tc.wantIssue == "" {
				if issue != "" || notAfter.IsZero() {
					t.Fatalf("checkCertificate = %q, %v; want valid", issue, notAfter)
				}
				return
			}
			if !strings.Contains(issue, tc.wantIssue) || !strings.HasPrefix(issue, `Secret "tls"`) {
				t.Fatalf("checkCertificate = %q, want it to say %q", issue, tc.wantIssue)
			}
		})
	}
}
