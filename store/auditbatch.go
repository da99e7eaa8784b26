package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
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
	db    *gorm.DB // the store's pool, without prepared statements; static
	store *DB      // whose names the rows use (rowOf); static

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
	// row is entry's stored row, made by the writer before it opens the
	// transaction (rowOf may add names); nil for a barrier or a row that
	// could not be made.
	row *auditRow
}

// newAuditWriter writes through conn, the store's own connection pool, but
// without gorm's prepared-statement cache: a statement cached while one
// goroutine prepares it outside a transaction makes a transaction that
// meets it wait for that preparation, which on SQLite's single connection
// waits for the transaction — a deadlock; and a statement prepared inside a
// transaction is closed with it. (PostgreSQL's driver caches statements per
// connection by itself.)
func newAuditWriter(db *DB, conn gorm.Dialector, cfg *gorm.Config) error {
	c := *cfg
	c.PrepareStmt = false
	g, err := gorm.Open(conn, &c)
	if err != nil {
		return fmt.Errorf("open audit writer: %w", err)
	}
	db.audit = &auditWriter{db: g, store: db}
	return nil
}

// begin queues e's insert into audit_running and returns once it is
// committed.
func (w *auditWriter) begin(ctx context.Context, e *AuditEntry) error {
	errc := make(chan error, 1)
	if !w.enqueue(&auditItem{entry: e, done: func(err error) { errc <- err }}, true) {
		return w.writeNow(ctx, &auditItem{entry: e}) // closed: one by one
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
		done(w.writeNow(context.Background(), &auditItem{entry: e, update: update}))
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

// commit writes batch in one transaction. The rows' names are interned
// first, outside it: interning may read and add audit_names through the
// store's own handle, which on SQLite's single connection would wait for
// the transaction holding it — and a name added inside a transaction that
// then rolls back would stay in the cache with no row behind it. If the
// transaction fails, each row is written by itself, so one bad row fails
// only its own call.
func (w *auditWriter) commit(batch []*auditItem, hold func()) {
	ready := make([]*auditItem, 0, len(batch))
	for _, it := range batch {
		if it.entry != nil {
			if err := w.makeRow(context.Background(), it); err != nil {
				it.done(err)
				continue
			}
		}
		ready = append(ready, it)
	}
	err := w.db.Transaction(func(tx *gorm.DB) error {
		if hold != nil {
			hold()
		}
		return writeRows(tx, ready, w.store.instanceID())
	})
	for _, it := range ready {
		if err != nil && it.entry != nil {
			it.done(writeRows(w.db, []*auditItem{it}, w.store.instanceID()))
			continue
		}
		it.done(nil)
	}
}

// makeRow gives it its stored row, adding the names it is the first to use.
func (w *auditWriter) makeRow(ctx context.Context, it *auditItem) error {
	r, err := w.store.rowOf(ctx, it.entry)
	if err != nil {
		if it.update {
			return fmt.Errorf("finish audit: %w", err)
		}
		return fmt.Errorf("append audit: %w", err)
	}
	it.row = r
	return nil
}

// writeNow writes one row at once, outside the queue (a closed writer).
func (w *auditWriter) writeNow(ctx context.Context, it *auditItem) error {
	if err := w.makeRow(ctx, it); err != nil {
		return err
	}
	return writeRows(w.db.WithContext(ctx), []*auditItem{it}, w.store.instanceID())
}

// writeRows writes the rows of items (made by makeRow) in a few statements
// however many there are: the begun calls in one insert into audit_running,
// the calls refused before they began in one insert into audit_log, and
// the completions as one move from audit_running to audit_log of those
// still running there (a row InterruptRunning ended is left as it is). The
// move inserts before it deletes, so that outside a transaction a crash in
// between leaves the call recorded (InterruptRunning drops the running
// copy).
func writeRows(tx *gorm.DB, items []*auditItem, instance string) error {
	var running, refused, ended []*auditRow
	for _, it := range items {
		switch {
		case it.row == nil:
		case it.update:
			ended = append(ended, it.row)
		case it.entry.Outcome == OutcomeRunning:
			running = append(running, it.row)
		default:
			refused = append(refused, it.row)
		}
	}
	if len(running) > 0 {
		if err := tx.Table("audit_running").Create(running).Error; err != nil {
			return fmt.Errorf("append audit: %w", err)
		}
		if err := markInstance(tx, running, instance); err != nil {
			return fmt.Errorf("append audit: %w", err)
		}
	}
	if len(refused) > 0 {
		if err := tx.Table("audit_log").Create(refused).Error; err != nil {
			return fmt.Errorf("append audit: %w", err)
		}
	}
	if len(ended) > 0 {
		if err := moveEnded(tx, ended); err != nil {
			return fmt.Errorf("finish audit: %w", err)
		}
	}
	return nil
}

// markInstance records which instance runs the calls just begun (the shared
// row type is audit_log's, which has no such column).
func markInstance(tx *gorm.DB, running []*auditRow, instance string) error {
	if instance == "" {
		return nil
	}
	ids := make([][]byte, len(running))
	for i, r := range running {
		ids[i] = r.ID
	}
	return tx.Exec("UPDATE audit_running SET instance_id = ? WHERE id IN ?", instance, ids).Error
}

// moveEnded moves the rows of ended calls still in audit_running into
// audit_log, in three statements.
func moveEnded(tx *gorm.DB, ended []*auditRow) error {
	ids := make([][]byte, len(ended))
	for i, r := range ended {
		ids[i] = r.ID
	}
	var still [][]byte
	if err := tx.Raw("SELECT id FROM audit_running WHERE id IN ?", ids).Scan(&still).Error; err != nil {
		return err
	}
	if len(still) == 0 {
		return nil
	}
	keep := make(map[string]bool, len(still))
	for _, id := range still {
		keep[string(id)] = true
	}
	rows := slices.DeleteFunc(slices.Clone(ended), func(r *auditRow) bool { return !keep[string(r.ID)] })
	if err := tx.Table("audit_log").Clauses(clause.OnConflict{DoNothing: true}).Create(rows).Error; err != nil {
		return err
	}
	return tx.Exec("DELETE FROM audit_running WHERE id IN ?", still).Error
}
