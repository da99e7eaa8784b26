-- +goose Up
-- Which instance runs each call in flight, so that when an instance dies the
-- others mark its calls interrupted at once, instead of waiting until no
-- call could still be running (store.InterruptRunningBefore). '' for calls
-- begun before this column, or on one instance.
ALTER TABLE audit_running ADD COLUMN instance_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE audit_running DROP COLUMN instance_id;
