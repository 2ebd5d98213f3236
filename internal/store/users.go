package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
)

// Role is what a user may do: one of a tenant's roles (a member's), or
// operator.
type Role string

const (
	// RoleAdmin does everything in its tenant, members and tokens
	// included.
	RoleAdmin Role = "admin"
	// RoleDeveloper pushes, deploys, changes env, scales, restarts, rolls
	// back, reads logs and manages routes and SSH keys.
	RoleDeveloper Role = "developer"
	// RoleViewer reads.
	RoleViewer Role = "viewer"
	// RoleOperator runs the platform and belongs to no tenant.
	RoleOperator Role = "operator"
)

// TenantRoles are the roles of a tenant's members, from the least to the
// most powerful.
var TenantRoles = []Role{RoleViewer, RoleDeveloper, RoleAdmin}

// rank orders the tenant roles; 0 for any other.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleDeveloper:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Tenant reports whether r is a tenant member's role.
func (r Role) Tenant() bool { return r.rank() > 0 }

// Covers reports whether r may do what need may: an admin covers a
// developer, who covers a viewer. No role covers a role that is not a
// tenant's.
func (r Role) Covers(need Role) bool { return need.rank() > 0 && r.rank() >= need.rank() }

// ParseTenantRole returns the tenant role called s, or an error wrapping
// ErrInvalid that lists them.
func ParseTenantRole(s string) (Role, error) {
	if r := Role(s); r.Tenant() {
		return r, nil
	}
	return "", fmt.Errorf("%w role %q: want viewer, developer or admin", ErrInvalid, s)
}

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

// maxEmailLen is the longest email address (RFC 5321's path limit).
const maxEmailLen = 254

// checkEmail returns email without surrounding space, or an error wrapping
// ErrInvalid when it does not look like an address.
func checkEmail(email string) (string, error) {
	e := strings.TrimSpace(email)
	if at := strings.LastIndexByte(e, '@'); at < 1 || at == len(e)-1 || len(e) > maxEmailLen || strings.ContainsFunc(e, unicode.IsSpace) || strings.ContainsFunc(e, unicode.IsControl) {
		return "", fmt.Errorf("%w email %q: want an address such as ann@example.com, at most %d characters", ErrInvalid, email, maxEmailLen)
	}
	return e, nil
}

// CreateUser creates a user. The error wraps ErrInvalid when the role and
// tenant do not fit together (a member needs a tenant and one of
// TenantRoles, an operator has none) or the email is malformed,
// ErrNotFound when the tenant does not exist, and ErrConflict when the
// email is taken.
func (s *Store) CreateUser(ctx context.Context, nu NewUser) (User, error) {
	return insertUser(ctx, s.pool, nu)
}

// insertUser is CreateUser on q, which may be a transaction.
func insertUser(ctx context.Context, q querier, nu NewUser) (User, error) {
	email, err := checkEmail(nu.Email)
	if err != nil {
		return User{}, err
	}
	switch {
	case nu.Role == RoleOperator && nu.TenantID != "":
		return User{}, fmt.Errorf("%w user %s: an operator belongs to no tenant", ErrInvalid, email)
	case nu.Role.Tenant() && nu.TenantID == "":
		return User{}, fmt.Errorf("%w user %s: a tenant's member needs a tenant", ErrInvalid, email)
	case !nu.Role.Tenant() && nu.Role != RoleOperator:
		return User{}, fmt.Errorf("%w user %s: role %q is none of viewer, developer, admin, operator", ErrInvalid, email, nu.Role)
	}
	if nu.TenantID != "" && !isUUID(nu.TenantID) {
		return User{}, fmt.Errorf("tenant %q: %w", nu.TenantID, ErrNotFound)
	}
	var hash any
	if nu.PasswordHash != "" {
		hash = nu.PasswordHash
	}
	u, err := scanUser(q.QueryRow(ctx,
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
