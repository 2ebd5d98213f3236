-- Per-tenant quotas that the operator set: each column overrides the
-- platform's default (a flag of bex-embedded, bex-web and bex-git) for one
-- tenant; NULL keeps the default. A tenant without a row has the defaults.
CREATE TABLE tenant_quotas (
    tenant_id         uuid        PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    -- How many apps the tenant may have.
    apps              integer     CHECK (apps >= 0),
    -- How many custom routes (hostname and path prefix) over all its apps.
    routes            integer     CHECK (routes >= 0),
    -- How many builds may run at once.
    concurrent_builds integer     CHECK (concurrent_builds >= 0),
    -- How many bytes its git repositories may take on disk.
    repo_bytes        bigint      CHECK (repo_bytes >= 0),
    -- How many minutes its builds may take per calendar month (UTC).
    build_minutes     integer     CHECK (build_minutes >= 0),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- The quota checks of builds: running builds and this month's builds of a
-- tenant.
CREATE INDEX builds_tenant_id_started_at_idx ON builds (tenant_id, started_at);
