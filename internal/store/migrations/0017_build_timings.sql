-- How long each step of a push took (checkout, app build, image, registry
-- push, unpack, start, health check, switch): [{"name", "seconds"}].
ALTER TABLE builds ADD COLUMN timings jsonb NOT NULL DEFAULT '[]';
