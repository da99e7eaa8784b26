-- +goose Up
-- A ticket remembers the sign-in (refresh family) that asked for it, so the
-- socket it opens ends when that sign-in does: signing out in a browser stops
-- its extension from running calls and its terminal viewers from typing.
-- Tickets live a minute; rows from before this migration keep '' (no sign-in
-- to follow) and are swept within the minute.
ALTER TABLE tickets ADD COLUMN family_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tickets DROP COLUMN family_id;
