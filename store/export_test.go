package store

import (
	"context"

	"gorm.io/gorm"
)

// AuditLogSQL is the statement AuditLog runs for f, with its arguments.
func (db *DB) AuditLogSQL(ctx context.Context, ownerID string, f AuditFilter) (string, []any) {
	stmt := db.auditQuery(ctx, ownerID, f).Session(&gorm.Session{DryRun: true}).Find(&[]AuditEntry{}).Statement
	return stmt.SQL.String(), stmt.Vars
}

// AuditValuesSQL is the statement AuditValues runs for column.
var AuditValuesSQL = auditValuesSQL

// HoldAudit makes each audit transaction run hold before it writes its rows.
func (db *DB) HoldAudit(hold func()) {
	db.audit.mu.Lock()
	db.audit.hold = hold
	db.audit.mu.Unlock()
}

// OnAuditQueued tells queued the audit queue's length each time a row joins
// it (called under the writer's lock: it must not block).
func (db *DB) OnAuditQueued(queued func(n int)) {
	db.audit.mu.Lock()
	db.audit.queued = queued
	db.audit.mu.Unlock()
}
