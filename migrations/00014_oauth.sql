-- +goose Up
-- Tabbridge is its own OAuth 2.1 authorization server for /mcp (issue 14).
-- Clients registered dynamically (RFC 7591); clients identified by a
-- metadata document URL are fetched and cached in memory, not stored here.
CREATE TABLE oauth_clients (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    created_at    TIMESTAMP NOT NULL
);

-- A grant is one client's authorization to act for one workspace: an agent
-- of the workspace, listed beside its pasted tokens. Its id is the identity
-- MCP sessions bind to, so refreshing tokens does not break a session; its
-- tokens are one refresh family, and revoking it ends them all.
CREATE TABLE oauth_grants (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    client_id    TEXT NOT NULL,
    client_name  TEXT NOT NULL,
    client_host  TEXT NOT NULL,
    scope        TEXT NOT NULL,
    resource     TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    last_used_at TIMESTAMP,
    revoked_at   TIMESTAMP
);
CREATE INDEX oauth_grants_workspace ON oauth_grants (workspace_id);

-- Authorization codes, single use, a couple of minutes; grant_id is set when
-- the code is exchanged, so a replayed code can revoke what it produced.
CREATE TABLE oauth_codes (
    code_hash      TEXT PRIMARY KEY,
    client_id      TEXT NOT NULL,
    client_name    TEXT NOT NULL,
    client_host    TEXT NOT NULL,
    user_id        TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    workspace_id   TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    redirect_uri   TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    scope          TEXT NOT NULL,
    resource       TEXT NOT NULL,
    grant_id       TEXT NOT NULL DEFAULT '',
    expires_at     TIMESTAMP NOT NULL,
    used_at        TIMESTAMP,
    created_at     TIMESTAMP NOT NULL
);

-- Access and refresh tokens of grants, stored only as hashes.
CREATE TABLE oauth_tokens (
    id         TEXT PRIMARY KEY,
    grant_id   TEXT NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,
    token_hash TEXT NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    used_at    TIMESTAMP,
    created_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX oauth_tokens_token_hash ON oauth_tokens (token_hash);
CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id);

-- +goose Down
DROP TABLE oauth_tokens;
DROP TABLE oauth_codes;
DROP TABLE oauth_grants;
DROP TABLE oauth_clients;
