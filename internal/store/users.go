package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Role is what a user may do.
type Role string

const (
	// RoleTenant acts for one tenant.
	RoleTenant Role = "tenant"
	// RoleOperator runs the platform and belongs to no tenant.
	RoleOperator Role = "operator"
)

// User is a person who logs in to the dashboard or the operator console, or
// owns API tokens. It does not carry the password hash.
type User struct {
	ID string `json:"id"`
	// TenantID is empty for operators.
	TenantID  string    `json:"tenantID,omitempty"`
	Email     string    `json:"email"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
}

// NewUser is what CreateUser needs.
type NewUser struct {
	// TenantID is the user's tenant; empty for an operator.
	TenantID string
	// Email is unique regardless of case.
	Email string
	Role  Role
	// PasswordHash is an encoded hash (argon2id, bcrypt, ...) made by the
	// caller, never a password. Empty: the user has no password.
	PasswordHash string
}

const userColumns = "id, tenant_id, email, role, created_at"

func scanUser(row pgx.Row) (User, error) {
	var u User
	var tenantID *string
	err := row.Scan(&u.ID, &tenantID, &u.Email, &u.Role, &u.CreatedAt)
	u.TenantID = orEmpty(tenantID)
	return u, err
}

// CreateUser creates a user. The error wraps ErrInvalid when the role and
// tenant do not fit together (a tenant user needs a tenant, an operator has
// none) or the email is malformed, ErrNotFound when the tenant does not
// exist, and ErrConflict when the email is taken.
func (s *Store) CreateUser(ctx context.Context, nu NewUser) (User, error) {
	email := strings.TrimSpace(nu.Email)
	if at := strings.LastIndexByte(email, '@'); at < 1 || at == len(email)-1 || strings.ContainsAny(email, " \t\r\n") {
		return User{}, fmt.Errorf("%w email %q", ErrInvalid, nu.Email)
	}
	switch {
	case nu.Role == RoleOperator && nu.TenantID != "":
		return User{}, fmt.Errorf("%w user %s: an operator belongs to no tenant", ErrInvalid, email)
	case nu.Role == RoleTenant && nu.TenantID == "":
		return User{}, fmt.Errorf("%w user %s: a tenant user needs a tenant", ErrInvalid, email)
	case nu.Role != RoleTenant && nu.Role != RoleOperator:
		return User{}, fmt.Errorf("%w user %s: role %q is neither %q nor %q", ErrInvalid, email, nu.Role, RoleTenant, RoleOperator)
	}
	if nu.TenantID != "" && !isUUID(nu.TenantID) {
		return User{}, fmt.Errorf("tenant %q: %w", nu.TenantID, ErrNotFound)
	}
	var hash any
	if nu.PasswordHash != "" {
		hash = nu.PasswordHash
	}
	u, err := scanUser(s.pool.QueryRow(ctx,
		"INSERT INTO users (tenant_id, email, role, password_hash) VALUES ($1, $2, $3, $4) RETURNING "+userColumns,
		nullable(nu.TenantID), email, string(nu.Role), hash))
	if _, ok := constraintViolated(err, codeUniqueViolation); ok {
		return User{}, fmt.Errorf("user %s: %w", email, ErrConflict)
	}
	if _, ok := constraintViolated(err, codeForeignKeyViolation); ok {
		return User{}, fmt.Errorf("tenant %s: %w", nu.TenantID, ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("creating user %s: %w", email, err)
	}
	return u, nil
}

// GetUser returns the user with the given ID, or an error wrapping
// ErrNotFound.
func (s *Store) GetUser(ctx context.Context, id string) (User, error) {
	if !isUUID(id) {
		return User{}, fmt.Errorf("user %q: %w", id, ErrNotFound)
	}
	u, err := scanUser(s.pool.QueryRow(ctx, "SELECT "+userColumns+" FROM users WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, fmt.Errorf("user %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("reading user %s: %w", id, err)
	}
	return u, nil
}
