package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// AuditLogSQL is the statement AuditLog runs for f, with its arguments.
func (db *DB) AuditLogSQL(ctx context.Context, ownerID string, f AuditFilter) (string, []any) {
	q, err := db.auditQuery(ctx, ownerID, f)
	if err != nil {
		panic(err)
	}
	stmt := q.Session(&gorm.Session{DryRun: true}).Table("audit_log").Find(&[]auditRow{}).Statement
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

// SetAuditFlushInterval sets how long a completion may wait for its
// commit (AuditFlushInterval); set it before the first completion.
func (db *DB) SetAuditFlushInterval(d time.Duration) {
	db.audit.mu.Lock()
	db.audit.every = d
	db.audit.mu.Unlock()
}

// OutcomeText is the outcome a stored number stands for.
func (db *DB) OutcomeText(code int64) string { return db.outcomeText(code) }
