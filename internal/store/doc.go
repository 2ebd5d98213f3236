// Package store is bex's PostgreSQL store: the state Kubernetes is bad at
// holding. It owns the schema and its versioned migrations (the SQL files in
// migrations/, applied in order by Open), and the rows of tenants, their
// members (users with a role: admin, developer, viewer) and invitations,
// API tokens (with a scope and an optional expiry), SSH keys and the
// append-only audit log, builds and their logs, one-off runs (and the
// heartbeats of the API servers that run them, by which a run whose
// server died is marked lost),
// the immutable, per-app numbered release history, and the records of fleet
// upgrades (runs, steps, every verifier probe sample), and each app's
// recent metric series as opaque chunks appended per app and save
// (SaveAppSeries, LoadAppSeries: internal/appmetrics's, kept across
// restarts). The edge's
// certificates live in the same database, in tables internal/certstore
// reads and writes (migration 0004). Apps themselves are not rows: an App object
// in the tenant's namespace is their desired state, and builds and releases
// name an app by tenant and App name.
//
// Secrets stay inside: an API token's secret is returned once by IssueToken
// (an invitation's code once by CreateInvitation) and only its SHA-256 is
// stored; no exported type carries a hash. Changes of a tenant's members
// hold the tenant's row, so that the last admin cannot be demoted or
// removed by two changes at once. A
// release's config snapshot holds plain values and only references to the
// keys of the tenant's Secrets, never a secret value.
//
// It hands out plain values: to the web server and the git receiver it
// authenticates API tokens (AuthenticateToken), to the git receiver's SSH
// server it resolves keys to tenants (FindSSHKeyByFingerprint), to the
// build pipeline it records builds and their output (CreateBuild,
// AppendBuildLog, FinishBuild) and releases (CreateRelease,
// CreateRollbackRelease), to the web API it lists and follows them, and
// from every component that acts on a tenant's behalf it takes audit
// entries (Audit). Callers that need only part of it declare the interface
// they use. Errors wrap ErrNotFound, ErrConflict, ErrInvalid or
// ErrUnauthenticated so that callers can map them to answers without
// reading Postgres error codes.
//
// A Store is safe for concurrent use; Open may run in several processes at
// once against one database (migrations take an advisory lock).
package store
