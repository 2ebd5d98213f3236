-- The audit log: who did what to what, from where. Rows are only ever added;
-- the database itself refuses to change or remove them.

CREATE TABLE audit_log (
    id          bigserial   PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    -- No foreign key: the log outlives the tenants it mentions.
    tenant_id   uuid,
    actor       text        NOT NULL CHECK (actor <> ''),
    action      text        NOT NULL CHECK (action <> ''),
    target      text        NOT NULL DEFAULT '',
    source_addr text        NOT NULL DEFAULT '',
    details     jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_tenant_id_id_idx ON audit_log (tenant_id, id);
CREATE INDEX audit_log_at_idx ON audit_log (at);

CREATE FUNCTION audit_log_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Audit entries are never changed or removed.';
END
$$;

-- Statement-level, so that even a statement matching no rows is refused.
CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
