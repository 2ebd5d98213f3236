-- One-off runs: commands a tenant ran in a fresh instance of an app's
-- current release (bex run), who ran them and how they ended.
ALTER TABLE app_counters ADD COLUMN last_run integer NOT NULL DEFAULT 0;

CREATE TABLE runs (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    app         text        NOT NULL CHECK (app <> ''),
    -- 1, 2, 3, ... per app: the run's name is run.<number>.
    number      integer     NOT NULL CHECK (number > 0),
    -- The release it ran in.
    release     integer     NOT NULL CHECK (release > 0),
    -- The command line, as given: no shell in between.
    command     text[]      NOT NULL CHECK (cardinality(command) > 0),
    -- Whether it ran on a terminal.
    terminal    boolean     NOT NULL DEFAULT false,
    -- Who ran it: an email, or token:<name>.
    created_by  text        NOT NULL CHECK (created_by <> ''),
    status      text        NOT NULL DEFAULT 'running'
                CONSTRAINT runs_status_known
                CHECK (status IN ('running', 'succeeded', 'failed')),
    -- Its exit status, once ended; NULL when it never started.
    exit_code   integer,
    -- Why it ended when not on its own (timed out, the client went
    -- away), or why it did not start; '' otherwise.
    reason      text        NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    CONSTRAINT runs_tenant_id_app_number_key UNIQUE (tenant_id, app, number),
    CONSTRAINT runs_finished_when_done
        CHECK ((status = 'running') = (finished_at IS NULL))
);

-- The concurrent-runs quota counts a tenant's running runs.
CREATE INDEX runs_tenant_id_running_idx ON runs (tenant_id) WHERE status = 'running';

-- How many runs of one tenant may run at once; NULL keeps the default.
ALTER TABLE tenant_quotas ADD COLUMN concurrent_runs integer CHECK (concurrent_runs >= 0);
