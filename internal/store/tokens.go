package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
)

const (
	// TokenSecretPrefix starts every API token secret, so that scanners
	// and people recognise one.
	TokenSecretPrefix = "bex_"
	// tokenRandomBytes is the secret's entropy.
	tokenRandomBytes = 32
	// tokenDisplayLen is how many leading characters of the secret are
	// kept, in clear, to tell tokens apart in lists.
	tokenDisplayLen = 8
)

// tokenEncoding spells the secret's random bytes: lower-case base32 without
// padding, 52 characters for 32 bytes.
var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// tokenSecretLen is the length of every secret: the prefix and 52 base32
// characters.
const tokenSecretLen = len(TokenSecretPrefix) + (tokenRandomBytes*8+4)/5

// Token is an API token, without its secret or the secret's hash: the secret
// is returned once, by CreateToken, and the store keeps only its SHA-256.
type Token struct {
	ID string `json:"id"`
	// TenantID is the tenant the token acts for; empty for an operator's
	// token.
	TenantID string `json:"tenantID,omitempty"`
	// UserID is the user who owns the token; empty for a tenant's machine
	// token (CI, deploy hooks).
	UserID string `json:"userID,omitempty"`
	Name   string `json:"name"`
	// Prefix is the first 8 characters of the secret, for display.
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
	// ParentID is, for a session token, the token it was made from; empty
	// otherwise.
	ParentID string `json:"parentID,omitempty"`
	// ExpiresAt is when the token ends: always set for a session token,
	// nil for a token that does not expire.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Scope narrows what the token may do below its owner's role.
	Scope Scope `json:"scope"`
}

// Scope narrows what a token may do below the role of its owner (a
// machine token, which has no user, acts as an admin would).
type Scope string

const (
	// ScopeFull keeps the owner's role.
	ScopeFull Scope = "full"
	// ScopeWrite acts as a developer at most: push, deploy, env... but
	// no members or tokens of others.
	ScopeWrite Scope = "write"
	// ScopeRead acts as a viewer: it reads.
	ScopeRead Scope = "read"
)

// Scopes are the scopes, from the narrowest.
var Scopes = []Scope{ScopeRead, ScopeWrite, ScopeFull}

// Limit returns the role a token of this scope acts with when its owner
// has role: the lower of role and the scope's cap. An operator's role is
// not a tenant's and stays as it is.
func (sc Scope) Limit(role Role) Role {
	limit := map[Scope]Role{ScopeRead: RoleViewer, ScopeWrite: RoleDeveloper}[sc]
	if limit == "" || !role.Tenant() || limit.rank() >= role.rank() {
		return role
	}
	return limit
}

// ParseScope returns the scope called s ("" is full), or an error
// wrapping ErrInvalid that lists them.
func ParseScope(s string) (Scope, error) {
	if s == "" {
		return ScopeFull, nil
	}
	if sc := Scope(s); slices.Contains(Scopes, sc) {
		return sc, nil
	}
	return "", fmt.Errorf("%w scope %q: want read, write or full", ErrInvalid, s)
}

// Expired reports whether the token has ended at now.
func (t Token) Expired(now time.Time) bool { return t.ExpiresAt != nil && !t.ExpiresAt.After(now) }

// Session reports whether the token is a session token.
func (t Token) Session() bool { return t.ParentID != "" }

// Revoked reports whether the token has been revoked.
func (t Token) Revoked() bool { return t.RevokedAt != nil }

const tokenColumns = "id, tenant_id, user_id, name, prefix, created_at, last_used_at, revoked_at, parent_id, expires_at, scope"

// tokenColumnsOf is tokenColumns qualified by a table alias.
func tokenColumnsOf(alias string) string {
	cols := strings.Split(tokenColumns, ", ")
	for i, c := range cols {
		cols[i] = alias + "." + c
	}
	return strings.Join(cols, ", ")
}

func scanToken(row pgx.Row, extra ...any) (Token, error) {
	var t Token
	var tenantID, userID, parentID *string
	dest := append([]any{&t.ID, &tenantID, &userID, &t.Name, &t.Prefix, &t.CreatedAt, &t.LastUsedAt, &t.RevokedAt, &parentID, &t.ExpiresAt, &t.Scope}, extra...)
	err := row.Scan(dest...)
	t.TenantID, t.UserID, t.ParentID = orEmpty(tenantID), orEmpty(userID), orEmpty(parentID)
	return t, err
}

// MaxTokensPerOwner is how many tokens that have not ended (sessions
// aside) one user, or one tenant's machine tokens together, may have.
const MaxTokensPerOwner = 50

// maxTokenNameLen is the longest token name.
const maxTokenNameLen = 64

// NewToken is what IssueToken needs.
type NewToken struct {
	// TenantID is the tenant the token acts for; empty for an operator's
	// token.
	TenantID string
	// UserID is the user who owns it; empty for a tenant's machine token.
	UserID string
	// Name tells the token apart: 1 to 64 characters.
	Name string
	// Scope narrows it below its owner's role; empty is ScopeFull.
	Scope Scope
	// ExpiresAt ends it; zero: it does not expire.
	ExpiresAt time.Time
}

// CreateToken creates a full-scope token that does not expire: see
// IssueToken.
func (s *Store) CreateToken(ctx context.Context, tenantID, userID, name string) (string, Token, error) {
	return s.IssueToken(ctx, NewToken{TenantID: tenantID, UserID: userID, Name: name})
}

// IssueToken creates an API token and returns its secret, which is not
// stored and cannot be read again, with the token.
//
// A tenant's token has TenantID set, and UserID set when a user owns it
// (empty for a machine token). An operator's token has no TenantID and the
// operator's UserID. The error wraps ErrNotFound when the tenant or user
// does not exist, ErrInvalid when they do not fit together or the name,
// scope or expiry is wrong, and ErrQuotaExceeded when the owner has
// MaxTokensPerOwner tokens that have not ended.
func (s *Store) IssueToken(ctx context.Context, nt NewToken) (string, Token, error) {
	return issueToken(ctx, s.pool, nt)
}

// issueToken is IssueToken on q, which may be a transaction.
func issueToken(ctx context.Context, q querier, nt NewToken) (string, Token, error) {
	tenantID, userID := nt.TenantID, nt.UserID
	name := strings.TrimSpace(nt.Name)
	scope, err := ParseScope(string(nt.Scope))
	switch {
	case name == "":
		return "", Token{}, fmt.Errorf("%w token name: it is empty", ErrInvalid)
	case len(name) > maxTokenNameLen || strings.ContainsFunc(name, unicode.IsControl):
		return "", Token{}, fmt.Errorf("%w token name %q: at most %d characters, none a control character", ErrInvalid, name, maxTokenNameLen)
	case err != nil:
		return "", Token{}, err
	case !nt.ExpiresAt.IsZero() && !nt.ExpiresAt.After(time.Now()):
		return "", Token{}, fmt.Errorf("%w token %q: its expiry %s has passed", ErrInvalid, name, nt.ExpiresAt.UTC().Format(time.RFC3339))
	case tenantID == "" && userID == "":
		return "", Token{}, fmt.Errorf("%w token %q: it needs a tenant, or an operator to own it", ErrInvalid, name)
	}
	if tenantID != "" && !isUUID(tenantID) {
		return "", Token{}, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	if userID != "" {
		if !isUUID(userID) {
			return "", Token{}, fmt.Errorf("user %q: %w", userID, ErrNotFound)
		}
		u, err := scanUser(q.QueryRow(ctx, "SELECT "+userColumns+" FROM users WHERE id = $1", userID))
		if errors.Is(err, pgx.ErrNoRows) {
			return "", Token{}, fmt.Errorf("user %s: %w", userID, ErrNotFound)
		}
		if err != nil {
			return "", Token{}, fmt.Errorf("reading user %s: %w", userID, err)
		}
		switch {
		case tenantID == "" && u.Role != RoleOperator:
			return "", Token{}, fmt.Errorf("%w token %q: user %s is not an operator, so the token needs the user's tenant", ErrInvalid, name, u.Email)
		case tenantID != "" && u.TenantID != tenantID:
			return "", Token{}, fmt.Errorf("%w token %q: user %s does not belong to tenant %s", ErrInvalid, name, u.Email, tenantID)
		}
	}
	var expires *time.Time
	if !nt.ExpiresAt.IsZero() {
		expires = &nt.ExpiresAt
	}

	secret, hash, err := newTokenSecret()
	if err != nil {
		return "", Token{}, err
	}
	// The count and the insert are one statement: the owner's limit holds
	// but for concurrent creations, which may pass it by their number.
	t, err := scanToken(q.QueryRow(ctx,
		`INSERT INTO api_tokens (tenant_id, user_id, name, prefix, hash, scope, expires_at)
		 SELECT $1, $2, $3, $4, $5, $6, $7
		 WHERE (SELECT count(*) FROM api_tokens
		        WHERE tenant_id IS NOT DISTINCT FROM $1 AND user_id IS NOT DISTINCT FROM $2
		          AND parent_id IS NULL AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) < $8
		 RETURNING `+tokenColumns,
		nullable(tenantID), nullable(userID), name, secret[:tokenDisplayLen], hash, string(scope), expires, MaxTokensPerOwner))
	if errors.Is(err, pgx.ErrNoRows) {
		return "", Token{}, &QuotaError{Quota: "tokens", Limit: fmt.Sprint(MaxTokensPerOwner),
			Detail: "that many tokens of the owner have not ended; revoke some (bex tokens list, bex tokens revoke) first"}
	}
	if c, ok := constraintViolated(err, codeForeignKeyViolation); ok {
		switch c {
		case "api_tokens_tenant_id_fkey":
			return "", Token{}, fmt.Errorf("tenant %s: %w", tenantID, ErrNotFound)
		case "api_tokens_user_in_tenant":
			return "", Token{}, fmt.Errorf("%w token %q: user %s does not belong to tenant %s", ErrInvalid, name, userID, tenantID)
		default:
			return "", Token{}, fmt.Errorf("user %s: %w", userID, ErrNotFound)
		}
	}
	if err != nil {
		return "", Token{}, fmt.Errorf("creating token %q: %w", name, err)
	}
	return secret, t, nil
}

// newTokenSecret returns a fresh token secret and its SHA-256.
func newTokenSecret() (string, []byte, error) { return newSecret(TokenSecretPrefix) }

// newSecret returns prefix and 32 random bytes in base32, and its SHA-256.
func newSecret(prefix string) (string, []byte, error) {
	random := make([]byte, tokenRandomBytes)
	if _, err := rand.Read(random); err != nil {
		return "", nil, fmt.Errorf("generating a secret: %w", err)
	}
	secret := prefix + tokenEncoding.EncodeToString(random)
	hash := sha256.Sum256([]byte(secret))
	return secret, hash[:], nil
}

// CreateSessionToken makes a session token from parent (a token that is
// not itself a session's): it acts for the same tenant and user under the
// same name and scope, so that audit entries and releases name the same
// actor, and ends at expires, when parent is revoked or expires, or when it
// is revoked itself (signing out). It returns the secret, which is not stored. Session
// tokens that ended more than a day ago are deleted on the way. The error
// wraps ErrInvalid when parent is a session token or expires has passed.
func (s *Store) CreateSessionToken(ctx context.Context, parent Token, expires time.Time) (string, Token, error) {
	switch {
	case parent.Session():
		return "", Token{}, fmt.Errorf("%w session: a session token cannot open another session", ErrInvalid)
	case !expires.After(time.Now()):
		return "", Token{}, fmt.Errorf("%w session: it would have ended already", ErrInvalid)
	}
	if _, err := s.pool.Exec(ctx,
		"DELETE FROM api_tokens WHERE parent_id IS NOT NULL AND coalesce(revoked_at, expires_at) < now() - interval '1 day'"); err != nil {
		return "", Token{}, fmt.Errorf("deleting ended sessions: %w", err)
	}
	secret, hash, err := newTokenSecret()
	if err != nil {
		return "", Token{}, err
	}
	t, err := scanToken(s.pool.QueryRow(ctx,
		`INSERT INTO api_tokens (tenant_id, user_id, name, prefix, hash, parent_id, expires_at, scope)
		 SELECT tenant_id, user_id, name, $2, $3, id, $4, scope FROM api_tokens
		 WHERE id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
		 RETURNING `+tokenColumns,
		parent.ID, secret[:tokenDisplayLen], hash, expires))
	if errors.Is(err, pgx.ErrNoRows) {
		return "", Token{}, fmt.Errorf("api token %s: %w", parent.ID, ErrUnauthenticated)
	}
	if err != nil {
		return "", Token{}, fmt.Errorf("creating session token: %w", err)
	}
	return secret, t, nil
}

// AuthenticateToken returns the token whose secret this is, and records
// that it was used. The error wraps ErrUnauthenticated when the secret is
// malformed, unknown, revoked or expired, or a session's parent is
// revoked or expired, without saying which. A token whose user was removed
// is gone with them: unknown.
func (s *Store) AuthenticateToken(ctx context.Context, secret string) (Token, error) {
	if len(secret) != tokenSecretLen || !strings.HasPrefix(secret, TokenSecretPrefix) {
		return Token{}, fmt.Errorf("api token: %w", ErrUnauthenticated)
	}
	want := sha256.Sum256([]byte(secret))
	var stored []byte
	// One statement, so that a token revoked concurrently is either used
	// before its revocation or refused.
	t, err := scanToken(s.pool.QueryRow(ctx,
		`UPDATE api_tokens t SET last_used_at = now()
		 WHERE hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
		   AND (parent_id IS NULL OR EXISTS (SELECT 1 FROM api_tokens p WHERE p.id = t.parent_id AND p.revoked_at IS NULL
		                                     AND (p.expires_at IS NULL OR p.expires_at > now())))
		 RETURNING `+tokenColumnsOf("t")+", t.hash",
		want[:]), &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, fmt.Errorf("api token: %w", ErrUnauthenticated)
	}
	if err != nil {
		return Token{}, fmt.Errorf("authenticating api token: %w", err)
	}
	if subtle.ConstantTimeCompare(stored, want[:]) != 1 {
		return Token{}, fmt.Errorf("api token: %w", ErrUnauthenticated)
	}
	return t, nil
}

// RevokeToken revokes the token with the given ID that acts for tenantID
// (empty: an operator's token). Revoking a revoked token changes nothing.
// The error wraps ErrNotFound when the tenant has no such token.
func (s *Store) RevokeToken(ctx context.Context, tenantID, id string) error {
	if !isUUID(id) || tenantID != "" && !isUUID(tenantID) {
		return fmt.Errorf("token %q: %w", id, ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx,
		"UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2",
		id, nullable(tenantID))
	if err != nil {
		return fmt.Errorf("revoking token %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("token %s: %w", id, ErrNotFound)
	}
	return nil
}

// ListTokens returns the tokens that act for tenantID (empty: the
// operators' tokens), revoked ones included, oldest first.
func (s *Store) ListTokens(ctx context.Context, tenantID string) ([]Token, error) {
	if tenantID != "" && !isUUID(tenantID) {
		return nil, nil
	}
	query, args := "SELECT "+tokenColumns+" FROM api_tokens WHERE tenant_id = $1 ORDER BY created_at, id", []any{tenantID}
	if tenantID == "" {
		query, args = "SELECT "+tokenColumns+" FROM api_tokens WHERE tenant_id IS NULL ORDER BY created_at, id", nil
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	tokens, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Token, error) { return scanToken(row) })
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	return tokens, nil
}

// GetToken returns the token with the given ID that acts for tenantID
// (empty: an operator's token), revoked or not, or an error wrapping
// ErrNotFound.
func (s *Store) GetToken(ctx context.Context, tenantID, id string) (Token, error) {
	if !isUUID(id) || tenantID != "" && !isUUID(tenantID) {
		return Token{}, fmt.Errorf("token %q: %w", id, ErrNotFound)
	}
	t, err := scanToken(s.pool.QueryRow(ctx,
		"SELECT "+tokenColumns+" FROM api_tokens WHERE id = $1 AND tenant_id IS NOT DISTINCT FROM $2", id, nullable(tenantID)))
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, fmt.Errorf("token %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Token{}, fmt.Errorf("reading token %s: %w", id, err)
	}
	return t, nil
}
