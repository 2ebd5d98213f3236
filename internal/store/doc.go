// Package store is bex's PostgreSQL store: the state Kubernetes is bad at
// holding. It owns the schema and its versioned migrations (the SQL files in
// migrations/, applied in order by Open), and the rows of tenants, users,
// API tokens, SSH keys and the append-only audit log; builds and their logs,
// releases, certificates and upgrade runs will join them.
//
// Secrets stay inside: an API token's secret is returned once by CreateToken
// and only its SHA-256 is stored; no exported type carries a hash.
//
// It hands out plain values: to the web server and the git receiver it
// authenticates API tokens (TokenAuthenticator), to the git receiver's SSH
// server it resolves keys to tenants (SSHKeyFinder), and from every component
// that acts on a tenant's behalf it takes audit entries (Auditor). Errors wrap
// ErrNotFound, ErrConflict, ErrInvalid or ErrUnauthenticated so that callers
// can map them to answers without reading Postgres error codes.
//
// A Store is safe for concurrent use; Open may run in several processes at
// once against one database (migrations take an advisory lock).
package store
