-- +goose Up
-- The last tool list and address announced for each site a person shares,
-- so an offline site still lists its tools and can be reopened.
CREATE TABLE site_tools (
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    origin       TEXT NOT NULL,
    tools        TEXT NOT NULL,
    last_url     TEXT NOT NULL,
    last_title   TEXT NOT NULL DEFAULT '',
    announced_at TIMESTAMP NOT NULL,
    PRIMARY KEY (user_id, origin)
);

-- Every call an agent made, append-only: the application never updates or
-- deletes a row.
CREATE TABLE audit_log (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    workspace_id  TEXT NOT NULL,
    token_id      TEXT NOT NULL,
    task_id       TEXT NOT NULL DEFAULT '',
    site          TEXT NOT NULL,
    tool          TEXT NOT NULL,
    args_bytes    BIGINT NOT NULL,
    result_bytes  BIGINT NOT NULL,
    decision      TEXT NOT NULL,
    decided_by    TEXT NOT NULL DEFAULT '',
    outcome       TEXT NOT NULL,
    error         TEXT NOT NULL DEFAULT '',
    duration_ms   BIGINT NOT NULL,
    created_at    TIMESTAMP NOT NULL
);
CREATE INDEX audit_log_user ON audit_log (user_id, id);
CREATE INDEX audit_log_task ON audit_log (task_id);

-- +goose Down
DROP TABLE audit_log;
DROP TABLE site_tools;
