package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
)

// Tenant is a customer of the platform: the owner of apps, users, tokens and
// SSH keys.
type Tenant struct {
	ID string `json:"id"`
	// Name is a DNS label (RFC 1123): lower-case letters, digits and '-',
	// at most 63 characters. It is unique and never changes.
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// dnsLabel is the form of a tenant name; the database checks it too.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

const tenantColumns = "id, name, created_at"

func scanTenant(row pgx.Row) (Tenant, error) {
	var t Tenant
	err := row.Scan(&t.ID, &t.Name, &t.CreatedAt)
	return t, err
}

// CreateTenant creates the tenant called name. The error wraps ErrInvalid
// when name is not a DNS label and ErrConflict when it is taken.
func (s *Store) CreateTenant(ctx context.Context, name string) (Tenant, error) {
	if !dnsLabel.MatchString(name) {
		return Tenant{}, fmt.Errorf("%w tenant name %q: must be a DNS label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit", ErrInvalid, name)
	}
	t, err := scanTenant(s.pool.QueryRow(ctx,
		"INSERT INTO tenants (name) VALUES ($1) RETURNING "+tenantColumns, name))
	if _, ok := constraintViolated(err, codeUniqueViolation); ok {
		return Tenant{}, fmt.Errorf("tenant %q: %w", name, ErrConflict)
	}
	if err != nil {
		return Tenant{}, fmt.Errorf("creating tenant %q: %w", name, err)
	}
	return t, nil
}

// GetTenant returns the tenant with the given ID, or an error wrapping
// ErrNotFound.
func (s *Store) GetTenant(ctx context.Context, id string) (Tenant, error) {
	if !isUUID(id) {
		return Tenant{}, fmt.Errorf("tenant %q: %w", id, ErrNotFound)
	}
	t, err := scanTenant(s.pool.QueryRow(ctx, "SELECT "+tenantColumns+" FROM tenants WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Tenant{}, fmt.Errorf("tenant %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Tenant{}, fmt.Errorf("reading tenant %s: %w", id, err)
	}
	return t, nil
}

// GetTenantByName returns the tenant called name, or an error wrapping
// ErrNotFound.
func (s *Store) GetTenantByName(ctx context.Context, name string) (Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, "SELECT "+tenantColumns+" FROM tenants WHERE name = $1", name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Tenant{}, fmt.Errorf("tenant %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Tenant{}, fmt.Errorf("reading tenant %q: %w", name, err)
	}
	return t, nil
}

// ListTenants returns every tenant, ordered by name.
func (s *Store) ListTenants(ctx context.Context) ([]Tenant, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+tenantColumns+" FROM tenants ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("listing tenants: %w", err)
	}
	tenants, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Tenant, error) { return scanTenant(row) })
	if err != nil {
		return nil, fmt.Errorf("listing tenants: %w", err)
	}
	return tenants, nil
}
