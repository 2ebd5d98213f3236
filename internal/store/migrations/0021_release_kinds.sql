-- What made a release, as data: the API, the CLI and the dashboard read
-- kind (and rollback_to) instead of parsing the description, which stays
-- prose for people. The kinds are what the platform records a release for:
--
--   deploy    a push: the git receiver built an image and released it
--             ("Deploy abc1234")
--   rollback  an earlier release's image and config again; rollback_to
--             is that release's number ("Rollback to v2")
--   config    the current release's image with the App's new environment,
--             plain or secret ("Set FOO, BAR; unset BAZ")
--
-- Scaling, restarts, maintenance mode and app settings record no release.
ALTER TABLE releases
    ADD COLUMN kind        text,
    ADD COLUMN rollback_to integer;

-- Backfill of the releases recorded before, from the descriptions that
-- the platform wrote (the ones the dashboard parsed until now):
--
--   "Rollback to v<n>", n an earlier release of the same app
--                                     rollback, rollback_to n
--   "Deploy <commit>"                 deploy
--   "Set <names>..." / "Unset <names>..."
--                                     config
--
-- A description of none of these forms (the platform never wrote one; a
-- release inserted by hand may have one) is told by its image: deploy
-- when no earlier release of the app ran that image, since only a build
-- makes a new one, and config otherwise (an image run again that does not
-- say it is a rollback). The immutability triggers are off for this one
-- UPDATE only, inside this migration's transaction: no other session sees
-- them off.
ALTER TABLE releases DISABLE TRIGGER releases_immutable;
ALTER TABLE releases DISABLE TRIGGER releases_only_pruned;

UPDATE releases AS r
   SET rollback_to = t.number
  FROM releases AS t
 WHERE t.tenant_id = r.tenant_id AND t.app = r.app AND t.number < r.number
   AND r.description = 'Rollback to v' || t.number;

UPDATE releases AS r
   SET kind = CASE
       WHEN r.rollback_to IS NOT NULL THEN 'rollback'
       WHEN r.description LIKE 'Deploy %' THEN 'deploy'
       WHEN r.description LIKE 'Set %' OR r.description LIKE 'Unset %' THEN 'config'
       WHEN NOT EXISTS (SELECT 1 FROM releases AS e
                         WHERE e.tenant_id = r.tenant_id AND e.app = r.app
                           AND e.number < r.number AND e.image = r.image) THEN 'deploy'
       ELSE 'config'
   END;

ALTER TABLE releases ENABLE TRIGGER releases_immutable;
ALTER TABLE releases ENABLE TRIGGER releases_only_pruned;

ALTER TABLE releases
    ALTER COLUMN kind SET NOT NULL,
    ADD CONSTRAINT releases_kind_known
        CHECK (kind IN ('deploy', 'rollback', 'config')),
    -- A rollback, and only a rollback, names the earlier release of the
    -- same app whose image and config it runs again.
    ADD CONSTRAINT releases_rollback_to_when_rollback
        CHECK ((kind = 'rollback') = (rollback_to IS NOT NULL)),
    ADD CONSTRAINT releases_rollback_to_earlier
        CHECK (rollback_to > 0 AND rollback_to < number),
    ADD CONSTRAINT releases_rollback_to_fkey
        FOREIGN KEY (tenant_id, app, rollback_to) REFERENCES releases (tenant_id, app, number);
