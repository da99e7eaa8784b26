-- +goose Up
-- Which agent asked: the token (or OAuth grant) whose call opened a request,
-- so the person's card names the agent. '' for rows from before.
ALTER TABLE approval_requests ADD COLUMN token_id TEXT NOT NULL DEFAULT '';
-- An agent token may be given an expiry; from then on it is refused with an
-- error that says it expired. NULL: it never expires.
ALTER TABLE agent_tokens ADD COLUMN expires_at TIMESTAMP NULL;

-- +goose Down
ALTER TABLE agent_tokens DROP COLUMN expires_at;
ALTER TABLE approval_requests DROP COLUMN token_id;
