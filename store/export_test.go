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
