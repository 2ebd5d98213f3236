-- Builds, their logs, and the immutable release history of each app.
--
-- An app's desired state lives in its App object in the cluster, not here;
-- an app is named by (tenant_id, app), the App's namespace and name.

-- Per-app counters, so that build and release numbers are allocated without
-- races: the row is locked by the UPDATE that takes the next number until the
-- transaction that took it ends.
CREATE TABLE app_counters (
    tenant_id    uuid    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    app          text    NOT NULL,
    last_build   integer NOT NULL DEFAULT 0,
    last_release integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, app)
);

CREATE TABLE builds (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    app         text        NOT NULL CHECK (app <> ''),
    -- 1, 2, 3, ... per app.
    number      integer     NOT NULL CHECK (number > 0),
    -- The commit built: a full hex object name, or '' when unknown.
    commit      text        NOT NULL DEFAULT '',
    status      text        NOT NULL DEFAULT 'running'
                CONSTRAINT builds_status_known
                CHECK (status IN ('running', 'succeeded', 'failed')),
    -- The stack the builder used (go, node, ...), '' until known.
    stack       text        NOT NULL DEFAULT '',
    -- The image built, by digest; '' unless the build succeeded.
    image       text        NOT NULL DEFAULT '',
    -- Why the build failed, in words for the tenant; '' otherwise.
    error       text        NOT NULL DEFAULT '',
    -- How many log lines the build has: the seq of its last line.
    log_lines   bigint      NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    CONSTRAINT builds_tenant_id_app_number_key UNIQUE (tenant_id, app, number),
    CONSTRAINT builds_finished_when_done
        CHECK ((status = 'running') = (finished_at IS NULL)),
    CONSTRAINT builds_image_when_succeeded
        CHECK (status = 'succeeded' OR image = '')
);

-- The lines a build printed, in order. A failed build keeps its lines.
CREATE TABLE build_logs (
    build_id uuid        NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    -- 1, 2, 3, ... per build, without gaps.
    seq      bigint      NOT NULL CHECK (seq > 0),
    line     text        NOT NULL,
    at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (build_id, seq)
);

CREATE TABLE releases (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- No cascade: the history outlives nothing silently. A tenant with
    -- releases cannot be deleted without removing this trigger first.
    tenant_id   uuid        NOT NULL REFERENCES tenants (id),
    app         text        NOT NULL CHECK (app <> ''),
    -- v1, v2, ... per app.
    number      integer     NOT NULL CHECK (number > 0),
    -- The build whose image this release runs; NULL for releases that
    -- re-use another release's image (rollbacks, config changes).
    build_id    uuid        REFERENCES builds (id),
    -- The image by digest: <repository>@sha256:<hex>.
    image       text        NOT NULL CHECK (image <> ''),
    -- The environment: {"NAME": {"value": "..."}} for plain values and
    -- {"NAME": {"secretKeyRef": {"name": "...", "key": "..."}}} for secret
    -- ones, whose values stay in the cluster's Secret.
    config      jsonb       NOT NULL DEFAULT '{}'
                CHECK (jsonb_typeof(config) = 'object'),
    -- "Deploy abc1234", "Rollback to v2", "Set FOO".
    description text        NOT NULL DEFAULT '',
    created_by  text        NOT NULL CHECK (created_by <> ''),
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT releases_tenant_id_app_number_key UNIQUE (tenant_id, app, number)
);

CREATE FUNCTION releases_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'releases are immutable: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'A rollback or a config change records a new release.';
END
$$;

-- Statement-level, so that even a statement matching no rows is refused.
CREATE TRIGGER releases_immutable
    BEFORE UPDATE OR DELETE OR TRUNCATE ON releases
    FOR EACH STATEMENT EXECUTE FUNCTION releases_immutable();
