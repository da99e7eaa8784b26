-- +goose Up
-- The tool as it was when its call asked: the card shows this title,
-- description and input schema, not the site's tools when the person looks
-- (a page may have changed them since, or closed). '' for rows from before,
-- whose cards still read the site's current tools.
ALTER TABLE approval_requests ADD COLUMN tool_title TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_requests ADD COLUMN tool_description TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_requests ADD COLUMN tool_input_schema TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE approval_requests DROP COLUMN tool_input_schema;
ALTER TABLE approval_requests DROP COLUMN tool_description;
ALTER TABLE approval_requests DROP COLUMN tool_title;
