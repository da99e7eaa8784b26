-- +goose Up
-- A person's audit log filtered by one site, tool, outcome or task, newest
-- first: each index finds exactly the matching rows in id order, where
-- audit_log_user (user_id, id) walked every newer row of the person's log
-- until the page filled (all of it for a rare value). The audit page also
-- reads the distinct sites, tools and tasks of the log from the first,
-- second and fourth, one index probe per value.
CREATE INDEX audit_log_user_site ON audit_log (user_id, site, id);
CREATE INDEX audit_log_user_tool ON audit_log (user_id, tool, id);
CREATE INDEX audit_log_user_outcome ON audit_log (user_id, outcome, id);
CREATE INDEX audit_log_user_task ON audit_log (user_id, task_id, id);
-- Every read of the log is one person's, so audit_log_user_task serves
-- whatever audit_log_task did; left, it only slowed each append and drew
-- PostgreSQL's planner to walk other people's tasks.
DROP INDEX audit_log_task;

-- +goose Down
CREATE INDEX audit_log_task ON audit_log (task_id);
DROP INDEX audit_log_user_task;
DROP INDEX audit_log_user_outcome;
DROP INDEX audit_log_user_tool;
DROP INDEX audit_log_user_site;
