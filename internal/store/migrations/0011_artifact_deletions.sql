-- Artifact deletions: what the platform has to delete of an app (a pruned
-- release's unpacked directory, an image no release runs), kept until it is
-- done, so that a deletion that failed (the registry was down) is tried
-- again at the app's next prune instead of being forgotten.
CREATE TABLE artifact_deletions (
    id              bigserial   PRIMARY KEY,
    tenant_id       uuid        NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    app             text        NOT NULL CHECK (app <> ''),
    kind            text        NOT NULL
                    CONSTRAINT artifact_deletions_kind_known
                    CHECK (kind IN ('release-directory', 'image')),
    -- The release number (a release-directory) or the image by digest.
    target          text        NOT NULL CHECK (target <> ''),
    -- Why it goes: "release v3 pruned", "build 7 never released".
    reason          text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    last_error      text        NOT NULL DEFAULT '',
    last_attempt_at timestamptz,
    -- When it was deleted; NULL while it is to do.
    done_at         timestamptz,
    UNIQUE (tenant_id, app, kind, target)
);

CREATE INDEX artifact_deletions_pending
    ON artifact_deletions (tenant_id, app, id) WHERE done_at IS NULL;
