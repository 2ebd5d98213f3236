package edge

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/caddyserver/certmagic"
)

// CertificateState is what the shared certificate storage says about one
// hostname: whether a certificate was issued, and whether the last attempt
// to obtain one failed.
type CertificateState struct {
	// Issued is true when a certificate for the hostname is stored.
	Issued bool `json:"issued"`
	// NotAfter is the stored certificate's expiry.
	NotAfter time.Time `json:"notAfter,omitzero"`
	// Issuer is the issuer key the certificate came from.
	Issuer string `json:"issuer,omitempty"`
	// Failure is the last failed attempt since a certificate was last
	// obtained; with Issued true it was a failed renewal.
	Failure *CertificateFailure `json:"failure,omitempty"`
}

// CertificateFailure is a failed attempt to obtain a certificate.
type CertificateFailure struct {
	At time.Time `json:"at"`
	// Error is the CA's or the issuer's answer, as certmagic reported it.
	Error string `json:"error"`
}

// Certificates reads and records certificate state in the storage the edge
// replicas share, so that the Route controller (or any replica) sees what
// happened on any of them. Certificates are stored by certmagic under its
// own keys; failures under "bex/failures/<hostname>.json".
type Certificates struct {
	// Storage is the edge's certmagic storage.
	Storage certmagic.Storage
	// IssuerKeys are the keys of the issuers the edge uses, in order.
	IssuerKeys []string
}

// failureKey is where the last failure for host is kept.
func failureKey(host string) string {
	return path.Join("bex", "failures", certmagic.StorageKeys.Safe(host)+".json")
}

// State returns the state of host's certificate. A host nobody asked a
// certificate for has the zero state.
func (c *Certificates) State(ctx context.Context, host string) (CertificateState, error) {
	var st CertificateState
	for _, key := range c.IssuerKeys {
		data, err := c.Storage.Load(ctx, certmagic.StorageKeys.SiteCert(key, host))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return st, fmt.Errorf("loading the certificate of %s: %w", host, err)
		}
		block, _ := pem.Decode(data)
		if block == nil {
			return st, fmt.Errorf("the stored certificate of %s is not PEM", host)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return st, fmt.Errorf("parsing the stored certificate of %s: %w", host, err)
		}
		st.Issued, st.NotAfter, st.Issuer = true, cert.NotAfter, key
		break
	}
	data, err := c.Storage.Load(ctx, failureKey(host))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return st, fmt.Errorf("loading the last failure of %s: %w", host, err)
	default:
		var f CertificateFailure
		if err := json.Unmarshal(data, &f); err != nil {
			return st, fmt.Errorf("decoding the last failure of %s: %w", host, err)
		}
		st.Failure = &f
	}
	return st, nil
}

// RecordFailure stores a failed attempt for host.
func (c *Certificates) RecordFailure(ctx context.Context, host string, at time.Time, cause error) error {
	data, err := json.Marshal(CertificateFailure{At: at.UTC(), Error: cause.Error()})
	if err != nil {
		return err
	}
	return c.Storage.Store(ctx, failureKey(host), data)
}

// ClearFailure forgets host's last failure, after a certificate was
// obtained.
func (c *Certificates) ClearFailure(ctx context.Context, host string) error {
	err := c.Storage.Delete(ctx, failureKey(host))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
