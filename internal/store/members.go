package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// MaxMembers is how many members and pending invitations one tenant may
// have together.
const MaxMembers = 100

// ErrLastAdmin is what the error of a change that would leave a tenant
// without an admin is; errors.Is finds ErrConflict in it too.
var ErrLastAdmin = errors.New("the tenant's last admin")

// lastAdminError says whom a change would have left the tenant without.
type lastAdminError struct{ email string }

func (e *lastAdminError) Error() string {
	return e.email + " is the tenant's last admin: make another member admin first"
}

// Is makes errors.Is(err, ErrLastAdmin) and errors.Is(err, ErrConflict)
// true.
func (e *lastAdminError) Is(target error) bool {
	return target == ErrLastAdmin || target == ErrConflict
}

// ListMembers returns the users of the tenant, by email.
func (s *Store) ListMembers(ctx context.Context, tenantID string) ([]User, error) {
	if !isUUID(tenantID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT "+userColumns+" FROM users WHERE tenant_id = $1 ORDER BY lower(email), id", tenantID)
	if err != nil {
		return nil, fmt.Errorf("listing members: %w", err)
	}
	users, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (User, error) { return scanUser(row) })
	if err != nil {
		return nil, fmt.Errorf("listing members: %w", err)
	}
	return users, nil
}

// GetMember returns the tenant's user with the email (regardless of
// case), or an error wrapping ErrNotFound.
func (s *Store) GetMember(ctx context.Context, tenantID, email string) (User, error) {
	return getMember(ctx, s.pool, tenantID, email)
}

func getMember(ctx context.Context, q querier, tenantID, email string) (User, error) {
	email = strings.TrimSpace(email)
	if !isUUID(tenantID) {
		return User{}, fmt.Errorf("member %s: %w", email, ErrNotFound)
	}
	u, err := scanUser(q.QueryRow(ctx,
		"SELECT "+userColumns+" FROM users WHERE tenant_id = $1 AND lower(email) = lower($2)", tenantID, email))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, fmt.Errorf("member %s: %w", email, ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("reading member %s: %w", email, err)
	}
	return u, nil
}

// SetMemberRole gives the tenant's member with the email another role and
// returns them. The error wraps ErrInvalid for a role that is not a
// tenant's, ErrNotFound when the tenant has no such member, and
// ErrLastAdmin when the member is the tenant's last admin and the role is
// not admin. Changes of one tenant's members are serialised, so that two
// admins demoting each other at once cannot both succeed.
func (s *Store) SetMemberRole(ctx context.Context, tenantID, email string, role Role) (User, error) {
	if !role.Tenant() {
		return User{}, fmt.Errorf("%w role %q: want viewer, developer or admin", ErrInvalid, role)
	}
	var u User
	err := s.changeMember(ctx, tenantID, email, role != RoleAdmin, func(tx pgx.Tx, m User) error {
		var err error
		u, err = scanUser(tx.QueryRow(ctx, "UPDATE users SET role = $2 WHERE id = $1 RETURNING "+userColumns, m.ID, string(role)))
		if err != nil {
			return fmt.Errorf("setting the role of %s: %w", m.Email, err)
		}
		return nil
	})
	return u, err
}

// RemoveMember deletes the tenant's member with the email and returns
// them: their tokens, sessions and SSH keys go with them, so none of them
// authenticates again. The error wraps ErrNotFound when the tenant has no
// such member and ErrLastAdmin when they are its last admin.
func (s *Store) RemoveMember(ctx context.Context, tenantID, email string) (User, error) {
	var u User
	err := s.changeMember(ctx, tenantID, email, true, func(tx pgx.Tx, m User) error {
		u = m
		if _, err := tx.Exec(ctx, "DELETE FROM users WHERE id = $1", m.ID); err != nil {
			return fmt.Errorf("removing %s: %w", m.Email, err)
		}
		return nil
	})
	return u, err
}

// changeMember runs change on the tenant's member with the email in a
// transaction that holds the tenant's row, so that changes of its members
// happen one at a time. With demotes, an admin must not be the last one.
func (s *Store) changeMember(ctx context.Context, tenantID, email string, demotes bool, change func(pgx.Tx, User) error) error {
	if !isUUID(tenantID) {
		return fmt.Errorf("member %s: %w", email, ErrNotFound)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockTenant(ctx, tx, tenantID); err != nil {
			return err
		}
		m, err := getMember(ctx, tx, tenantID, email)
		if err != nil {
			return err
		}
		if demotes && m.Role == RoleAdmin {
			var admins int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM users WHERE tenant_id = $1 AND role = 'admin'", tenantID).Scan(&admins); err != nil {
				return fmt.Errorf("counting admins: %w", err)
			}
			if admins <= 1 {
				return &lastAdminError{email: m.Email}
			}
		}
		return change(tx, m)
	})
}

// lockTenant takes the tenant's row for the transaction: changes of its
// members and invitations wait for each other. The error wraps ErrNotFound
// when there is no such tenant.
func lockTenant(ctx context.Context, tx pgx.Tx, tenantID string) error {
	var id string
	err := tx.QueryRow(ctx, "SELECT id FROM tenants WHERE id = $1 FOR UPDATE", tenantID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("tenant %s: %w", tenantID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("locking tenant %s: %w", tenantID, err)
	}
	return nil
}
