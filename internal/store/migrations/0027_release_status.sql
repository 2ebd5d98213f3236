-- Failed releases: a release whose rollout failed (its release phase
-- failed, or its new instances never became healthy) is recorded too, as
-- Heroku lists "v12 ... failed": it takes the number its rollout used, so
-- numbers stay without gaps, says why in failure, and can never run again
-- (the platform refuses to roll back to it). What served before keeps
-- serving; the App's status.currentRelease never names a failed release.
--
--   succeeded  the release went out (every release recorded until now)
--   failed     its rollout failed; failure says why, in the words the push
--              or the API answered, names only (never a secret's value)
--
-- A release is inserted with its status and never changes it: the
-- immutability triggers of 0003 and 0010 stay as they are. Adding the
-- columns with a constant default writes no row, so no trigger fires.
ALTER TABLE releases
    ADD COLUMN status  text NOT NULL DEFAULT 'succeeded'
        CONSTRAINT releases_status_known CHECK (status IN ('succeeded', 'failed')),
    ADD COLUMN failure text,
    ADD CONSTRAINT releases_failure_when_failed
        CHECK ((status = 'failed') = (failure IS NOT NULL AND failure <> ''));
