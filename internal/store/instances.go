package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// ReserveInstances records, before a deploy, that the tenant's app (both
// by name) is to run n instances, and returns how many it ran until then
// (0 for an app never deployed). When n is more than that and limit is
// not nil, the tenant's apps together may run at most *limit instances: a
// deploy past it is refused with a *QuotaError naming the instances quota,
// and nothing is recorded. A deploy of fewer instances records nothing
// yet: its app keeps counting what runs until SetAppInstances says the
// deploy is done. The check and the record hold the tenant's instances
// lock, so two deploys that each fit cannot both pass a quota that only
// one fits. The error wraps ErrNotFound when there is no such tenant.
func (s *Store) ReserveInstances(ctx context.Context, tenant, app string, n int, limit *int) (prev int, err error) {
	if app == "" || n < 0 {
		return 0, fmt.Errorf("%w %d instances of app %q", ErrInvalid, n, app)
	}
	var tenantID string
	if err := s.pool.QueryRow(ctx, "SELECT id FROM tenants WHERE name = $1", tenant).Scan(&tenantID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("tenant %s: %w", tenant, ErrNotFound)
		}
		return 0, fmt.Errorf("looking up tenant %s: %w", tenant, err)
	}
	err = s.WithTenantLock(ctx, tenantID, "instances", func(ctx context.Context) error {
		var others int
		err := s.pool.QueryRow(ctx,
			"SELECT COALESCE(SUM(instances) FILTER (WHERE app = $2), 0), COALESCE(SUM(instances) FILTER (WHERE app <> $2), 0) "+
				"FROM app_instances WHERE tenant_id = $1", tenantID, app).Scan(&prev, &others)
		if err != nil {
			return fmt.Errorf("counting the instances of tenant %s: %w", tenant, err)
		}
		if n <= prev {
			return nil
		}
		if limit != nil && others+n > *limit {
			return &QuotaError{Quota: "instances", Limit: strconv.Itoa(*limit), Detail: fmt.Sprintf(
				"%s would run %d instances and the tenant's other apps run %d; scale an app down (bex scale) or ask the operator to raise the quota",
				app, n, others)}
		}
		return s.SetAppInstances(ctx, tenant, app, n)
	})
	return prev, err
}

// SetAppInstances records that the tenant's app (both by name) runs n
// instances: after a deploy of fewer than it ran, or to put back what ran
// when a deploy ReserveInstances counted did not go out. A missing tenant
// is fine: there is nothing to count.
func (s *Store) SetAppInstances(ctx context.Context, tenant, app string, n int) error {
	if app == "" || n < 0 {
		return fmt.Errorf("%w %d instances of app %q", ErrInvalid, n, app)
	}
	_, err := s.pool.Exec(ctx,
		"INSERT INTO app_instances (tenant_id, app, instances) SELECT id, $2, $3 FROM tenants WHERE name = $1 "+
			"ON CONFLICT (tenant_id, app) DO UPDATE SET instances = EXCLUDED.instances",
		tenant, app, n)
	if err != nil {
		return fmt.Errorf("recording %d instances of %s/%s: %w", n, tenant, app, err)
	}
	return nil
}

// ClearAppInstances forgets the app's instances, once it runs nothing
// (deleted); a missing one is fine.
func (s *Store) ClearAppInstances(ctx context.Context, tenant, app string) error {
	_, err := s.pool.Exec(ctx,
		"DELETE FROM app_instances WHERE tenant_id = (SELECT id FROM tenants WHERE name = $1) AND app = $2", tenant, app)
	if err != nil {
		return fmt.Errorf("forgetting the instances of %s/%s: %w", tenant, app, err)
	}
	return nil
}

// TenantInstances returns how many instances the tenant's apps run
// together, as the instances quota counts them (tenant by ID).
func (s *Store) TenantInstances(ctx context.Context, tenantID string) (int, error) {
	if !isUUID(tenantID) {
		return 0, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	var n int
	if err := s.pool.QueryRow(ctx, "SELECT COALESCE(SUM(instances), 0) FROM app_instances WHERE tenant_id = $1", tenantID).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting the instances of tenant %s: %w", tenantID, err)
	}
	return n, nil
}
