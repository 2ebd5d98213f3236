-- Each app's recent metric series (internal/appmetrics), saved by the
-- sampler every few minutes and when it stops, so that the last hour
-- survives a restart of the platform. One row per app, rewritten whole at
-- each save (not a row per point): points is the sampler's own encoding
-- of at most its Keep points, interval_ms their resolution, last_at the
-- time of the last one (a load skips rows older than it asks). Tenant and app
-- are names, as the sampler lists them: a row of an app the sampler no
-- longer lists is deleted at its next save.
CREATE TABLE app_series (
    tenant      text        NOT NULL,
    app         text        NOT NULL CHECK (app <> ''),
    interval_ms bigint      NOT NULL CHECK (interval_ms > 0),
    points      bytea       NOT NULL,
    last_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant, app)
);
