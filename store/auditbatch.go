package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// AuditFlushInterval is how long a completed call's row may wait before it
// is written, when no other call's commit takes it along sooner.
const AuditFlushInterval = 5 * time.Millisecond

// auditBatchMax bounds the rows one audit transaction writes.
const auditBatchMax = 128

// auditWriter writes the audit log in group commits (issue 16): a call's
// running row (BeginAudit) is committed before BeginAudit returns, but the
// rows of concurrent calls share one transaction; a completion
// (CompleteAudit) waits for the next commit — another call's begin, or a
// timer AuditFlushInterval after it was queued — and never holds up its
// call. Close writes every queued row.
//
// There is no writer goroutine while nothing is queued: whoever queues into
// an idle writer commits that batch itself (so a lone call pays no hand-off),
// and a goroutine takes over only while rows keep coming.
type auditWriter struct {
	db *gorm.DB
	// insert and update are the two statements, prepared once on the pool
	// (prepare) before any transaction; a transaction uses them through
	// Tx.Stmt, which reuses what is prepared on its connection. Static
	// after prepare.
	insert, update *auditStmt

	mu sync.Mutex // guards the fields below
	// queue holds the rows waiting for the next transaction, in order.
	queue []*auditItem
	// writing is true while one goroutine owns the commits; it takes
	// every queued row before it lets go.
	writing bool
	// timer is armed while completions wait with nobody writing.
	timer  *time.Timer
	closed bool
	// hold, when set (tests), runs inside each transaction before its
	// rows are written; queued, when set (tests), is told the queue's
	// length after each row joins it.
	hold   func()
	queued func(n int)
}

// auditItem is one row to write, or (entry nil) a barrier that is done once
// everything queued before it is.
type auditItem struct {
	entry  *AuditEntry
	update bool // complete a begun row (else insert)
	done   func(error)
}

// newAuditWriter writes through conn, the store's own connection pool, but
// without gorm's prepared-statement cache: a statement cached while one
// goroutine prepares it outside a transaction makes a transaction that
// meets it wait for that preparation, which on SQLite's single connection
// waits for the transaction — a deadlock; and a statement prepared inside a
// transaction is closed with it. (PostgreSQL's driver caches statements per
// connection by itself.)
func newAuditWriter(conn gorm.Dialector, cfg *gorm.Config) (*auditWriter, error) {
	c := *cfg
	c.PrepareStmt = false
	g, err := gorm.Open(conn, &c)
	if err != nil {
		return nil, fmt.Errorf("open audit writer: %w", err)
	}
	return &auditWriter{db: g}, nil
}

// auditStmt is a prepared statement and the SQL gorm builds for it.
type auditStmt struct {
	sql  string
	stmt *sql.Stmt
}

// prepare prepares the writer's two statements; it runs after the
// migrations, before the store is used.
func (w *auditWriter) prepare(ctx context.Context) error {
	pool, err := w.db.DB()
	if err != nil {
		return fmt.Errorf("prepare audit writer: %w", err)
	}
	dry := w.db.Session(&gorm.Session{DryRun: true})
	probe := &AuditEntry{ID: "x", Outcome: OutcomeRunning}
	for _, p := range []struct {
		to   **auditStmt
		stmt *gorm.Statement
	}{{&w.insert, dry.Create(probe).Statement}, {&w.update, finishQuery(dry, probe).Statement}} {
		q := p.stmt.SQL.String()
		st, err := pool.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare audit writer: %w", err)
		}
		*p.to = &auditStmt{sql: q, stmt: st}
	}
	return nil
}

// exec runs the statement gorm builds for e through the prepared one when
// they are the same (else as gorm built it).
func (s *auditStmt) exec(tx *gorm.DB, built *gorm.Statement) error {
	sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx)
	if s == nil || !ok || built.SQL.String() != s.sql {
		return tx.Exec(built.SQL.String(), built.Vars...).Error
	}
	_, err := sqlTx.Stmt(s.stmt).Exec(built.Vars...)
	return err
}

// begin queues e's insert and returns once it is committed.
func (w *auditWriter) begin(ctx context.Context, e *AuditEntry) error {
	errc := make(chan error, 1)
	if !w.enqueue(&auditItem{entry: e, done: func(err error) { errc <- err }}, true) {
		return appendAudit(w.db.WithContext(ctx), e) // closed: one by one
	}
	return <-errc
}

// later queues a completion (update) or a refused call's row (insert),
// written with the next commit; done, if not nil, is told how it went.
func (w *auditWriter) later(e *AuditEntry, update bool, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	if !w.enqueue(&auditItem{entry: e, update: update, done: done}, false) {
		done(writeOne(w.db, &auditItem{entry: e, update: update}))
	}
}

// flush returns once every row queued before it is written (or ctx ends).
func (w *auditWriter) flush(ctx context.Context) error {
	w.mu.Lock()
	idle := len(w.queue) == 0 && !w.writing
	w.mu.Unlock()
	if idle {
		return nil
	}
	errc := make(chan error, 1)
	w.barrier(func(error) { errc <- nil })
	select {
	case <-errc:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// barrier queues done, called once every row queued before it is written;
// it is queued even on a closed writer, to drain it.
func (w *auditWriter) barrier(done func(error)) {
	w.mu.Lock()
	w.pushLocked(&auditItem{done: done}, true)
}

// close refuses new rows (they are written one by one from then on) and
// writes every row queued before it.
func (w *auditWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	errc := make(chan error, 1)
	w.barrier(func(error) { errc <- nil })
	<-errc
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
}

// enqueue queues it (pushLocked) unless the writer is closed, and reports
// whether it did.
func (w *auditWriter) enqueue(it *auditItem, now bool) bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	w.pushLocked(it, now)
	return true
}

// pushLocked adds it to the queue and starts writing if nobody is: at once
// when now is set (a caller waits), else after AuditFlushInterval. It is
// called with mu held and releases it.
func (w *auditWriter) pushLocked(it *auditItem, now bool) {
	w.queue = append(w.queue, it)
	if w.queued != nil {
		w.queued(len(w.queue))
	}
	switch {
	case w.writing:
		w.mu.Unlock() // the writer takes it with its next batch
	case now:
		w.writing = true
		w.mu.Unlock()
		w.write(true)
	default:
		if w.timer == nil {
			w.timer = time.AfterFunc(AuditFlushInterval, w.onTimer)
		} else if len(w.queue) == 1 {
			w.timer.Reset(AuditFlushInterval)
		}
		w.mu.Unlock()
	}
}

func (w *auditWriter) onTimer() {
	w.mu.Lock()
	if w.writing || len(w.queue) == 0 {
		w.mu.Unlock()
		return
	}
	w.writing = true
	w.mu.Unlock()
	w.write(false)
}

// write commits batches while rows are queued. A caller that started it
// (handOff) commits one batch — its own row is in it — and leaves any
// further ones to a new goroutine, so it can get on with its call.
func (w *auditWriter) write(handOff bool) {
	for {
		w.mu.Lock()
		n := min(len(w.queue), auditBatchMax)
		if n == 0 {
			w.writing = false
			w.mu.Unlock()
			return
		}
		batch := w.queue[:n:n]
		w.queue = w.queue[n:]
		if len(w.queue) == 0 {
			w.queue = nil
			if w.timer != nil {
				w.timer.Stop()
			}
		}
		hold := w.hold
		w.mu.Unlock()
		w.commit(batch, hold)
		if handOff {
			w.mu.Lock()
			if len(w.queue) == 0 {
				w.writing = false
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			go w.write(false)
			return
		}
	}
}

// commit writes batch in one transaction. If that fails, each row is
// written by itself, so one bad row fails only its own call.
func (w *auditWriter) commit(batch []*auditItem, hold func()) {
	err := w.db.Transaction(func(tx *gorm.DB) error {
		if hold != nil {
			hold()
		}
		return w.writeBatch(tx, batch)
	})
	for _, it := range batch {
		if err != nil && it.entry != nil {
			it.done(writeOne(w.db, it))
			continue
		}
		it.done(nil)
	}
}

// writeBatch writes the batch's rows in order, each through its prepared
// statement.
func (w *auditWriter) writeBatch(tx *gorm.DB, batch []*auditItem) error {
	dry := tx.Session(&gorm.Session{DryRun: true})
	for _, it := range batch {
		switch {
		case it.entry == nil:
		case it.update:
			if err := w.update.exec(tx, finishQuery(dry, it.entry).Statement); err != nil {
				return fmt.Errorf("finish audit: %w", err)
			}
		default:
			if err := w.insert.exec(tx, dry.Create(it.entry).Statement); err != nil {
				return fmt.Errorf("append audit: %w", err)
			}
		}
	}
	return nil
}

func writeOne(db *gorm.DB, it *auditItem) error {
	if it.update {
		return finishAudit(db, it.entry)
	}
	return appendAudit(db, it.entry)
}

// finishQuery completes e's row, if it is still running.
func finishQuery(db *gorm.DB, e *AuditEntry) *gorm.DB {
	return db.Model(&AuditEntry{}).Where("id = ? AND outcome = ?", e.ID, OutcomeRunning).
		Updates(map[string]any{"site": e.Site, "decision": e.Decision, "decided_by": e.DecidedBy, "outcome": e.Outcome,
			"error": e.Error, "duration_ms": e.DurationMS, "result_bytes": e.ResultBytes, "request_id": e.RequestID,
			"result": e.Result})
}

func appendAudit(db *gorm.DB, e *AuditEntry) error {
	if err := db.Create(e).Error; err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

func finishAudit(db *gorm.DB, e *AuditEntry) error {
	if err := finishQuery(db, e).Error; err != nil {
		return fmt.Errorf("finish audit: %w", err)
	}
	return nil
}
