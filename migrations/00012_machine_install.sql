-- +goose Up
-- The install a machine's token belongs to. `tabbridge daemon enroll` writes
-- a random install id beside the token; the first daemon to link claims the
-- machine for its install (the id stored only as its hash, like the token),
-- and a daemon from any other install is refused: a copied token no longer
-- takes over the person's terminals. other_install_at records the latest
-- refusal so the machines page can say that someone tried.
ALTER TABLE machines ADD COLUMN install_hash TEXT;
ALTER TABLE machines ADD COLUMN other_install_at TIMESTAMP;

-- +goose Down
ALTER TABLE machines DROP COLUMN other_install_at;
ALTER TABLE machines DROP COLUMN install_hash;
