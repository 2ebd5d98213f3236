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

// BuildRecorder records builds and their output; the builder uses it.
//
// CreateBuild gives the build the app's next number, also under
// concurrency. AppendBuildLog appends lines in the order of the calls that
// return, and refuses (ErrConflict) once the build has finished, so a
// builder appends every line before FinishBuild, which may be called once.
// The lines of a failed build are kept. Errors wrap ErrNotFound for an
// unknown tenant or build. It is safe for concurrent use and stops when ctx
// ends.
type BuildRecorder interface {
	CreateBuild(ctx context.Context, nb NewBuild) (Build, error)
	AppendBuildLog(ctx context.Context, buildID string, lines ...string) error
	FinishBuild(ctx context.Context, buildID string, r BuildResult) (Build, error)
}

// ReleaseRecorder records releases; whoever turns a build or a rollback
// into a release uses it.
//
// CreateRelease gives the release the app's next number, v1, v2, ...,
// without gaps and also under concurrency; a release is never changed
// afterwards. CreateRollbackRelease records a copy of an earlier release as
// a new one. GetRelease with number 0 returns the latest. Errors wrap
// ErrNotFound for an unknown tenant, app, build or release, and ErrInvalid
// for a release without image, description or author. It is safe for
// concurrent use and stops when ctx ends.
type ReleaseRecorder interface {
	CreateRelease(ctx context.Context, nr NewRelease) (Release, error)
	CreateRollbackRelease(ctx context.Context, tenantID, app string, to int, createdBy string) (Release, error)
	GetRelease(ctx context.Context, tenantID, app string, number int) (Release, error)
}

var (
	_ BuildRecorder      = (*Store)(nil)
	_ ReleaseRecorder    = (*Store)(nil)
	_ TokenAuthenticator = (*Store)(nil)
	_ SSHKeyFinder       = (*Store)(nil)
	_ Auditor            = (*Store)(nil)
)
