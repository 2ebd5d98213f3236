package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// InvitationCodePrefix starts every invitation code, so that people and
// scanners tell one from an API token.
const InvitationCodePrefix = "bexinv_"

// invitationCodeLen is the length of every code: the prefix and 52 base32
// characters (32 random bytes).
var invitationCodeLen = len(InvitationCodePrefix) + tokenSecretLen - len(TokenSecretPrefix)

// Invitation is an invitation to join a tenant with a role, without its
// code or the code's hash: the code is returned once, by
// CreateInvitation.
type Invitation struct {
	ID       string `json:"id"`
	TenantID string `json:"tenantID"`
	Email    string `json:"email"`
	Role     Role   `json:"role"`
	// Prefix is the first characters of the code, for display.
	Prefix string `json:"prefix"`
	// InvitedBy is who invited, as the audit log names them.
	InvitedBy string    `json:"invitedBy"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

const invitationColumns = "id, tenant_id, email, role, prefix, invited_by, created_at, expires_at"

func scanInvitation(row pgx.Row) (Invitation, error) {
	var i Invitation
	err := row.Scan(&i.ID, &i.TenantID, &i.Email, &i.Role, &i.Prefix, &i.InvitedBy, &i.CreatedAt, &i.ExpiresAt)
	return i, err
}

// pending is the condition of an invitation that can still be accepted.
const pending = "accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()"

// NewInvitation is what CreateInvitation needs.
type NewInvitation struct {
	TenantID string
	Email    string
	Role     Role
	// InvitedBy is who invites, as the audit log names them.
	InvitedBy string
	// ExpiresAt ends the invitation; it must be in the future.
	ExpiresAt time.Time
}

// CreateInvitation invites an email to the tenant with a role and returns
// the invitation's code, which is not stored and cannot be read again,
// with the invitation. A pending invitation of the same email is replaced:
// its code stops working. The error wraps ErrInvalid for a malformed email,
// a role that is not a tenant's or an expiry that has passed, ErrConflict
// when the email is a member already, ErrNotFound when the tenant does not
// exist, and ErrQuotaExceeded when the tenant has MaxMembers members and
// pending invitations.
func (s *Store) CreateInvitation(ctx context.Context, ni NewInvitation) (string, Invitation, error) {
	email, err := checkEmail(ni.Email)
	switch {
	case err != nil:
		return "", Invitation{}, err
	case !ni.Role.Tenant():
		return "", Invitation{}, fmt.Errorf("%w role %q: want viewer, developer or admin", ErrInvalid, ni.Role)
	case !ni.ExpiresAt.After(time.Now()):
		return "", Invitation{}, fmt.Errorf("%w invitation: its expiry has passed", ErrInvalid)
	case strings.TrimSpace(ni.InvitedBy) == "":
		return "", Invitation{}, fmt.Errorf("%w invitation: it needs who invites", ErrInvalid)
	case !isUUID(ni.TenantID):
		return "", Invitation{}, fmt.Errorf("tenant %q: %w", ni.TenantID, ErrNotFound)
	}
	code, hash, err := newSecret(InvitationCodePrefix)
	if err != nil {
		return "", Invitation{}, err
	}
	var inv Invitation
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockTenant(ctx, tx, ni.TenantID); err != nil {
			return err
		}
		if _, err := getMember(ctx, tx, ni.TenantID, email); err == nil {
			return fmt.Errorf("%s is a member already: %w", email, ErrConflict)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE invitations SET revoked_at = now() WHERE tenant_id = $1 AND lower(email) = lower($2) AND "+pending,
			ni.TenantID, email); err != nil {
			return fmt.Errorf("replacing the pending invitation of %s: %w", email, err)
		}
		var n int
		if err := tx.QueryRow(ctx,
			"SELECT (SELECT count(*) FROM users WHERE tenant_id = $1) + (SELECT count(*) FROM invitations WHERE tenant_id = $1 AND "+pending+")",
			ni.TenantID).Scan(&n); err != nil {
			return fmt.Errorf("counting members: %w", err)
		}
		if n >= MaxMembers {
			return &QuotaError{Quota: "members", Limit: fmt.Sprint(MaxMembers),
				Detail: fmt.Sprintf("it has %d members and pending invitations; remove a member or revoke an invitation first", n)}
		}
		inv, err = scanInvitation(tx.QueryRow(ctx,
			`INSERT INTO invitations (tenant_id, email, role, prefix, hash, invited_by, expires_at)
			 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+invitationColumns,
			ni.TenantID, email, string(ni.Role), code[:len(InvitationCodePrefix)+4], hash, ni.InvitedBy, ni.ExpiresAt))
		if err != nil {
			return fmt.Errorf("creating the invitation of %s: %w", email, err)
		}
		return nil
	})
	if err != nil {
		return "", Invitation{}, err
	}
	return code, inv, nil
}

// ListInvitations returns the tenant's pending invitations, oldest first.
func (s *Store) ListInvitations(ctx context.Context, tenantID string) ([]Invitation, error) {
	if !isUUID(tenantID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx,
		"SELECT "+invitationColumns+" FROM invitations WHERE tenant_id = $1 AND "+pending+" ORDER BY created_at, id", tenantID)
	if err != nil {
		return nil, fmt.Errorf("listing invitations: %w", err)
	}
	invs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Invitation, error) { return scanInvitation(row) })
	if err != nil {
		return nil, fmt.Errorf("listing invitations: %w", err)
	}
	return invs, nil
}

// RevokeInvitation ends the tenant's pending invitation with the ID: its
// code stops working. The error wraps ErrNotFound when the tenant has no
// such pending invitation.
func (s *Store) RevokeInvitation(ctx context.Context, tenantID, id string) (Invitation, error) {
	if !isUUID(tenantID) || !isUUID(id) {
		return Invitation{}, fmt.Errorf("invitation %q: %w", id, ErrNotFound)
	}
	inv, err := scanInvitation(s.pool.QueryRow(ctx,
		"UPDATE invitations SET revoked_at = now() WHERE id = $1 AND tenant_id = $2 AND "+pending+" RETURNING "+invitationColumns,
		id, tenantID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Invitation{}, fmt.Errorf("pending invitation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Invitation{}, fmt.Errorf("revoking invitation %s: %w", id, err)
	}
	return inv, nil
}

// Accepted is what accepting an invitation made: the member, and their
// first token, whose secret is returned once.
type Accepted struct {
	Invitation Invitation
	User       User
	Token      Token
	Secret     string
}

// AcceptInvitation accepts the invitation whose code this is, once: it
// creates the member with the invitation's email and role, and a
// full-scope token of theirs called tokenName, in one transaction. The
// error wraps ErrNotFound when the code is malformed, unknown, used,
// revoked or expired (without saying which), ErrConflict when a user with
// the email exists already (users belong to one tenant), and ErrInvalid
// for a bad token name. A refused acceptance changes nothing: the code
// stays good when it was.
func (s *Store) AcceptInvitation(ctx context.Context, code, tokenName string) (Accepted, error) {
	code = strings.TrimSpace(code)
	if len(code) != invitationCodeLen || !strings.HasPrefix(code, InvitationCodePrefix) {
		return Accepted{}, fmt.Errorf("invitation code: %w", ErrNotFound)
	}
	sum := sha256.Sum256([]byte(code))
	var a Accepted
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The tenant first, as every change of its members takes it.
		var tenantID string
		err := tx.QueryRow(ctx, "SELECT tenant_id FROM invitations WHERE hash = $1", sum[:]).Scan(&tenantID)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("invitation code: %w", ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("finding the invitation: %w", err)
		}
		if err := lockTenant(ctx, tx, tenantID); err != nil {
			return err
		}
		inv, err := scanInvitation(tx.QueryRow(ctx,
			"UPDATE invitations SET accepted_at = now() WHERE hash = $1 AND "+pending+" RETURNING "+invitationColumns, sum[:]))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("invitation code: %w", ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("accepting the invitation: %w", err)
		}
		u, err := insertUser(ctx, tx, NewUser{TenantID: inv.TenantID, Email: inv.Email, Role: inv.Role})
		if err != nil {
			return err
		}
		secret, tok, err := issueToken(ctx, tx, NewToken{TenantID: inv.TenantID, UserID: u.ID, Name: tokenName})
		if err != nil {
			return err
		}
		a = Accepted{Invitation: inv, User: u, Token: tok, Secret: secret}
		return nil
	})
	if err != nil {
		return Accepted{}, err
	}
	return a, nil
}
