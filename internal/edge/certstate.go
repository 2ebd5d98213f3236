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
	// Refusal is the last time the edge refused to obtain a certificate
	// for a name the hostname claims (the name itself, or one under a
	// wildcard) because the tenant's CertificateBudget was spent.
	Refusal *CertificateRefusal `json:"refusal,omitempty"`
}

// CertificateFailure is a failed attempt to obtain a certificate.
type CertificateFailure struct {
	At time.Time `json:"at"`
	// Error is the CA's or the issuer's answer, as certmagic reported it.
	Error string `json:"error"`
}

// CertificateRefusal is a certificate the edge refused to obtain because
// the tenant's CertificateBudget was spent.
type CertificateRefusal struct {
	At time.Time `json:"at"`
	// Name is the hostname a client asked for.
	Name string `json:"name"`
	// Tenant is the tenant whose budget was spent.
	Tenant string `json:"tenant"`
	// Budget is how many new names the tenant may get per Window.
	Budget int           `json:"budget"`
	Window time.Duration `json:"window"`
	// Until is when the budget has room again.
	Until time.Time `json:"until"`
}

// Certificates reads and records certificate state in the storage the edge
// replicas share, so that the Route controller (or any replica) sees what
// happened on any of them. Certificates are stored by certmagic under its
// own keys; failures under "bex/failures/<hostname>.json", and refusals under
// "bex/refusals/<claim>.json", by the hostname of the Route that claims the
// refused name.
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

// refusalKey is where the last refusal under the claim is kept.
func refusalKey(claim string) string {
	return path.Join("bex", "refusals", certmagic.StorageKeys.Safe(claim)+".json")
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
	data, err = c.Storage.Load(ctx, refusalKey(host))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return st, fmt.Errorf("loading the last refusal of %s: %w", host, err)
	default:
		var r CertificateRefusal
		if err := json.Unmarshal(data, &r); err != nil {
			return st, fmt.Errorf("decoding the last refusal of %s: %w", host, err)
		}
		st.Refusal = &r
	}
	return st, nil
}

// RecordRefusal stores a refused certificate under claim, the hostname of
// the Route that claims the refused name.
func (c *Certificates) RecordRefusal(ctx context.Context, claim string, r CertificateRefusal) error {
	r.At, r.Until = r.At.UTC(), r.Until.UTC()
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return c.Storage.Store(ctx, refusalKey(claim), data)
}

// Stored reports whether a certificate for host is in the storage, from
// any of the issuers: one that is loaded or renewed, not a new name.
func (c *Certificates) Stored(ctx context.Context, host string) bool {
	for _, key := range c.IssuerKeys {
		if c.Storage.Exists(ctx, certmagic.StorageKeys.SiteCert(key, host)) {
			return true
		}
	}
	return false
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
