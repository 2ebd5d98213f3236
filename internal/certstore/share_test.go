package certstore_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
)

// testCA is a certmagic.Issuer that signs every request itself: the
// certificate flow of certmagic without ACME. It counts what it issues.
type testCA struct {
	cert   *x509.Certificate
	key    crypto.Signer
	issued atomic.Int32
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "bex test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

// IssuerKey is the same for every replica's issuer, as an ACME CA's
// directory URL would be, so that all find the certificate at one key.
func (ca *testCA) IssuerKey() string { return "bex-test-ca" }

func (ca *testCA) Issue(_ context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	n := ca.issued.Add(1)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1000 + int64(n)),
		Subject:      pkix.Name{CommonName: csr.Subject.CommonName},
		DNSNames:     csr.DNSNames,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(90 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})...)
	return &certmagic.IssuedCertificate{Certificate: chain}, nil
}

// replica is what one edge replica has: its own certificate cache and
// config over its own Storage on the shared database.
type replica struct {
	cfg *certmagic.Config
}

func newReplica(t *testing.T, dbURL string, ca *testCA) replica {
	t.Helper()
	var cfg *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return cfg, nil },
		Logger:           zap.NewNop(),
	})
	t.Cleanup(cache.Stop)
	cfg = certmagic.New(cache, certmagic.Config{
		Storage:    newStorage(t, dbURL, testOptions),
		Issuers:    []certmagic.Issuer{ca},
		OCSP:       certmagic.OCSPConfig{DisableStapling: true},
		DisableARI: true,
		Logger:     zap.NewNop(),
	})
	return replica{cfg: cfg}
}

// TestReplicasShareCertificates: two replicas asked for the same name at
// once obtain one certificate between them, under certmagic's lock in the
// database, and each serves that one from its own cache.
func TestReplicasShareCertificates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dbURL := newDatabase(t)
	ca := newTestCA(t)
	replicas := []replica{newReplica(t, dbURL, ca), newReplica(t, dbURL, ca)}
	const name = "web-acme.apps.example.test"

	var wg sync.WaitGroup
	for i, r := range replicas {
		wg.Go(func() {
			if err := r.cfg.ObtainCertSync(ctx, name); err != nil {
				t.Errorf("replica %d: ObtainCertSync: %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := ca.issued.Load(); n != 1 {
		t.Fatalf("the CA issued %d certificates for two replicas, want 1", n)
	}

	var hashes []string
	for i, r := range replicas {
		cert, err := r.cfg.CacheManagedCertificate(ctx, name)
		if err != nil {
			t.Fatalf("replica %d: CacheManagedCertificate: %v", i, err)
		}
		if cert.Leaf == nil || cert.Leaf.SerialNumber.Int64() != 1001 || len(cert.Names) != 1 || cert.Names[0] != name {
			t.Errorf("replica %d serves %v (names %v), want the CA's certificate 1001 for %s", i, cert.Leaf.SerialNumber, cert.Names, name)
		}
		hashes = append(hashes, cert.Hash())
	}
	if hashes[0] != hashes[1] {
		t.Errorf("the replicas serve different certificates: %s and %s", hashes[0], hashes[1])
	}

	// Where certmagic put it: under the issuer's key, in certmagic_keys.
	storage := replicas[1].cfg.Storage
	for _, key := range []string{
		certmagic.StorageKeys.SiteCert(ca.IssuerKey(), name),
		certmagic.StorageKeys.SitePrivateKey(ca.IssuerKey(), name),
		certmagic.StorageKeys.SiteMeta(ca.IssuerKey(), name),
	} {
		if !storage.Exists(ctx, key) {
			t.Errorf("%s is not in storage", key)
		}
	}
	var locks int
	if err := newPool(t, dbURL).QueryRow(ctx, "SELECT count(*) FROM certmagic_locks").Scan(&locks); err != nil {
		t.Fatal(err)
	}
	if locks != 0 {
		t.Errorf("%d locks are left in certmagic_locks after the obtains, want none", locks)
	}
}
