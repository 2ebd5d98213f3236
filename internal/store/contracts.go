package store

import "context"

// TokenAuthenticator resolves API token secrets; the web server and the git
// receiver's smart-HTTP endpoint use it.
//
// AuthenticateToken returns the token whose secret this is and records the
// use. For a secret that is malformed, unknown or revoked it returns an
// error wrapping ErrUnauthenticated, the same for each; other errors mean
// the store failed, not the caller. It is safe for concurrent use and stops
// when ctx ends.
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, secret string) (Token, error)
}

// SSHKeyFinder resolves the key an SSH client presents to the tenant that
// registered it; the git receiver's SSH server uses it.
//
// FindSSHKeyByFingerprint takes the key's SHA256: fingerprint
// (ssh.FingerprintSHA256) and returns an error wrapping ErrNotFound when no
// tenant registered that key. It is safe for concurrent use and stops when
// ctx ends.
type SSHKeyFinder interface {
	FindSSHKeyByFingerprint(ctx context.Context, fingerprint string) (SSHKey, error)
}

// Auditor records what is done on a tenant's or the platform's behalf.
//
// Audit returns once the entry is stored; an entry is never changed or
// removed afterwards. The error wraps ErrInvalid when the entry lacks an
// actor or an action. It is safe for concurrent use and stops when ctx ends,
// in which case the entry may or may not have been stored.
type Auditor interface {
	Audit(ctx context.Context, e AuditEntry) error
}

var (
	_ TokenAuthenticator = (*Store)(nil)
	_ SSHKeyFinder       = (*Store)(nil)
	_ Auditor            = (*Store)(nil)
)
