-- +goose Up
-- A question put to a person: may this call run? Identical calls in flight
-- share one row. Status moves once from pending to allowed, denied, expired
-- or withdrawn.
CREATE TABLE approval_requests (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    task_id      TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    site         TEXT NOT NULL,
    tool         TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    args_hash    TEXT NOT NULL,
    status       TEXT NOT NULL,
    answer       TEXT NOT NULL DEFAULT '',
    decided_by   TEXT NOT NULL DEFAULT '',
    decided_at   TIMESTAMP,
    waiters      BIGINT NOT NULL DEFAULT 1,
    created_at   TIMESTAMP NOT NULL,
    expires_at   TIMESTAMP NOT NULL
);
CREATE INDEX approval_requests_pending ON approval_requests (user_id, status);
CREATE INDEX approval_requests_task ON approval_requests (task_id);

-- "Always allow <tool> on <site>" for one workspace.
CREATE TABLE grants (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    site         TEXT NOT NULL,
    tool         TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    request_id   TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMP NOT NULL,
    revoked_at   TIMESTAMP
);
CREATE UNIQUE INDEX grants_live ON grants (workspace_id, site, tool) WHERE revoked_at IS NULL;
CREATE INDEX grants_user ON grants (user_id);

-- Sites the person wants asked about every tool, read-only ones too.
CREATE TABLE site_settings (
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    origin     TEXT NOT NULL,
    ask_all    BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (user_id, origin)
);

-- +goose Down
DROP TABLE site_settings;
DROP TABLE grants;
DROP TABLE approval_requests;
