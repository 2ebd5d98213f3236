-- Fleet upgrade records: every run of a FleetUpgrade, each step it took on
-- each cluster, and every verifier probe sample, so that an operator can
-- see afterwards what the control plane answered at each moment.

CREATE TABLE upgrade_runs (
    id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The FleetUpgrade's "namespace/name" (or a name for runs outside
    -- Kubernetes, such as the mixed-version suite).
    fleet_upgrade  text        NOT NULL CHECK (fleet_upgrade <> ''),
    -- The FleetUpgrade's UID: one run per object.
    uid            text        NOT NULL UNIQUE CHECK (uid <> ''),
    target_version text        NOT NULL CHECK (target_version <> ''),
    state          text        NOT NULL DEFAULT 'running'
                   CONSTRAINT upgrade_runs_state_known
                   CHECK (state IN ('running', 'paused', 'succeeded', 'failed', 'aborted')),
    -- Why the run is paused or ended, in the operator's words.
    message        text        NOT NULL DEFAULT '',
    started_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    CONSTRAINT upgrade_runs_finished_when_done
        CHECK ((state IN ('running', 'paused')) = (finished_at IS NULL))
);

CREATE TABLE upgrade_steps (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    run_id       uuid        NOT NULL REFERENCES upgrade_runs (id) ON DELETE CASCADE,
    -- 1, 2, 3, ... per run, in the order the steps started.
    seq          integer     NOT NULL CHECK (seq > 0),
    -- The Cluster's "namespace/name".
    cluster      text        NOT NULL CHECK (cluster <> ''),
    kind         text        NOT NULL
                 CONSTRAINT upgrade_steps_kind_known
                 CHECK (kind IN ('preflight', 'wire-mvp', 'bump', 'machine', 'verify', 'soak')),
    -- The control-plane machine a machine or verify step is about; '' else.
    machine      text        NOT NULL DEFAULT '',
    from_version text        NOT NULL DEFAULT '',
    to_version   text        NOT NULL DEFAULT '',
    outcome      text        NOT NULL DEFAULT 'running'
                 CONSTRAINT upgrade_steps_outcome_known
                 CHECK (outcome IN ('running', 'passed', 'failed', 'paused')),
    message      text        NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    CONSTRAINT upgrade_steps_run_id_seq_key UNIQUE (run_id, seq),
    CONSTRAINT upgrade_steps_finished_when_done
        CHECK ((outcome = 'running') = (finished_at IS NULL))
);

CREATE TABLE upgrade_probes (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    step_id   uuid        NOT NULL REFERENCES upgrade_steps (id) ON DELETE CASCADE,
    apiserver text        NOT NULL CHECK (apiserver <> ''),
    -- group/version/resource, such as "apps/v1/deployments".
    resource  text        NOT NULL,
    verb      text        NOT NULL DEFAULT 'list',
    status    integer     NOT NULL,
    outcome   text        NOT NULL
              CONSTRAINT upgrade_probes_outcome_known
              CHECK (outcome IN ('ServedLocally', 'Proxied', 'Spurious404', 'Honest503', 'Error')),
    -- The server's answer when it failed, trimmed.
    message   text        NOT NULL DEFAULT '',
    at        timestamptz NOT NULL
);

CREATE INDEX upgrade_probes_step_id_at_idx ON upgrade_probes (step_id, at);
