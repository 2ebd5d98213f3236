package pki_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"bex.co/bex/internal/pki"
)

func newCA(t *testing.T) *pki.KeyPair {
	t.Helper()
	ca, err := pki.NewCA(pki.Spec{CommonName: "test CA", NotAfter: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func servingSpec(notAfter time.Time) pki.Spec {
	return pki.Spec{
		CommonName:  "app.test",
		DNSNames:    []string{"app.test", "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotAfter:    notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
}

func TestServingCertificateVerifiesAgainstItsCA(t *testing.T) {
	ca := newCA(t)
	if !ca.Cert.IsCA || ca.Cert.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Fatalf("CA: IsCA %v, key usage %v", ca.Cert.IsCA, ca.Cert.KeyUsage)
	}
	kp, err := ca.Issue(servingSpec(time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if kp.Cert.IsCA || kp.Cert.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("serving certificate: IsCA %v, key usage %v", kp.Cert.IsCA, kp.Cert.KeyUsage)
	}
	for _, name := range []string{"app.test", "localhost", "127.0.0.1"} {
		_, err := kp.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name})
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "other.test"}); err == nil {
		t.Error("the certificate verifies for a name it does not carry")
	}
	if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: newCA(t).Pool(), DNSName: "app.test"}); err == nil {
		t.Error("the certificate verifies against another CA")
	}
	if _, err := kp.Cert.Verify(x509.VerifyOptions{
		Roots: ca.Pool(), DNSName: "app.test", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err == nil {
		t.Error("a serving certificate verifies as a client certificate")
	}
}

func TestClientCertificateNamesUserAndGroups(t *testing.T) {
	ca := newCA(t)
	kp, err := ca.Issue(pki.Spec{
		CommonName:   "alice",
		Organization: []string{"system:masters", "devs"},
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The groups are one DER SET, so they come back sorted.
	if kp.Cert.Subject.CommonName != "alice" || !slices.Equal(kp.Cert.Subject.Organization, []string{"devs", "system:masters"}) {
		t.Errorf("subject %v", kp.Cert.Subject)
	}
	if _, err := kp.Cert.Verify(x509.VerifyOptions{
		Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		t.Errorf("verifying as a client certificate: %v", err)
	}
}

func TestSignKeepsTheRequestersKey(t *testing.T) {
	ca := newCA(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	notBefore := time.Now().Add(-time.Minute).Truncate(time.Second)
	spec := servingSpec(time.Now().Add(time.Hour))
	spec.NotBefore = notBefore
	cert, err := ca.Sign(spec, key.Public())
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		t.Error("the certificate is not for the given key")
	}
	if !cert.NotBefore.Equal(notBefore) {
		t.Errorf("NotBefore %v, want %v", cert.NotBefore, notBefore)
	}
	if cert.SerialNumber.Sign() <= 0 {
		t.Errorf("serial number %v", cert.SerialNumber)
	}
}

func TestMaxPathLenZeroCASignsNoCA(t *testing.T) {
	root, err := pki.NewCA(pki.Spec{CommonName: "root", NotAfter: time.Now().Add(time.Hour), MaxPathLenZero: true})
	if err != nil {
		t.Fatal(err)
	}
	if root.Cert.MaxPathLen != 0 || !root.Cert.MaxPathLenZero {
		t.Errorf("MaxPathLen %d, MaxPathLenZero %v", root.Cert.MaxPathLen, root.Cert.MaxPathLenZero)
	}
}

func TestSpecWithoutNotAfterIsRefused(t *testing.T) {
	if _, err := pki.NewCA(pki.Spec{CommonName: "no end"}); err == nil {
		t.Error("a CA without NotAfter was made")
	}
	if _, err := newCA(t).Issue(pki.Spec{CommonName: "no end"}); err == nil {
		t.Error("a certificate without NotAfter was issued")
	}
}

func TestPEMRoundTrip(t *testing.T) {
	kp, err := newCA(t).Issue(servingSpec(time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	for name, encode := range map[string]func() ([]byte, error){"PKCS #8": kp.KeyPEM, "SEC 1": kp.ECKeyPEM} {
		keyPEM, err := encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := pki.ParseKeyPair(kp.CertPEM(), keyPEM)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !back.Cert.Equal(kp.Cert) || !back.Key.Public().(*ecdsa.PublicKey).Equal(kp.Key.Public()) {
			t.Errorf("%s: the parsed key pair differs", name)
		}
	}
	other, err := newCA(t).Issue(servingSpec(time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := other.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.ParseKeyPair(kp.CertPEM(), otherKey); err == nil {
		t.Error("a certificate parsed with another certificate's key")
	}
	if _, err := pki.ParseKeyPair([]byte("not PEM"), otherKey); err == nil {
		t.Error("a certificate that is not PEM parsed")
	}
}

func TestFilesRoundTripWithModes(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		files    pki.Files
		certMode fs.FileMode
		keyBlock string
	}{
		{"defaults", pki.Files{}, 0o644, "-----BEGIN PRIVATE KEY-----"},
		{"private EC", pki.Files{CertMode: 0o600, ECKey: true}, 0o600, "-----BEGIN EC PRIVATE KEY-----"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.files
			f.CertFile, f.KeyFile = filepath.Join(dir, tc.name+".crt"), filepath.Join(dir, tc.name+".key")
			if _, err := f.Read(); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("reading missing files: %v, want fs.ErrNotExist", err)
			}
			kp, err := ca.Issue(servingSpec(time.Now().Add(time.Hour)))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Write(kp); err != nil {
				t.Fatal(err)
			}
			for file, want := range map[string]fs.FileMode{f.CertFile: tc.certMode, f.KeyFile: 0o600} {
				st, err := os.Stat(file)
				if err != nil {
					t.Fatal(err)
				}
				// The umask may take bits away, never add them.
				if got := st.Mode().Perm(); got&^want != 0 || got&0o600 != 0o600 {
					t.Errorf("%s: mode %v, want %v", filepath.Base(file), got, want)
				}
			}
			if key, _ := os.ReadFile(f.KeyFile); !bytes.HasPrefix(key, []byte(tc.keyBlock)) {
				t.Errorf("key file starts %q, want %q", key[:min(len(key), 40)], tc.keyBlock)
			}
			back, err := f.Read()
			if err != nil {
				t.Fatal(err)
			}
			if !back.Cert.Equal(kp.Cert) {
				t.Error("read a different certificate")
			}
			if err := os.Remove(f.KeyFile); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Read(); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("reading without the key: %v, want fs.ErrNotExist", err)
			}
		})
	}
}

// TestCoversAndValidFor shows what makes a caller issue a certificate anew:
// a name or address it lacks, or too little validity left.
func TestCoversAndValidFor(t *testing.T) {
	ca := newCA(t)
	spec := servingSpec(time.Now().Add(30 * 24 * time.Hour))
	kp, err := ca.Issue(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !pki.Covers(kp.Cert, spec) {
		t.Error("a certificate does not cover its own spec")
	}
	narrower := spec
	narrower.DNSNames = []string{"localhost"}
	narrower.IPAddresses = nil
	if !pki.Covers(kp.Cert, narrower) {
		t.Error("a certificate does not cover a subset of its names")
	}
	moreNames := spec
	moreNames.DNSNames = append(slices.Clone(spec.DNSNames), "new.test")
	if pki.Covers(kp.Cert, moreNames) {
		t.Error("a certificate covers a name it lacks")
	}
	moreIPs := spec
	moreIPs.IPAddresses = append(slices.Clone(spec.IPAddresses), net.ParseIP("10.96.0.1"))
	if pki.Covers(kp.Cert, moreIPs) {
		t.Error("a certificate covers an address it lacks")
	}

	if !pki.ValidFor(kp.Cert, 7*24*time.Hour) {
		t.Error("a certificate with 30 days left is not valid for a week")
	}
	if pki.ValidFor(kp.Cert, 31*24*time.Hour) {
		t.Error("a certificate with 30 days left is valid for 31")
	}
	expired, err := ca.Issue(pki.Spec{
		CommonName: "old", DNSNames: spec.DNSNames,
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	if pki.ValidFor(expired.Cert, 0) {
		t.Error("an expired certificate is valid")
	}
	future, err := ca.Issue(pki.Spec{
		CommonName: "future", NotBefore: time.Now().Add(time.Hour), NotAfter: time.Now().Add(2 * time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	if pki.ValidFor(future.Cert, 0) {
		t.Error("a certificate not yet valid is valid")
	}
}

// TestParseRSAKeyPair reads a key pair as Cluster API writes a cluster CA:
// an RSA key in a PKCS #1 "RSA PRIVATE KEY" block. Without PKCS #1 support
// the local fleet could not sign a machine's certificates with it.
func TestParseRSAKeyPair(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	ca, err := pki.ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("parsing a PKCS #1 key pair: %v", err)
	}
	leaf, err := ca.Issue(servingSpec(time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatalf("issuing with an RSA CA: %v", err)
	}
	if err := leaf.Cert.CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("the issued certificate does not verify against the RSA CA: %v", err)
	}
}
