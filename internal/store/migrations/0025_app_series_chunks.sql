-- Each app's saved metric series as appended chunks (SaveAppSeries): a
-- periodic save writes, per app, one chunk of the points since the app's
-- last saved one, instead of rewriting the app's whole series (an hour of
-- points) as 0023's one row per app did. app_series stays the app's head
-- row, without its points: the resolution, the time of the last saved
-- point, and how many chunks and bytes of points the app has, so that a
-- save checks the app's bounds without reading its chunks.
--
-- A chunk's points are the sampler's own encoding of the points after the
-- previous chunk's last one; an app's series is its chunks' points in
-- order of last_at (chunks do not overlap: an appended chunk starts after
-- the app's last saved point). first_at is the time of the chunk's first
-- point, NULL when it is not known (a series saved whole before this
-- migration, or by a caller that did not say).
CREATE TABLE app_series_chunks (
    tenant   text        NOT NULL,
    app      text        NOT NULL,
    first_at timestamptz CHECK (first_at <= last_at),
    last_at  timestamptz NOT NULL,
    points   bytea       NOT NULL,
    PRIMARY KEY (tenant, app, last_at)
);

-- The rows saved before become each app's first chunk, whole (the points
-- are the same encoding; a load concatenates chunks, and a series of one
-- chunk is what 0023 saved): no saved hour is lost across the upgrade.
INSERT INTO app_series_chunks (tenant, app, last_at, points)
    SELECT tenant, app, last_at, points FROM app_series;

ALTER TABLE app_series
    ADD COLUMN chunks integer NOT NULL DEFAULT 1 CHECK (chunks >= 0),
    ADD COLUMN bytes  integer NOT NULL DEFAULT 0 CHECK (bytes >= 0);
UPDATE app_series SET bytes = octet_length(points);
ALTER TABLE app_series ALTER COLUMN chunks DROP DEFAULT, ALTER COLUMN bytes DROP DEFAULT;
ALTER TABLE app_series DROP COLUMN points;
