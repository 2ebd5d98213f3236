-- A version of app_clusters, bumped in the transaction of every write that
-- changes a row of it (a cascade from a deleted tenant included), so that a
-- process that follows where apps run (the edge of a cluster install reads
-- it every second) reads one row while nothing changed, and the whole table
-- only when something did. A write that changes no row (an app deployed
-- again to the cluster it runs on) leaves the version. One trigger per kind
-- of statement, since a trigger with transition tables takes one event.
CREATE TABLE app_clusters_version (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    version bigint  NOT NULL
);
INSERT INTO app_clusters_version (version) VALUES (1);

CREATE FUNCTION app_clusters_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed) THEN
        UPDATE app_clusters_version SET version = version + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER app_clusters_inserted AFTER INSERT ON app_clusters
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION app_clusters_changed();
CREATE TRIGGER app_clusters_updated AFTER UPDATE ON app_clusters
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION app_clusters_changed();
CREATE TRIGGER app_clusters_deleted AFTER DELETE ON app_clusters
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION app_clusters_changed();
