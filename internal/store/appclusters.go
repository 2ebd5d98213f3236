package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ServingClusters returns the cluster that serves each app, keyed
// "tenant/app" (tenant by name).
func (s *Store) ServingClusters(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT t.name, c.app, c.cluster FROM app_clusters c JOIN tenants t ON t.id = c.tenant_id")
	if err != nil {
		return nil, fmt.Errorf("reading where apps run: %w", err)
	}
	out, err := collectServing(rows)
	if err != nil {
		return nil, fmt.Errorf("reading where apps run: %w", err)
	}
	return out, nil
}

// ServingClustersSince returns what ServingClusters returns and the
// version it is at, or a nil map when the version is still since (nothing
// changed). Every write that changes where an app runs, a tenant's deletion
// included, makes a new version in its transaction, and the version and
// the apps are read in one snapshot: a caller that passes the version it
// got last misses no change, and reads one row while nothing changed. A
// since of 0 always reads the apps.
func (s *Store) ServingClustersSince(ctx context.Context, since int64) (map[string]string, int64, error) {
	var out map[string]string
	var version int64
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT version FROM app_clusters_version").Scan(&version); err != nil {
			return err
		}
		if version == since {
			return nil
		}
		rows, err := tx.Query(ctx, "SELECT t.name, c.app, c.cluster FROM app_clusters c JOIN tenants t ON t.id = c.tenant_id")
		if err != nil {
			return err
		}
		out, err = collectServing(rows)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("reading where apps run: %w", err)
	}
	return out, version, nil
}

// collectServing reads rows of tenant, app and cluster into a map keyed
// "tenant/app".
func collectServing(rows pgx.Rows) (map[string]string, error) {
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var tenant, app, cluster string
		if err := rows.Scan(&tenant, &app, &cluster); err != nil {
			return nil, err
		}
		out[tenant+"/"+app] = cluster
	}
	return out, rows.Err()
}

// ServingCluster returns the cluster that serves the app of the tenant
// (both by name), and whether one does.
func (s *Store) ServingCluster(ctx context.Context, tenant, app string) (string, bool, error) {
	var cluster string
	err := s.pool.QueryRow(ctx,
		"SELECT c.cluster FROM app_clusters c JOIN tenants t ON t.id = c.tenant_id WHERE t.name = $1 AND c.app = $2",
		tenant, app).Scan(&cluster)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("reading where %s/%s runs: %w", tenant, app, err)
	}
	return cluster, true, nil
}

// SetServingCluster records that cluster serves the app of the tenant
// (by name); the error wraps ErrNotFound when there is no such tenant.
func (s *Store) SetServingCluster(ctx context.Context, tenant, app, cluster string) error {
	if app == "" || cluster == "" {
		return fmt.Errorf("%w app %q on cluster %q", ErrInvalid, app, cluster)
	}
	tag, err := s.pool.Exec(ctx,
		"INSERT INTO app_clusters (tenant_id, app, cluster) SELECT id, $2, $3 FROM tenants WHERE name = $1 "+
			"ON CONFLICT (tenant_id, app) DO UPDATE SET cluster = EXCLUDED.cluster, since = now() "+
			"WHERE app_clusters.cluster <> EXCLUDED.cluster",
		tenant, app, cluster)
	if err != nil {
		return fmt.Errorf("recording that cluster %s serves %s/%s: %w", cluster, tenant, app, err)
	}
	if tag.RowsAffected() == 0 {
		var exists bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM tenants WHERE name = $1)", tenant).Scan(&exists); err != nil {
			return fmt.Errorf("looking up tenant %s: %w", tenant, err)
		}
		if !exists {
			return fmt.Errorf("tenant %s: %w", tenant, ErrNotFound)
		}
	}
	return nil
}

// ClearServingCluster forgets where the app runs; a missing one is fine.
func (s *Store) ClearServingCluster(ctx context.Context, tenant, app string) error {
	if _, err := s.pool.Exec(ctx,
		"DELETE FROM app_clusters c USING tenants t WHERE t.id = c.tenant_id AND t.name = $1 AND c.app = $2",
		tenant, app); err != nil {
		return fmt.Errorf("forgetting where %s/%s runs: %w", tenant, app, err)
	}
	return nil
}

// AppsServedBy returns the apps ("tenant/app", tenant by name) that cluster
// serves, sorted.
func (s *Store) AppsServedBy(ctx context.Context, cluster string) ([]string, error) {
	rows, err := s.pool.Query(ctx,
		"SELECT t.name || '/' || c.app FROM app_clusters c JOIN tenants t ON t.id = c.tenant_id WHERE c.cluster = $1 ORDER BY 1",
		cluster)
	if err != nil {
		return nil, fmt.Errorf("reading the apps cluster %s serves: %w", cluster, err)
	}
	apps, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("reading the apps cluster %s serves: %w", cluster, err)
	}
	return apps, nil
}

// Leftover is an app a move could not remove from the cluster it left.
type Leftover struct {
	Tenant, App, Cluster string
}

// AddLeftover records that the app of the tenant (by name) still has to be
// removed from cluster; the error wraps ErrNotFound when there is no such
// tenant.
func (s *Store) AddLeftover(ctx context.Context, l Leftover) error {
	if l.App == "" || l.Cluster == "" {
		return fmt.Errorf("%w app %q on cluster %q", ErrInvalid, l.App, l.Cluster)
	}
	tag, err := s.pool.Exec(ctx,
		"INSERT INTO app_leftovers (tenant_id, app, cluster) SELECT id, $2, $3 FROM tenants WHERE name = $1 ON CONFLICT DO NOTHING",
		l.Tenant, l.App, l.Cluster)
	if err != nil {
		return fmt.Errorf("recording that %s/%s is left on cluster %s: %w", l.Tenant, l.App, l.Cluster, err)
	}
	if tag.RowsAffected() == 0 {
		var exists bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM tenants WHERE name = $1)", l.Tenant).Scan(&exists); err != nil {
			return fmt.Errorf("looking up tenant %s: %w", l.Tenant, err)
		}
		if !exists {
			return fmt.Errorf("tenant %s: %w", l.Tenant, ErrNotFound)
		}
	}
	return nil
}

// Leftovers returns every app still to be removed from a cluster, oldest
// first.
func (s *Store) Leftovers(ctx context.Context) ([]Leftover, error) {
	rows, err := s.pool.Query(ctx,
		"SELECT t.name, l.app, l.cluster FROM app_leftovers l JOIN tenants t ON t.id = l.tenant_id ORDER BY l.since, t.name, l.app")
	if err != nil {
		return nil, fmt.Errorf("reading the apps left on clusters: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Leftover, error) {
		var l Leftover
		err := row.Scan(&l.Tenant, &l.App, &l.Cluster)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the apps left on clusters: %w", err)
	}
	return out, nil
}

// ClearLeftover forgets a leftover; a missing one is fine.
func (s *Store) ClearLeftover(ctx context.Context, l Leftover) error {
	if _, err := s.pool.Exec(ctx,
		"DELETE FROM app_leftovers l USING tenants t WHERE t.id = l.tenant_id AND t.name = $1 AND l.app = $2 AND l.cluster = $3",
		l.Tenant, l.App, l.Cluster); err != nil {
		return fmt.Errorf("forgetting that %s/%s is left on cluster %s: %w", l.Tenant, l.App, l.Cluster, err)
	}
	return nil
}
