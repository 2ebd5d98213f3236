package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// PEM block types of what this package writes and reads.
const (
	certBlock  = "CERTIFICATE"
	pkcs8Block = "PRIVATE KEY"
	sec1Block  = "EC PRIVATE KEY"
	pkcs1Block = "RSA PRIVATE KEY"
)

// EncodeCert returns cert as a PEM "CERTIFICATE" block.
func EncodeCert(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: cert.Raw})
}

// CertPEM returns kp's certificate as a PEM "CERTIFICATE" block.
func (kp *KeyPair) CertPEM() []byte { return EncodeCert(kp.Cert) }

// KeyPEM returns kp's key as a PEM "PRIVATE KEY" block (PKCS #8).
func (kp *KeyPair) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(kp.Key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pkcs8Block, Bytes: der}), nil
}

// ECKeyPEM returns kp's ECDSA key as a PEM "EC PRIVATE KEY" block (SEC 1).
func (kp *KeyPair) ECKeyPEM() ([]byte, error) {
	key, ok := kp.Key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("encoding key: a %T is not an ECDSA key", kp.Key)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: sec1Block, Bytes: der}), nil
}

// ParseKeyPair parses a PEM certificate (the first block of certPEM) and its
// PEM key, a "PRIVATE KEY" (PKCS #8), "EC PRIVATE KEY" (SEC 1) or "RSA
// PRIVATE KEY" (PKCS #1, as Cluster API and kubeadm write) block. It
// fails when the key is not the certificate's.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	return parseKeyPair(certPEM, keyPEM, "certificate", "key")
}

// parseKeyPair is ParseKeyPair with the names its errors give the
// certificate and the key.
func parseKeyPair(certPEM, keyPEM []byte, certName, keyName string) (*KeyPair, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", certName, err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", keyName, err)
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of %s", keyName, certName)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

func parseCert(data []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != certBlock {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseKey(data []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("not PEM")
	}
	var key any
	var err error
	switch b.Type {
	case pkcs8Block:
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case sec1Block:
		key, err = x509.ParseECPrivateKey(b.Bytes)
	case pkcs1Block:
		// Cluster API's certificates, as kubeadm's, have RSA keys.
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q is not a PKCS #8, SEC 1 or PKCS #1 key", b.Type)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T key cannot sign", key)
	}
	return signer, nil
}
