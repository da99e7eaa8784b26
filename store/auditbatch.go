package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"time"
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
	db    *sql.DB     // the store's pool; static
	stmts *auditStmts // the writer's statements; static
	store *DB         // whose names the rows use (rowOf); static

	mu sync.Mutex // guards the fields below
	// queue holds the rows waiting for the next transaction, in order.
	queue []*auditItem
	// writing is true while one goroutine owns the commits; it takes
	// every queued row before it lets go.
	writing bool
	// timer writes the completions waiting; armed is set while it is
	// due to fire.
	timer *time.Timer
	armed bool
	// every is how long a completion may wait (AuditFlushInterval; tests
	// set it longer).
	every  time.Duration
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
	now    bool // a caller waits for it (a begin, a barrier)
	done   func(error)
	// row is entry's stored row, made by the writer before it opens the
	// transaction (rowOf may add names); nil for a barrier or a row that
	// could not be made.
	row *auditRow
}

// newAuditWriter writes through sqlDB, the store's own connection pool, in
// SQL of its own rather than through gorm, whose building of each statement
// was a sixth of what a lone call allocated and about a tenth of its CPU on
// SQLite (docs/BENCHMARKS.md, "Call path at the floor").
func newAuditWriter(db *DB, sqlDB *sql.DB) {
	db.audit = &auditWriter{db: sqlDB, stmts: newAuditStmts(db.Postgres), store: db, every: AuditFlushInterval}
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
		w.armed = false
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
	it.now = now
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
		w.armLocked()
		w.mu.Unlock()
	}
}

// armLocked makes sure the timer will write what is queued, no later than
// AuditFlushInterval from now.
func (w *auditWriter) armLocked() {
	switch {
	case w.timer == nil:
		w.timer = time.AfterFunc(w.every, w.onTimer)
	case !w.armed:
		w.timer.Reset(w.every)
	}
	w.armed = true
}

func (w *auditWriter) onTimer() {
	w.mu.Lock()
	w.armed = false // a writer at work sees it and writes what is left
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
// further ones to a new goroutine, so it can get on with its call. That
// batch leaves out the completions whose timer is still due (unless a
// barrier waits for them): a lone call's begin then commits its own row
// only, not also the two statements of the last call's completion, which
// the timer writes off the calls' path, together with the completions of
// the calls that follow within the interval.
func (w *auditWriter) write(handOff bool) {
	for {
		w.mu.Lock()
		batch := w.takeLocked(handOff && w.armed)
		if len(batch) == 0 {
			w.writing = false
			w.mu.Unlock()
			return
		}
		hold := w.hold
		w.mu.Unlock()
		w.commit(batch, hold)
		if handOff {
			w.mu.Lock()
			if len(w.queue) == 0 || (w.armed && !slices.ContainsFunc(w.queue, func(it *auditItem) bool { return it.now })) {
				w.writing = false // the timer writes what is left
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			go w.write(false)
			return
		}
	}
}

// takeLocked takes the next batch from the queue: up to auditBatchMax rows
// in order, or with urgentOnly only those a caller waits for (all of them if
// a barrier is queued, which waits for everything before it).
func (w *auditWriter) takeLocked(urgentOnly bool) []*auditItem {
	if urgentOnly && slices.ContainsFunc(w.queue, func(it *auditItem) bool { return it.entry == nil }) {
		urgentOnly = false
	}
	var batch []*auditItem
	if urgentOnly {
		rest := w.queue[:0:0]
		for _, it := range w.queue {
			if it.now && len(batch) < auditBatchMax {
				batch = append(batch, it)
			} else {
				rest = append(rest, it)
			}
		}
		w.queue = rest
	} else {
		n := min(len(w.queue), auditBatchMax)
		batch = w.queue[:n:n]
		w.queue = w.queue[n:]
	}
	if len(w.queue) == 0 {
		w.queue = nil
		if w.timer != nil {
			w.timer.Stop()
			w.armed = false
		}
	}
	return batch
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
	err := w.run(ready, hold)
	for _, it := range ready {
		if err != nil && it.entry != nil {
			it.done(w.writeAlone(context.Background(), it))
			continue
		}
		it.done(nil)
	}
}

// run writes the made rows of items at once: in one transaction, or, when
// they are one statement (only begun calls, as a lone call's begin is, or
// only refused ones), as that statement alone — autocommitted, so as atomic
// as a transaction, without its BEGIN and COMMIT: on PostgreSQL two round
// trips fewer on the call's path, on SQLite two statements fewer. hold (tests)
// runs before the rows are written.
func (w *auditWriter) run(items []*auditItem, hold func()) error {
	rows := split(items)
	if rows.oneStatement() {
		if hold != nil {
			hold()
		}
		return w.stmts.write(w.db, rows, w.store.instanceID())
	}
	tx, err := w.db.Begin()
	if err != nil {
		return err
	}
	if hold != nil {
		hold()
	}
	if err := w.stmts.write(tx, rows, w.store.instanceID()); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// writeAlone writes one made row by itself.
func (w *auditWriter) writeAlone(ctx context.Context, it *auditItem) error {
	return w.run([]*auditItem{it}, nil)
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
	return w.writeAlone(ctx, it)
}
