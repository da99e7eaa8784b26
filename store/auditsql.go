package store

import (
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// auditColumns are audit_log's and audit_running's columns, in the order
// auditRow.values gives them.
const auditColumns = "id, owner, workspace, token, task, site, tool, outcome, decision, decided_by," +
	" args_bytes, result_bytes, duration_ms, request_id, error, result"

const auditColumnCount = 16

// values is r's row in auditColumns' order.
func (r *auditRow) values(into []any) []any {
	return append(into, r.ID, r.Owner, r.Workspace, r.Token, r.Task, r.Site, r.Tool, r.Outcome, r.Decision,
		r.DecidedBy, r.ArgsBytes, r.ResultBytes, r.DurationMS, r.RequestID, r.Error, r.Result)
}

// The audit writer's statements; each takes n rows or ids.
const (
	sqlInsertRunning = iota // INSERT INTO audit_running … n rows
	sqlInsertLog            // INSERT INTO audit_log … n rows (calls refused before they began)
	sqlTakeRunning          // DELETE FROM audit_running WHERE id IN (n ids) RETURNING id
	sqlMoveLog              // INSERT INTO audit_log … n rows, ON CONFLICT DO NOTHING
	sqlKinds
)

// auditTextsMaxRows bounds the batch sizes whose SQL is kept built.
const auditTextsMaxRows = 16

// auditStmts builds the audit writer's SQL. It is not prepared: the SQLite
// driver (modernc's, through glebarez) parses a statement's text again at
// every execution, prepared or not, and PostgreSQL's driver caches the
// statements it has seen per connection by itself. What it saves is gorm's
// building of each statement (reflection over the row, clauses, callbacks).
type auditStmts struct {
	pg bool // PostgreSQL's $n placeholders; static

	mu    sync.Mutex // guards texts
	texts [sqlKinds][auditTextsMaxRows + 1]string
}

func newAuditStmts(pg bool) *auditStmts { return &auditStmts{pg: pg} }

// sql is the SQL of kind for n rows or ids.
func (s *auditStmts) sql(kind, n int) string {
	if n > auditTextsMaxRows {
		return s.text(kind, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.texts[kind][n] == "" {
		s.texts[kind][n] = s.text(kind, n)
	}
	return s.texts[kind][n]
}

// text builds the SQL of kind for n rows or ids.
func (s *auditStmts) text(kind, n int) string {
	var b strings.Builder
	arg := 0
	next := func() {
		arg++
		if s.pg {
			b.WriteString("$" + strconv.Itoa(arg))
		} else {
			b.WriteByte('?')
		}
	}
	list := func(n int) {
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			next()
		}
	}
	rows := func(n int) {
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('(')
			list(auditColumnCount)
			b.WriteByte(')')
		}
	}
	switch kind {
	case sqlInsertRunning:
		b.WriteString("INSERT INTO audit_running (" + auditColumns + ", instance_id) VALUES ")
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('(')
			list(auditColumnCount + 1)
			b.WriteByte(')')
		}
	case sqlInsertLog, sqlMoveLog:
		b.WriteString("INSERT INTO audit_log (" + auditColumns + ") VALUES ")
		rows(n)
		if kind == sqlMoveLog {
			b.WriteString(" ON CONFLICT DO NOTHING")
		}
	case sqlTakeRunning:
		b.WriteString("DELETE FROM audit_running WHERE id IN (")
		list(n)
		b.WriteString(") RETURNING id")
	}
	return b.String()
}

// sqlRunner is what the statements run on: a transaction, or the pool for a
// batch that is one statement (auditWriter.run).
type sqlRunner interface {
	Exec(query string, args ...any) (sql.Result, error)
	Query(query string, args ...any) (*sql.Rows, error)
}

func (s *auditStmts) exec(tx sqlRunner, kind, n int, args []any) (sql.Result, error) {
	return tx.Exec(s.sql(kind, n), args...)
}

func (s *auditStmts) query(tx sqlRunner, kind, n int, args []any) (*sql.Rows, error) {
	return tx.Query(s.sql(kind, n), args...)
}

// auditRows are a batch's made rows, sorted: the begun calls, the calls
// refused before they began, and the completions.
type auditRows struct {
	running, refused, ended []*auditRow
}

// split sorts the made rows of items.
func split(items []*auditItem) auditRows {
	var r auditRows
	for _, it := range items {
		switch {
		case it.row == nil:
		case it.update:
			r.ended = append(r.ended, it.row)
		case it.entry.Outcome == OutcomeRunning:
			r.running = append(r.running, it.row)
		default:
			r.refused = append(r.refused, it.row)
		}
	}
	return r
}

// oneStatement reports whether write writes r in at most one statement: no
// completions (a move is two), and not both begun and refused calls.
func (r auditRows) oneStatement() bool {
	return len(r.ended) == 0 && (len(r.running) == 0 || len(r.refused) == 0)
}

// write writes the rows r in tx, in a few
// statements however many there are: the begun calls in one insert into
// audit_running, the calls refused before they began in one insert into
// audit_log, and the completions as one move from audit_running to
// audit_log of those still running there (a row InterruptRunning ended is
// left as it is).
func (s *auditStmts) write(tx sqlRunner, r auditRows, instance string) error {
	if err := s.insertRunning(tx, r.running, instance); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	if err := s.insert(tx, sqlInsertLog, r.refused); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	if err := s.moveEnded(tx, r.ended); err != nil {
		return fmt.Errorf("finish audit: %w", err)
	}
	return nil
}

// insertRunning inserts the begun calls with the instance that runs them
// (audit_running.instance_id: store.InterruptInstance ends a dead
// instance's calls by it).
func (s *auditStmts) insertRunning(tx sqlRunner, rows []*auditRow, instance string) error {
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, len(rows)*(auditColumnCount+1))
	for _, r := range rows {
		args = append(r.values(args), instance)
	}
	_, err := s.exec(tx, sqlInsertRunning, len(rows), args)
	return err
}

func (s *auditStmts) insert(tx sqlRunner, kind int, rows []*auditRow) error {
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, len(rows)*auditColumnCount)
	for _, r := range rows {
		args = r.values(args)
	}
	_, err := s.exec(tx, kind, len(rows), args)
	return err
}

// moveEnded moves the rows of ended calls still in audit_running into
// audit_log, in two statements: it takes them out of audit_running, and
// inserts those it took. Taking first makes the first statement of a batch
// of completions a write: on SQLite a transaction that read first (the
// select of an earlier version) and then writes fails at once with
// SQLITE_BUSY_SNAPSHOT when another connection (another instance on the
// same file) wrote in between, where a first write waits its busy timeout.
// Inside the transaction the order does not matter to a crash.
func (s *auditStmts) moveEnded(tx sqlRunner, ended []*auditRow) error {
	if len(ended) == 0 {
		return nil
	}
	ids := make([]any, len(ended))
	for i, r := range ended {
		ids[i] = r.ID
	}
	rs, err := s.query(tx, sqlTakeRunning, len(ids), ids)
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(ended))
	for rs.Next() {
		var id []byte
		if err := rs.Scan(&id); err != nil {
			rs.Close()
			return err
		}
		keep[string(id)] = true
	}
	if err := rs.Err(); err != nil {
		return err
	}
	if len(keep) == 0 {
		return nil
	}
	rows := ended
	if len(keep) < len(ended) {
		rows = slices.DeleteFunc(slices.Clone(ended), func(r *auditRow) bool { return !keep[string(r.ID)] })
	}
	args := make([]any, 0, len(rows)*auditColumnCount)
	for _, r := range rows {
		args = r.values(args)
	}
	_, err = s.exec(tx, sqlMoveLog, len(rows), args)
	return err
}
