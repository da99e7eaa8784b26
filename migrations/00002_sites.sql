-- +goose Up
-- A site a person shares with one of their workspaces. One origin is shared
-- with at most one workspace at a time: sharing it with another moves it.
CREATE TABLE shared_sites (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    origin       TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX shared_sites_user_origin ON shared_sites (user_id, origin);
CREATE INDEX shared_sites_workspace ON shared_sites (workspace_id);

-- A browser (an extension install) that has connected, keyed by the id the
-- extension generates and keeps, scoped to its person. Its name survives
-- reconnects so the person can rename it.
CREATE TABLE browsers (
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    browser_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    TEXT NOT NULL,
    first_seen TIMESTAMP NOT NULL,
    last_seen  TIMESTAMP NOT NULL,
    PRIMARY KEY (user_id, browser_id)
);

-- +goose Down
DROP TABLE browsers;
DROP TABLE shared_sites;
