-- +goose Up
-- A person may hold at most tickets.MaxUnspent unspent tickets at once:
-- issuing one counts theirs, by person and expiry.
CREATE INDEX tickets_user_expires ON tickets (user_id, expires_at);

-- +goose Down
DROP INDEX tickets_user_expires;
