// Package migrations holds Tabbridge's schema as goose SQL migrations,
// embedded in the binary so a server applies them before it listens.
//
// Every file must run unchanged on PostgreSQL and on SQLite: ids are TEXT
// (time-ordered UUIDv7 strings), times are TIMESTAMP written in UTC by the
// application, flags are BOOLEAN, secrets are hex hashes in TEXT. It owns no
// Go logic; store applies it. Version 16 (the compact audit log) is not a file
// here: it rewrites every audit row, so it is a Go migration in
// store/migrate_audit.go, which goose runs in order with these.
package migrations

import "embed"

// FS is the set of migrations, in goose's numbered-file order.
//
//go:embed *.sql
var FS embed.FS
