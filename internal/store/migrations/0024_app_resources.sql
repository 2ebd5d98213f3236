-- The CPU (millicores) and memory (bytes) each app's instances request
-- together, as the platform last deployed them (instances times the
-- plan's or spec.resources' size): the tenant's cpu and memory quotas
-- count them, as its instances quota counts app_instances.instances.
-- Written with the instances, under the same lock. Apps deployed before
-- count 0 until their next rollout.
ALTER TABLE app_instances
    ADD COLUMN cpu    bigint NOT NULL DEFAULT 0 CHECK (cpu >= 0),
    ADD COLUMN memory bigint NOT NULL DEFAULT 0 CHECK (memory >= 0);

-- How much CPU (millicores) and memory (bytes) a tenant's apps may
-- request together; NULL keeps the default.
ALTER TABLE tenant_quotas
    ADD COLUMN cpu    bigint CHECK (cpu >= 0),
    ADD COLUMN memory bigint CHECK (memory >= 0);
