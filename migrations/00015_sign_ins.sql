-- +goose Up
-- One row per sign-in (refresh family), for the person's list of sign-ins in
-- Settings: which browser (its user agent at sign-in), when it started and when
-- it last refreshed. The family's tokens stay in refresh_tokens; a sign-in is
-- listed while one of them is live.
CREATE TABLE sign_ins (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    user_agent   TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMP NOT NULL,
    last_used_at TIMESTAMP NOT NULL
);
CREATE INDEX sign_ins_user ON sign_ins (user_id);
-- Sign-ins from before this migration: their tokens' times, browser unknown.
INSERT INTO sign_ins (id, user_id, user_agent, created_at, last_used_at)
SELECT family_id, user_id, '', MIN(created_at), MAX(created_at) FROM refresh_tokens GROUP BY family_id, user_id;

-- +goose Down
DROP TABLE sign_ins;
