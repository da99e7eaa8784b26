-- +goose Up
-- A machine is one terminal daemon a person connected: it authenticates with
-- a machine token shown once and stored only as its hash. Sessions are not
-- stored: they live on the daemon, which reports them on every (re)connect.
CREATE TABLE machines (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    token_hash   TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    last_seen_at TIMESTAMP,
    revoked_at   TIMESTAMP
);
CREATE UNIQUE INDEX machines_token_hash ON machines (token_hash);
CREATE INDEX machines_user ON machines (user_id);

-- +goose Down
DROP TABLE machines;
