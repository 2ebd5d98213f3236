package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"bex.co/bex/internal/units"
)

// AppSize is what an app's instances take together, as the tenant's
// instances, cpu and memory quotas count them.
type AppSize struct {
	// Instances is how many instances run, over all its processes.
	Instances int
	// MilliCPU is the CPU they request together, in millicores: each
	// instance its plan's or spec.resources' CPU.
	MilliCPU int64
	// MemoryBytes is the memory they request together, in bytes.
	MemoryBytes int64
}

// Within reports whether a takes no more than b of each.
func (a AppSize) Within(b AppSize) bool {
	return a.Instances <= b.Instances && a.MilliCPU <= b.MilliCPU && a.MemoryBytes <= b.MemoryBytes
}

// Max returns the larger of a and b of each.
func (a AppSize) Max(b AppSize) AppSize {
	return AppSize{Instances: max(a.Instances, b.Instances), MilliCPU: max(a.MilliCPU, b.MilliCPU), MemoryBytes: max(a.MemoryBytes, b.MemoryBytes)}
}

// ReserveInstances records, before a deploy, that the tenant's app (both
// by name) is to take size, and returns what it took until then (zero for
// an app never deployed). When size is not within that (more instances,
// CPU or memory) and limit is not nil, the tenant's apps together may take
// at most limit's Instances, MilliCPU and MemoryBytes, each checked where
// size grows: a deploy past one is refused with a *QuotaError naming it
// (instances, cpu, memory), and nothing is recorded. Otherwise the larger
// of each (prev.Max(size)) is recorded: the app counts what runs, and
// what it grows to, until SetAppInstances says the deploy is done (or put
// back what ran). A deploy within what ran records nothing yet. The check
// and the record hold the tenant's instances lock, so two deploys that
// each fit cannot both pass a quota that only one fits. The error wraps
// ErrNotFound when there is no such tenant.
func (s *Store) ReserveInstances(ctx context.Context, tenant, app string, size AppSize, limit *Quotas) (prev AppSize, err error) {
	if err := size.check(app); err != nil {
		return AppSize{}, err
	}
	var tenantID string
	if err := s.pool.QueryRow(ctx, "SELECT id FROM tenants WHERE name = $1", tenant).Scan(&tenantID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return AppSize{}, fmt.Errorf("tenant %s: %w", tenant, ErrNotFound)
		}
		return AppSize{}, fmt.Errorf("looking up tenant %s: %w", tenant, err)
	}
	err = s.WithTenantLock(ctx, tenantID, "instances", func(ctx context.Context) error {
		var others AppSize
		err := s.pool.QueryRow(ctx,
			"SELECT COALESCE(SUM(instances) FILTER (WHERE app = $2), 0), COALESCE(SUM(cpu) FILTER (WHERE app = $2), 0)::bigint, "+
				"COALESCE(SUM(memory) FILTER (WHERE app = $2), 0)::bigint, COALESCE(SUM(instances) FILTER (WHERE app <> $2), 0), "+
				"COALESCE(SUM(cpu) FILTER (WHERE app <> $2), 0)::bigint, COALESCE(SUM(memory) FILTER (WHERE app <> $2), 0)::bigint "+
				"FROM app_instances WHERE tenant_id = $1", tenantID, app).
			Scan(&prev.Instances, &prev.MilliCPU, &prev.MemoryBytes, &others.Instances, &others.MilliCPU, &others.MemoryBytes)
		if err != nil {
			return fmt.Errorf("counting the instances of tenant %s: %w", tenant, err)
		}
		if size.Within(prev) {
			return nil
		}
		if limit != nil {
			if err := checkSize(app, prev, size, others, *limit); err != nil {
				return err
			}
		}
		return s.SetAppInstances(ctx, tenant, app, prev.Max(size))
	})
	return prev, err
}

// checkSize refuses size, what app is to take instead of prev, when one of
// what grows is past the tenant's quota with what its other apps take.
func checkSize(app string, prev, size, others AppSize, q Quotas) error {
	const todo = "scale an app down or pick a smaller plan (bex scale --plan) or ask the operator to raise the quota"
	switch {
	case size.Instances > prev.Instances && others.Instances+size.Instances > q.Instances:
		return &QuotaError{Quota: "instances", Limit: strconv.Itoa(q.Instances), Detail: fmt.Sprintf(
			"%s would run %d instances and the tenant's other apps run %d; scale an app down (bex scale) or ask the operator to raise the quota",
			app, size.Instances, others.Instances)}
	case size.MilliCPU > prev.MilliCPU && others.MilliCPU+size.MilliCPU > q.MilliCPU:
		return &QuotaError{Quota: "cpu", Limit: units.MilliCPU(q.MilliCPU), Detail: fmt.Sprintf(
			"%s would request %s for its %d %s and the tenant's other apps request %s; %s",
			app, units.MilliCPU(size.MilliCPU), size.Instances, plural(size.Instances, "instance", "instances"), units.MilliCPU(others.MilliCPU), todo)}
	case size.MemoryBytes > prev.MemoryBytes && others.MemoryBytes+size.MemoryBytes > q.MemoryBytes:
		return &QuotaError{Quota: "memory", Limit: units.Bytes(q.MemoryBytes), Detail: fmt.Sprintf(
			"%s would request %s for its %d %s and the tenant's other apps request %s; %s",
			app, units.Bytes(size.MemoryBytes), size.Instances, plural(size.Instances, "instance", "instances"), units.Bytes(others.MemoryBytes), todo)}
	}
	return nil
}

func (a AppSize) check(app string) error {
	if app == "" || a.Instances < 0 || a.MilliCPU < 0 || a.MemoryBytes < 0 {
		return fmt.Errorf("%w size of app %q: %d instances, %dm CPU, %d bytes of memory", ErrInvalid, app, a.Instances, a.MilliCPU, a.MemoryBytes)
	}
	return nil
}

// SetAppInstances records that the tenant's app (both by name) takes
// size: after a deploy that ReserveInstances counted more for (or none),
// or to put back what ran when a deploy it counted did not go out. A
// missing tenant is fine: there is nothing to count.
func (s *Store) SetAppInstances(ctx context.Context, tenant, app string, size AppSize) error {
	if err := size.check(app); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx,
		"INSERT INTO app_instances (tenant_id, app, instances, cpu, memory) SELECT id, $2, $3, $4, $5 FROM tenants WHERE name = $1 "+
			"ON CONFLICT (tenant_id, app) DO UPDATE SET instances = EXCLUDED.instances, cpu = EXCLUDED.cpu, memory = EXCLUDED.memory",
		tenant, app, size.Instances, size.MilliCPU, size.MemoryBytes)
	if err != nil {
		return fmt.Errorf("recording %d instances of %s/%s: %w", size.Instances, tenant, app, err)
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

// TenantInstances returns what the tenant's apps take together, as the
// instances, cpu and memory quotas count it (tenant by ID).
func (s *Store) TenantInstances(ctx context.Context, tenantID string) (AppSize, error) {
	if !isUUID(tenantID) {
		return AppSize{}, fmt.Errorf("tenant %q: %w", tenantID, ErrNotFound)
	}
	var n AppSize
	if err := s.pool.QueryRow(ctx, "SELECT COALESCE(SUM(instances), 0), COALESCE(SUM(cpu), 0)::bigint, COALESCE(SUM(memory), 0)::bigint FROM app_instances WHERE tenant_id = $1", tenantID).
		Scan(&n.Instances, &n.MilliCPU, &n.MemoryBytes); err != nil {
		return AppSize{}, fmt.Errorf("counting the instances of tenant %s: %w", tenantID, err)
	}
	return n, nil
}
