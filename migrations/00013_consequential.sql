-- +goose Up
-- A request for a tool the site annotates consequentialHint: it always asks
-- and cannot be answered "Always allow", so the card offers no such button.
ALTER TABLE approval_requests ADD COLUMN consequential BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE approval_requests DROP COLUMN consequential;
