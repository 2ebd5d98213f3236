-- What a move left behind: an app that could not be removed from the
-- cluster it moved off, to be removed again until it is.
CREATE TABLE app_leftovers (
    tenant_id  uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    app        text        NOT NULL CHECK (app <> ''),
    cluster    text        NOT NULL CHECK (cluster <> ''),
    since      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, app, cluster)
);
