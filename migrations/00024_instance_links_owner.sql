-- +goose Up
-- A browser's id is the extension's own say-so, so two people may present
-- the same one: a link is its person's, and the key says so. Before, the
-- second person's browser took over the first's row, and leaving deleted it
-- (docs/DECISIONS.md, "Every route, another person's ids"). The rows are
-- copied: instances still running keep theirs.
CREATE TABLE instance_links_owned (
    instance_id TEXT NOT NULL,
    kind        TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    link_id     TEXT NOT NULL,
    since       TIMESTAMP NOT NULL,
    PRIMARY KEY (instance_id, kind, user_id, link_id)
);
INSERT INTO instance_links_owned (instance_id, kind, user_id, link_id, since)
    SELECT instance_id, kind, user_id, link_id, since FROM instance_links;
DROP TABLE instance_links;
ALTER TABLE instance_links_owned RENAME TO instance_links;

-- +goose Down
CREATE TABLE instance_links_unowned (
    instance_id TEXT NOT NULL,
    kind        TEXT NOT NULL,
    link_id     TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    since       TIMESTAMP NOT NULL,
    PRIMARY KEY (instance_id, kind, link_id)
);
INSERT INTO instance_links_unowned (instance_id, kind, link_id, user_id, since)
    SELECT instance_id, kind, link_id, MIN(user_id), MIN(since) FROM instance_links GROUP BY instance_id, kind, link_id;
DROP TABLE instance_links;
ALTER TABLE instance_links_unowned RENAME TO instance_links;
