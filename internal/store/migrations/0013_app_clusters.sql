-- Where each app runs: the workload cluster whose runtime serves it, so
-- that the platform routes to it after a restart and a move knows where to
-- remove the app from. Written once the app serves from that cluster.
CREATE TABLE app_clusters (
    tenant_id  uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    app        text        NOT NULL CHECK (app <> ''),
    cluster    text        NOT NULL CHECK (cluster <> ''),
    since      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, app)
);
