-- +goose Up
-- Several server instances on one database (docs/DECISIONS.md, "Several
-- instances"). Each running instance has a row here, its heartbeat renewed
-- every few seconds; one whose heartbeat is older than the dead threshold (or
-- that stopped) is dead, and the others clean what it left.
CREATE TABLE instances (
    id           TEXT PRIMARY KEY,
    address      TEXT NOT NULL DEFAULT '',
    started_at   TIMESTAMP NOT NULL,
    heartbeat_at TIMESTAMP NOT NULL,
    stopped_at   TIMESTAMP
);

-- What each instance holds: a browser's or a daemon's socket. A dead
-- instance's rows are deleted and the owners told the links went offline.
CREATE TABLE instance_links (
    instance_id TEXT NOT NULL,
    kind        TEXT NOT NULL,
    link_id     TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    since       TIMESTAMP NOT NULL,
    PRIMARY KEY (instance_id, kind, link_id)
);

-- The instance whose calls wait on a pending request, and the collapse key
-- of a pending request: identical calls on any instance meet on one row.
-- Rows pending from before this migration keep '' and a NULL key; an
-- instance's start withdraws them (no instance holds them).
ALTER TABLE approval_requests ADD COLUMN instance_id TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_requests ADD COLUMN collapse_key TEXT;
CREATE UNIQUE INDEX approval_requests_open_key ON approval_requests (collapse_key) WHERE status = 'pending';
CREATE INDEX approval_requests_instance ON approval_requests (instance_id) WHERE status = 'pending';

-- Signals too large for a NOTIFY payload (8000 bytes): the notification
-- names the row, receivers read it; rows are swept a minute later.
CREATE TABLE signal_payloads (
    id         TEXT PRIMARY KEY,
    payload    TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);

-- +goose Down
DROP TABLE signal_payloads;
DROP INDEX approval_requests_instance;
DROP INDEX approval_requests_open_key;
ALTER TABLE approval_requests DROP COLUMN collapse_key;
ALTER TABLE approval_requests DROP COLUMN instance_id;
DROP TABLE instance_links;
DROP TABLE instances;
