-- +goose Up
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL,
    name          TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    is_owner      BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    TIMESTAMP NOT NULL,
    updated_at    TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX users_email ON users (email);
-- At most one owner, even when two first visits race.
CREATE UNIQUE INDEX users_one_owner ON users (is_owner) WHERE is_owner;

CREATE TABLE invitations (
    id         TEXT PRIMARY KEY,
    created_by TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash TEXT NOT NULL,
    note       TEXT NOT NULL DEFAULT '',
    expires_at TIMESTAMP NOT NULL,
    used_at    TIMESTAMP,
    used_by    TEXT REFERENCES users (id) ON DELETE SET NULL,
    created_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX invitations_token_hash ON invitations (token_hash);

CREATE TABLE refresh_tokens (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    family_id  TEXT NOT NULL,
    token_hash TEXT NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    used_at    TIMESTAMP,
    revoked_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX refresh_tokens_token_hash ON refresh_tokens (token_hash);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);

CREATE TABLE workspaces (
    id         TEXT PRIMARY KEY,
    owner_id   TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX workspaces_owner ON workspaces (owner_id);

CREATE TABLE agent_tokens (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    token_hash   TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    last_used_at TIMESTAMP,
    revoked_at   TIMESTAMP
);
CREATE UNIQUE INDEX agent_tokens_token_hash ON agent_tokens (token_hash);
CREATE INDEX agent_tokens_workspace ON agent_tokens (workspace_id);

CREATE TABLE tasks (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    title        TEXT NOT NULL,
    status       TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    updated_at   TIMESTAMP NOT NULL
);
CREATE INDEX tasks_workspace ON tasks (workspace_id);

CREATE TABLE tickets (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose    TEXT NOT NULL,
    subject    TEXT NOT NULL DEFAULT '',
    token_hash TEXT NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    used_at    TIMESTAMP,
    created_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX tickets_token_hash ON tickets (token_hash);
CREATE INDEX tickets_expires ON tickets (expires_at);

-- +goose Down
DROP TABLE tickets;
DROP TABLE tasks;
DROP TABLE agent_tokens;
DROP TABLE workspaces;
DROP TABLE refresh_tokens;
DROP TABLE invitations;
DROP TABLE users;
