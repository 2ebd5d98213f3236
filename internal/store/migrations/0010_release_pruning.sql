-- Release retention: past the newest releases of an app that the platform
-- keeps (its --release-retention), a release's artifacts (its unpacked
-- directory, its image) are deleted. Its row stays, as history, and says
-- so: the one change the database allows to a release.
ALTER TABLE releases
    -- When the release's artifacts were pruned; NULL while they are kept.
    ADD COLUMN pruned_at        timestamptz,
    -- The retention that pruned it: how many releases of an app the
    -- platform kept then.
    ADD COLUMN pruned_retention integer CHECK (pruned_retention > 0),
    ADD CONSTRAINT releases_pruned_with_retention
        CHECK ((pruned_at IS NULL) = (pruned_retention IS NULL));

-- An UPDATE is refused, as before, unless the transaction says it prunes
-- (SET LOCAL bex.pruning_releases = 'on', which only Store.MarkReleasesPruned
-- does); even then each row may only go from kept to pruned, once, with
-- nothing else changed. Deletes stay refused.
CREATE OR REPLACE FUNCTION releases_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND current_setting('bex.pruning_releases', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'releases are immutable: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'A rollback or a config change records a new release.';
END
$$;

CREATE FUNCTION releases_only_pruned() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.pruned_at IS NULL AND NEW.pruned_at IS NOT NULL
       AND to_jsonb(OLD) - '{pruned_at,pruned_retention}'::text[]
           = to_jsonb(NEW) - '{pruned_at,pruned_retention}'::text[] THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'releases are immutable: an UPDATE may only mark a kept release pruned'
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'A rollback or a config change records a new release.';
END
$$;

CREATE TRIGGER releases_only_pruned
    BEFORE UPDATE ON releases
    FOR EACH ROW EXECUTE FUNCTION releases_only_pruned();

