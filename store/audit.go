package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
)

// AuditEntry is one agent call. A call that may reach a browser is recorded
// (outcome OutcomeRunning) before it is dispatched and completed once when it
// ends; a refused call is recorded ended. Rows are never deleted, and an
// ended row never changes.
type AuditEntry struct {
	ID          string `json:"id"`
	UserID      string `json:"-"`
	WorkspaceID string `json:"workspaceId"`
	TokenID     string `json:"tokenId"`
	TaskID      string `json:"taskId"`
	Site        string `json:"site"`
	Tool        string `json:"tool"`
	ArgsBytes   int64  `json:"argsBytes"`
	ResultBytes int64  `json:"resultBytes"`
	Decision    string `json:"decision"`
	DecidedBy   string `json:"decidedBy"`
	Outcome     string `json:"outcome"`
	Error       string `json:"error"`
	DurationMS  int64  `json:"durationMs"`
	// RequestID is the approval request the call waited on ("" when it
	// asked nobody); Result is the page's result of such a call, so the
	// person who allowed it sees what it did.
	RequestID string    `json:"requestId,omitempty"`
	Result    string    `json:"result,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// The outcomes the store itself gives a call: running from BeginAudit until
// FinishAudit, interrupted when the server stopped in between.
const (
	OutcomeRunning     = "running"
	OutcomeInterrupted = "interrupted"
)

// TableName keeps the table's singular-sounding name.
func (AuditEntry) TableName() string { return "audit_log" }

// AppendAudit records one call, committed when it returns.
func (db *DB) AppendAudit(ctx context.Context, e *AuditEntry) error {
	stamp(e)
	return appendAudit(db.WithContext(ctx), e)
}

func stamp(e *AuditEntry) {
	if e.ID == "" {
		e.ID = NewID()
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = Now()
	}
}

// BeginAudit records a call about to be dispatched, as running, and returns
// once its row is committed: a crash after that leaves the call visible
// (InterruptRunning). The caller dispatches only after BeginAudit returns
// nil. Concurrent calls' rows share one transaction (group commit).
func (db *DB) BeginAudit(ctx context.Context, e *AuditEntry) error {
	e.Outcome = OutcomeRunning
	stamp(e)
	return db.audit.begin(ctx, e)
}

// FinishAudit completes a row BeginAudit wrote, once: an ended row (say,
// one InterruptRunning marked) is left as it is. It returns once the row is
// written; CompleteAudit does not wait.
func (db *DB) FinishAudit(ctx context.Context, e *AuditEntry) error {
	errc := make(chan error, 1)
	db.CompleteAudit(e, func(err error) { errc <- err })
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CompleteAudit records how a call ended without making the caller wait:
// it completes the row BeginAudit wrote (as FinishAudit) or, for a call
// never begun (e.CreatedAt zero: refused before dispatch), appends its row.
// The row is written with the next commit, at most AuditFlushInterval
// later, and before Close returns; done (if not nil) is then told how it
// went. Reads of the audit log (AuditLog, AuditValues) wait for the rows
// queued before them. e must not change until done is called.
func (db *DB) CompleteAudit(e *AuditEntry, done func(error)) {
	begun := !e.CreatedAt.IsZero()
	stamp(e)
	db.audit.later(e, begun, done)
}

// FlushAudit returns once every audit row queued before it is written.
func (db *DB) FlushAudit(ctx context.Context) error { return db.audit.flush(ctx) }

// InterruptRunning marks the calls an earlier run of the server left
// running (it was killed mid-call) as interrupted. Like the withdrawal of
// stale approval requests it runs at start, before this server dispatches
// anything.
func (db *DB) InterruptRunning(ctx context.Context) (int64, error) {
	res := db.WithContext(ctx).Model(&AuditEntry{}).Where("outcome = '" + OutcomeRunning + "'"). // literal: matches audit_log_running
													Updates(map[string]any{"outcome": OutcomeInterrupted,
			"error": "The Tabbridge server stopped while this call was waiting or running; whether it had an effect in the page is unknown."})
	if res.Error != nil {
		return 0, fmt.Errorf("interrupt running calls: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// AuditFilter narrows a person's audit log; empty fields match everything.
type AuditFilter struct {
	WorkspaceID, Site, Tool, TaskID, Outcome string
	// Before is an entry id: only older entries are returned (paging).
	Before string
	Limit  int
}

// AuditLog returns a person's audit entries, newest first.
func (db *DB) AuditLog(ctx context.Context, ownerID string, f AuditFilter) ([]AuditEntry, error) {
	if err := db.FlushAudit(ctx); err != nil {
		return nil, err
	}
	out := []AuditEntry{}
	err := db.auditQuery(ctx, ownerID, f).Find(&out).Error
	return out, err
}

// auditQuery selects a person's entries matching f, newest first. A filter
// on a site, tool, outcome or task reads the matching rows in id order from
// its (user_id, column, id) index and stops when the page is full.
func (db *DB) auditQuery(ctx context.Context, ownerID string, f AuditFilter) *gorm.DB {
	q := db.WithContext(ctx).Where("user_id = ?", ownerID)
	for _, c := range []struct{ col, v string }{{"site", f.Site}, {"tool", f.Tool}, {"task_id", f.TaskID},
		{"outcome", f.Outcome}, {"workspace_id", f.WorkspaceID}} {
		if c.v != "" {
			q = q.Where(c.col+" = ?", c.v)
		}
	}
	if f.Before != "" {
		q = q.Where("id < ?", f.Before)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	return q.Order("id DESC").Limit(f.Limit)
}

// AuditColumns are the audit log's columns whose distinct values
// AuditValues reads: each has a (user_id, column, id) index.
var AuditColumns = []string{"site", "tool", "task_id"}

// AuditValues returns the distinct non-empty values of one of AuditColumns
// in a person's audit log, in the database's order. It steps through the
// column's index from one value to the next (a loose index scan), one probe
// per value however many rows the log holds: neither database reads a
// DISTINCT from an index without walking every entry (PostgreSQL has no skip
// scan before 18).
func (db *DB) AuditValues(ctx context.Context, ownerID, column string) ([]string, error) {
	q, err := auditValuesSQL(column)
	if err != nil {
		return nil, err
	}
	if err := db.FlushAudit(ctx); err != nil {
		return nil, err
	}
	out := []string{}
	if err := db.WithContext(ctx).Raw(q, ownerID, ownerID).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("audit %s values: %w", column, err)
	}
	return out, nil
}

// auditValuesSQL is AuditValues' query for column; it takes the owner twice.
func auditValuesSQL(column string) (string, error) {
	if !slices.Contains(AuditColumns, column) {
		return "", fmt.Errorf("audit values: %q is not one of %v", column, AuditColumns)
	}
	next := "SELECT " + column + " FROM audit_log WHERE user_id = ? AND " + column + " > %s ORDER BY " + column + " LIMIT 1"
	return "WITH RECURSIVE v (val) AS (SELECT (" + fmt.Sprintf(next, "''") + ")" +
		" UNION ALL SELECT (" + fmt.Sprintf(next, "v.val") + ") FROM v WHERE v.val IS NOT NULL)" +
		" SELECT val FROM v WHERE val IS NOT NULL", nil
}
