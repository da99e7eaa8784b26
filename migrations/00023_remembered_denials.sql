-- +goose Up
-- A denial is remembered: the same call (same task, site, tool and
-- arguments) is refused without asking again until the person lets it be
-- asked again (or stops sharing the site). forgotten_at is when they did;
-- NULL on a denied request means it is still remembered.
ALTER TABLE approval_requests ADD COLUMN forgotten_at TIMESTAMP NULL;

-- +goose Down
ALTER TABLE approval_requests DROP COLUMN forgotten_at;
