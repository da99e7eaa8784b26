package store

import (
	"context"

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
