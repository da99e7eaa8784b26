-- +goose Up
-- When the last call waiting on a pending request went away (its agent's
-- connection or session closed): the request stays open a grace for a retry
-- of the same call, marked so on every screen, then is withdrawn ('gone').
ALTER TABLE approval_requests ADD COLUMN agent_gone_at TIMESTAMP;
-- The approval request a call waited on ('' for calls that did not ask), and
-- the page's result of a call the person allowed, so the request's card and
-- the task show what the call did. An audit row is now written before its
-- call is dispatched (outcome 'running') and completed once after; rows a
-- killed server left running read 'interrupted' from the next start.
ALTER TABLE audit_log ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_log ADD COLUMN result TEXT NOT NULL DEFAULT '';
CREATE INDEX audit_log_request ON audit_log (request_id) WHERE request_id <> '';
-- The few rows still running, read at start without walking the log.
CREATE INDEX audit_log_running ON audit_log (id) WHERE outcome = 'running';

-- +goose Down
DROP INDEX audit_log_running;
DROP INDEX audit_log_request;
ALTER TABLE audit_log DROP COLUMN result;
ALTER TABLE audit_log DROP COLUMN request_id;
ALTER TABLE approval_requests DROP COLUMN agent_gone_at;
