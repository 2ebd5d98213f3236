-- A stop asked of a running run (bex runs stop): when and by whom. The API
-- server that runs it watches its own running runs for it, so a stop
-- asked through another replica reaches it.
ALTER TABLE runs ADD COLUMN stop_requested_at timestamptz;
ALTER TABLE runs ADD COLUMN stop_requested_by text NOT NULL DEFAULT '';
