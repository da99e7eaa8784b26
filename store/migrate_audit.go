package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
)

// compactAuditVersion is the migration that makes the audit log compact.
// It is a Go migration, not a file in migrations/, because it rewrites
// every row (ids to 16 bytes, strings to keys) and the two databases spell
// binary columns and hex decoding differently.
const compactAuditVersion = 16

// compactAuditMigration builds migration 00016 for one database. It runs in
// goose's transaction, under the PostgreSQL advisory lock like every other.
func compactAuditMigration(postgres bool) *goose.Migration {
	m := &auditMigration{postgres: postgres, blob: "BLOB"}
	if postgres {
		m.blob = "BYTEA"
	}
	return goose.NewGoMigration(compactAuditVersion, &goose.GoFunc{RunTx: m.up}, nil)
}

type auditMigration struct {
	postgres bool
	blob     string
	names    map[nameKey]int64
	next     int64
}

// The compact audit log. Every repeated string is a key of audit_names, one
// per person and kind; a key implies its person, so the filter indexes are
// (key, id) without the person's 36-byte id; the time is the id's
// (UUIDv7). Integer columns come first so PostgreSQL pads nothing.
func (m *auditMigration) schema() []string {
	return []string{
		`CREATE TABLE audit_names (
    id      INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind    SMALLINT NOT NULL,
    name    TEXT NOT NULL,
    UNIQUE (user_id, kind, name)
)`,
		`CREATE TABLE audit_compact (` + m.entryColumns() + `)`,
		// The calls in flight: BeginAudit writes here, FinishAudit moves the
		// ended row to audit_log, so audit_log only ever takes inserts. Its
		// rows are the log's, column for column.
		`CREATE TABLE audit_running (` + m.entryColumns() + `)`,
	}
}

// entryColumns are the columns of one compact entry, the same in the log
// (audit_compact, renamed audit_log) and in audit_running.
func (m *auditMigration) entryColumns() string {
	return `
    owner        INTEGER NOT NULL REFERENCES audit_names (id) ON DELETE CASCADE,
    workspace    INTEGER NOT NULL,
    token        INTEGER NOT NULL,
    task         INTEGER NOT NULL,
    site         INTEGER NOT NULL,
    tool         INTEGER NOT NULL,
    outcome      INTEGER NOT NULL,
    decision     INTEGER NOT NULL,
    decided_by   INTEGER NOT NULL,
    args_bytes   INTEGER NOT NULL,
    result_bytes INTEGER NOT NULL,
    duration_ms  INTEGER NOT NULL,
    id           ` + m.blob + ` PRIMARY KEY,
    request_id   TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    result       TEXT NOT NULL DEFAULT ''
`
}

var compactAuditIndexes = []string{
	"CREATE INDEX audit_log_user ON audit_log (owner, id)",
	"CREATE INDEX audit_log_user_site ON audit_log (site, id)",
	"CREATE INDEX audit_log_user_tool ON audit_log (tool, id)",
	// Only the calls that did not end ok: the outcome filter's rare values.
	"CREATE INDEX audit_log_user_outcome ON audit_log (owner, outcome, id) WHERE outcome <> 0",
	"CREATE INDEX audit_log_user_task ON audit_log (task, id)",
}

func (m *auditMigration) up(ctx context.Context, tx *sql.Tx) error {
	for _, q := range m.schema() {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("compact audit: %w", err)
		}
	}
	if err := m.copyRows(ctx, tx); err != nil {
		return fmt.Errorf("compact audit: %w", err)
	}
	for _, q := range append([]string{"DROP TABLE audit_log", "ALTER TABLE audit_compact RENAME TO audit_log"}, compactAuditIndexes...) {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("compact audit: %w", err)
		}
	}
	return nil
}

// copyRows moves every existing entry into the compact table, in id order,
// a thousand at a time.
func (m *auditMigration) copyRows(ctx context.Context, tx *sql.Tx) error {
	m.names = map[nameKey]int64{}
	after := ""
	for {
		es, err := m.oldRows(ctx, tx, after)
		if err != nil || len(es) == 0 {
			return err
		}
		for i := range es {
			if err := m.insert(ctx, tx, &es[i]); err != nil {
				return err
			}
		}
		after = es[len(es)-1].ID
	}
}

func (m *auditMigration) oldRows(ctx context.Context, tx *sql.Tx, after string) ([]AuditEntry, error) {
	rows, err := tx.QueryContext(ctx, m.bind("SELECT id, user_id, workspace_id, token_id, task_id, site, tool, args_bytes, result_bytes,"+
		" decision, decided_by, outcome, error, duration_ms, request_id, result, created_at FROM audit_log WHERE id > ? ORDER BY id LIMIT 1000"), after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.ID, &e.UserID, &e.WorkspaceID, &e.TokenID, &e.TaskID, &e.Site, &e.Tool, &e.ArgsBytes, &e.ResultBytes,
			&e.Decision, &e.DecidedBy, &e.Outcome, &e.Error, &e.DurationMS, &e.RequestID, &e.Result, &e.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (m *auditMigration) insert(ctx context.Context, tx *sql.Tx, e *AuditEntry) error {
	id, err := packID(e.ID)
	if err != nil { // not a UUID (never written by the server): a new id of its time
		id, _ = packID(idAt(e.CreatedAt))
	}
	keys := make([]any, 0, 16)
	for _, f := range []struct {
		kind int
		name string
	}{{nameOwner, ""}, {nameWorkspace, e.WorkspaceID}, {nameToken, e.TokenID}, {nameTask, e.TaskID}, {nameSite, e.Site},
		{nameTool, e.Tool}, {nameDecision, e.Decision}, {namePerson, e.DecidedBy}} {
		k := int64(0)
		if f.name != "" || (f.kind != nameTask && f.kind != namePerson) {
			if k, err = m.name(ctx, tx, e.UserID, f.kind, f.name); err != nil {
				return err
			}
		}
		keys = append(keys, k)
	}
	outcome, err := outcomeCode(e.Outcome, func(kind int, name string) (int64, error) { return m.name(ctx, tx, e.UserID, kind, name) })
	if err != nil {
		return err
	}
	keys = slices.Insert(keys, 6, any(outcome)) // owner … tool, then outcome
	keys = append(keys, e.ArgsBytes, e.ResultBytes, e.DurationMS, id, e.RequestID, boundText(e.Error), boundText(e.Result))
	table := "audit_compact"
	if e.Outcome == OutcomeRunning {
		table = "audit_running"
	}
	_, err = tx.ExecContext(ctx, m.bind("INSERT INTO "+table+" (owner, workspace, token, task, site, tool, outcome, decision,"+
		" decided_by, args_bytes, result_bytes, duration_ms, id, request_id, error, result) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"), keys...)
	return err
}

// name is the key of one name, added on first use; the migration holds
// the only writer, so keys simply count up.
func (m *auditMigration) name(ctx context.Context, tx *sql.Tx, user string, kind int, name string) (int64, error) {
	k := nameKey{user, kind, name}
	if id, ok := m.names[k]; ok {
		return id, nil
	}
	m.next++
	if _, err := tx.ExecContext(ctx, m.bind("INSERT INTO audit_names (id, user_id, kind, name) VALUES (?, ?, ?, ?)"), m.next, user, kind, name); err != nil {
		return 0, err
	}
	m.names[k] = m.next
	return m.next, nil
}

// bind writes ? placeholders as PostgreSQL's $n.
func (m *auditMigration) bind(q string) string {
	if !m.postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
