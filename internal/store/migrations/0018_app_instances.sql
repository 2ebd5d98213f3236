-- How many instances each app runs, summed over its processes, as the
-- platform last deployed them: the tenant's instances quota counts them.
-- Written before a deploy that runs more (so two deploys cannot both pass
-- the quota) and after one that runs fewer; an app in maintenance runs 0.
CREATE TABLE app_instances (
    tenant_id  uuid    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    app        text    NOT NULL CHECK (app <> ''),
    instances  integer NOT NULL CHECK (instances >= 0),
    PRIMARY KEY (tenant_id, app)
);

-- How many instances a tenant's apps may run together; NULL keeps the
-- default.
ALTER TABLE tenant_quotas ADD COLUMN instances integer CHECK (instances >= 0);
