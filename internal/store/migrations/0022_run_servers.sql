-- The API server processes that run one-off runs, each a random id per
-- process, and when each last said it was alive. A replica writes its row
-- every few seconds (one upsert for all its runs); a run whose server has
-- not been seen for long is marked lost by any other replica's sweep.
CREATE TABLE run_servers (
    id         uuid        PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now()
);

-- The server that runs a run; NULL for runs recorded before this
-- migration (or by a server that keeps no heartbeat), which are never
-- marked lost and stop counting after 25 h as before.
ALTER TABLE runs ADD COLUMN server_id uuid;

-- lost: the server that ran it stopped answering before it ended.
ALTER TABLE runs DROP CONSTRAINT runs_status_known;
ALTER TABLE runs ADD CONSTRAINT runs_status_known
    CHECK (status IN ('running', 'succeeded', 'failed', 'lost'));

-- The sweep looks for running runs by server.
CREATE INDEX runs_server_id_running_idx ON runs (server_id) WHERE status = 'running';
