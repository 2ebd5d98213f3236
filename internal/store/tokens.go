package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

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
	// ExpiresAt is when a session token ends; nil for other tokens.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Session reports whether the token is a session token.
func (t Token) Session() bool { return t.ParentID != "" }

// Revoked reports whether the token has been revoked.
func (t Token) Revoked() bool { return t.RevokedAt != nil }

const tokenColumns = "id, tenant_id, user_id, name, prefix, created_at, last_used_at, revoked_at, parent_id, expires_at"

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
	dest := append([]any{&t.ID, &tenantID, &userID, &t.Name, &t.Prefix, &t.CreatedAt, &t.LastUsedAt, &t.RevokedAt, &parentID, &t.ExpiresAt}, extra...)
	err := row.Scan(dest...)
	t.TenantID, t.UserID, t.ParentID = orEmpty(tenantID), orEmpty(userID), orEmpty(parentID)
	return t, err
}

// CreateToken creates an API token called name and returns its secret,
// which is not stored and cannot be read again, with the token.
//
// A tenant's token has tenantID set, and userID set when a user owns it
// (empty for a machine token). An operator's token has no tenantID and the
// operator's userID. The error wraps ErrNotFound when the tenant or user
// does not exist and ErrInvalid when they do not fit together.
func (s *Store) CreateToken(ctx context.Context, tenantID, userID, name string) (string, Token, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", Token{}, fmt.Errorf("%w token name: it is empty", ErrInvalid)
	}
	if tenantID == "" && userID == "" {
		return "", Token{}, fmt.Errorf("%w token %q: it needs a tenant, or an operator to own it", ErrInvalid, name)
	}
	if tenantID != "" && !isUUID(tenantID) {
		return "", Token{}, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	if userID != "" {
		u, err := s.GetUser(ctx, userID)
		if err != nil {
			return "", Token{}, err
		}
		switch {
		case tenantID == "" && u.Role != RoleOperator:
			return "", Token{}, fmt.Errorf("%w token %q: user %s is not an operator, so the token needs the user's tenant", ErrInvalid, name, u.Email)
		case tenantID != "" && u.TenantID != tenantID:
			return "", Token{}, fmt.Errorf("%w token %q: user %s does not belong to tenant %s", ErrInvalid, name, u.Email, tenantID)
		}
	}

	secret, hash, err := newTokenSecret()
	if err != nil {
		return "", Token{}, err
	}
	t, err := scanToken(s.pool.QueryRow(ctx,
		"INSERT INTO api_tokens (tenant_id, user_id, name, prefix, hash) VALUES ($1, $2, $3, $4, $5) RETURNING "+tokenColumns,
		nullable(tenantID), nullable(userID), name, secret[:tokenDisplayLen], hash))
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

// newTokenSecret returns a fresh secret and its SHA-256.
func newTokenSecret() (string, []byte, error) {
	random := make([]byte, tokenRandomBytes)
	if _, err := rand.Read(random); err != nil {
		return "", nil, fmt.Errorf("generating token secret: %w", err)
	}
	secret := TokenSecretPrefix + tokenEncoding.EncodeToString(random)
	hash := sha256.Sum256([]byte(secret))
	return secret, hash[:], nil
}

// CreateSessionToken makes a session token from parent (a token that is
// not itself a session's): it acts for the same tenant and user under the
// same name, so that audit entries and releases name the same actor, and
// ends at expires, when parent is revoked, or when it is revoked itself
// (signing out). It returns the secret, which is not stored. Session
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
		`INSERT INTO api_tokens (tenant_id, user_id, name, prefix, hash, parent_id, expires_at)
		 SELECT tenant_id, user_id, name, $2, $3, id, $4 FROM api_tokens WHERE id = $1 AND revoked_at IS NULL
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
// revoked, without saying which.
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
		   AND (parent_id IS NULL OR EXISTS (SELECT 1 FROM api_tokens p WHERE p.id = t.parent_id AND p.revoked_at IS NULL))
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
