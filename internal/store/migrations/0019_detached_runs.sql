-- A detached run (bex run --detach) streams to no client: its output goes
-- to the app's log.
ALTER TABLE runs ADD COLUMN detached boolean NOT NULL DEFAULT false;
