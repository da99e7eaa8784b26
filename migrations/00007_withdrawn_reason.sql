-- +goose Up
-- Why a withdrawn request was withdrawn, so the person reads the real
-- reason: 'cancelled' (every call waiting on it gave up), 'unshared' (the
-- site stopped being shared with the workspace), 'shutdown' (the server shut
-- down) or 'restart' (left pending by an earlier run of the server). Other
-- statuses, and rows withdrawn before this migration, keep ''.
ALTER TABLE approval_requests ADD COLUMN withdrawn_reason TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE approval_requests DROP COLUMN withdrawn_reason;
