package store

import (
	"context"
	"fmt"
	"time"
)

// AuditEntry is one agent call, as recorded after it ended. Rows are only
// ever appended.
type AuditEntry struct {
	ID          string    `json:"id"`
	UserID      string    `json:"-"`
	WorkspaceID string    `json:"workspaceId"`
	TokenID     string    `json:"tokenId"`
	TaskID      string    `json:"taskId"`
	Site        string    `json:"site"`
	Tool        string    `json:"tool"`
	ArgsBytes   int64     `json:"argsBytes"`
	ResultBytes int64     `json:"resultBytes"`
	Decision    string    `json:"decision"`
	DecidedBy   string    `json:"decidedBy"`
	Outcome     string    `json:"outcome"`
	Error       string    `json:"error"`
	DurationMS  int64     `json:"durationMs"`
	CreatedAt   time.Time `json:"createdAt"`
}

// TableName keeps the table's singular-sounding name.
func (AuditEntry) TableName() string { return "audit_log" }

// AppendAudit records one call.
func (db *DB) AppendAudit(ctx context.Context, e *AuditEntry) error {
	if e.ID == "" {
		e.ID = NewID()
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = Now()
	}
	if err := db.WithContext(ctx).Create(e).Error; err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
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
	q := db.WithContext(ctx).Where("user_id = ?", ownerID)
	for col, v := range map[string]string{"workspace_id": f.WorkspaceID, "site": f.Site, "tool": f.Tool, "task_id": f.TaskID, "outcome": f.Outcome} {
		if v != "" {
			q = q.Where(col+" = ?", v)
		}
	}
	if f.Before != "" {
		q = q.Where("id < ?", f.Before)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	out := []AuditEntry{}
	err := q.Order("id DESC").Limit(f.Limit).Find(&out).Error
	return out, err
}
