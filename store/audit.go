package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// AuditEntry is one agent call. A call that may reach a browser is recorded
// (outcome OutcomeRunning) before it is dispatched and completed once when it
// ends; a refused call is recorded ended. An ended row never changes; rows
// older than the retention are deleted (PruneAudit).
//
// It is what the API shows. The stored row (auditRow) is compact: the id in
// 16 bytes, the time read from the id, every repeated string as a key into
// audit_names.
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
	// asked nobody); Result is the page's result of such a call (its first
	// AuditTextMax bytes), so the person who allowed it sees what it did.
	RequestID string `json:"requestId,omitempty"`
	Result    string `json:"result,omitempty"`
	// CreatedAt is the id's time (UUIDv7), to the millisecond.
	CreatedAt time.Time `json:"createdAt"`
}

// The outcomes the store itself gives a call: running from BeginAudit until
// FinishAudit, interrupted when the server stopped in between.
const (
	OutcomeRunning     = "running"
	OutcomeInterrupted = "interrupted"
)

// AuditTextMax bounds the error and result text an audit row keeps: a page's
// result may be 256 KiB and its error message as long, and the log keeps
// every call for months. Longer text is cut at a character boundary and says
// how much was left out.
const AuditTextMax = 4096

// auditRow is audit_log's row (migration 00016).
type auditRow struct {
	ID          []byte // UUIDv7, 16 bytes: ordered by time
	Owner       int64  // audit_names keys, each of its kind
	Workspace   int64
	Token       int64
	Task        int64 // 0: no task
	Site        int64
	Tool        int64
	Outcome     int64
	Decision    int64
	DecidedBy   int64 // 0: nobody
	ArgsBytes   int64
	ResultBytes int64
	DurationMS  int64
	RequestID   string
	Error       string
	Result      string
}

func (auditRow) TableName() string { return "audit_log" }

// packID is the 16 bytes of a UUID id.
func packID(id string) ([]byte, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("audit id %q is not a UUID: %w", id, err)
	}
	return u[:], nil
}

func unpackID(b []byte) (string, time.Time) {
	u, err := uuid.FromBytes(b)
	if err != nil {
		return "", time.Time{}
	}
	return u.String(), idTime(b)
}

// idTime is the millisecond a UUIDv7 was made.
func idTime(b []byte) time.Time {
	var ms [8]byte
	copy(ms[2:], b[:6])
	return time.UnixMilli(int64(binary.BigEndian.Uint64(ms[:]))).UTC()
}

// idAt returns a new UUIDv7 of time t: entries written with a time of their
// own (imports, tests) sort where that time does.
func idAt(t time.Time) string {
	u := uuid.Must(uuid.NewV7())
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	return u.String()
}

// idFloor is the smallest id of time t: every id made before t sorts below.
func idFloor(t time.Time) []byte {
	b := make([]byte, 16)
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	return b
}

// boundText keeps at most AuditTextMax bytes of s.
func boundText(s string) string {
	if len(s) <= AuditTextMax {
		return s
	}
	cut := AuditTextMax - 80
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… (%d more bytes not kept in the audit log)", len(s)-cut)
}

// outcomeCodes are the outcomes a call can have, stored as these numbers
// (not as keys of audit_names) so that the outcome index can leave out the
// common one: it holds only calls whose outcome is not ok. An outcome not
// listed is stored as the negated key of its name.
var outcomeCodes = map[string]int64{"ok": 0, "refused": 1, "denied": 2, "expired": 3, "withdrawn": 4, "cancelled": 5,
	"failed": 6, "gone": 7, OutcomeRunning: 8, OutcomeInterrupted: 9}

// outcomeCode is the stored number of outcome; intern names one not listed.
func outcomeCode(outcome string, intern func(kind int, name string) (int64, error)) (int64, error) {
	if c, ok := outcomeCodes[outcome]; ok {
		return c, nil
	}
	k, err := intern(nameOutcome, outcome)
	return -k, err
}

// outcomeText is the outcome a stored number stands for.
func (db *DB) outcomeText(c int64) string {
	if c < 0 {
		return db.nameText(-c)
	}
	for o, code := range outcomeCodes {
		if code == c {
			return o
		}
	}
	return ""
}

// rowOf turns e into its stored row, adding names it is the first to use.
func (db *DB) rowOf(ctx context.Context, e *AuditEntry) (*auditRow, error) {
	id, err := packID(e.ID)
	if err != nil {
		return nil, err
	}
	r := &auditRow{ID: id, ArgsBytes: e.ArgsBytes, ResultBytes: e.ResultBytes, DurationMS: e.DurationMS,
		RequestID: e.RequestID, Error: boundText(e.Error), Result: boundText(e.Result)}
	for _, f := range []struct {
		into *int64
		kind int
		name string
	}{{&r.Owner, nameOwner, ""}, {&r.Workspace, nameWorkspace, e.WorkspaceID}, {&r.Token, nameToken, e.TokenID},
		{&r.Task, nameTask, e.TaskID}, {&r.Site, nameSite, e.Site}, {&r.Tool, nameTool, e.Tool},
		{&r.Decision, nameDecision, e.Decision}, {&r.DecidedBy, namePerson, e.DecidedBy}} {
		if f.name == "" && (f.kind == nameTask || f.kind == namePerson) {
			continue // key 0: none
		}
		if *f.into, err = db.internName(ctx, e.UserID, f.kind, f.name); err != nil {
			return nil, err
		}
	}
	r.Outcome, err = outcomeCode(e.Outcome, func(kind int, name string) (int64, error) { return db.internName(ctx, e.UserID, kind, name) })
	if err != nil {
		return nil, err
	}
	return r, nil
}

// prepare gives e its id and time: an id of its CreatedAt when it has one
// and no id, else a new id; the time is always the id's.
func prepare(e *AuditEntry) {
	if e.ID == "" {
		if e.CreatedAt.IsZero() {
			e.ID = NewID()
		} else {
			e.ID = idAt(e.CreatedAt)
		}
	}
	if b, err := packID(e.ID); err == nil {
		e.CreatedAt = idTime(b)
	}
}

// AppendAudit records one call, committed when it returns.
func (db *DB) AppendAudit(ctx context.Context, e *AuditEntry) error {
	prepare(e)
	r, err := db.rowOf(ctx, e)
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	if err := db.WithContext(ctx).Table(tableOf(e.Outcome)).Create(r).Error; err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// tableOf is where a row of outcome lives: a running call in audit_running
// until it ends, so audit_log only ever takes inserts (on PostgreSQL an
// update there would leave a dead copy of the row and of each index entry).
func tableOf(outcome string) string {
	if outcome == OutcomeRunning {
		return "audit_running"
	}
	return "audit_log"
}

// AppendAudits records many ended calls at once, in batches (imports,
// tests, benchmarks); each keeps its id or CreatedAt.
func (db *DB) AppendAudits(ctx context.Context, es []AuditEntry) error {
	rows := make([]*auditRow, 0, len(es))
	for i := range es {
		prepare(&es[i])
		r, err := db.rowOf(ctx, &es[i])
		if err != nil {
			return fmt.Errorf("append audit: %w", err)
		}
		rows = append(rows, r)
	}
	if err := db.WithContext(ctx).CreateInBatches(rows, 500).Error; err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// BeginAudit records a call about to be dispatched, as running, and returns
// once its row is committed: a crash after that leaves the call visible
// (InterruptRunning). The caller dispatches only after BeginAudit returns
// nil. Concurrent calls' rows share one transaction (group commit).
func (db *DB) BeginAudit(ctx context.Context, e *AuditEntry) error {
	e.Outcome = OutcomeRunning
	prepare(e)
	return db.audit.begin(ctx, e)
}

// FinishAudit completes a row BeginAudit wrote, once: it moves the ended
// row from audit_running to audit_log. A row that is no longer running (say,
// one InterruptRunning ended) is left as it is. It returns once the row is
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
// went. Reads of the audit log (AuditLog, AuditValues, AuditStats) wait for
// the rows queued before them. e must not change until done is called.
func (db *DB) CompleteAudit(e *AuditEntry, done func(error)) {
	begun := !e.CreatedAt.IsZero()
	prepare(e)
	db.audit.later(e, begun, done)
}

// FlushAudit returns once every audit row queued before it is written.
func (db *DB) FlushAudit(ctx context.Context) error { return db.audit.flush(ctx) }

// interruptedError is the error of a call the server stopped under.
const interruptedError = "The Tabbridge server stopped while this call was waiting or running; whether it had an effect in the page is unknown."

// InterruptRunning marks the calls an earlier run of the server left
// running (it was killed mid-call) as interrupted: it moves them from
// audit_running to audit_log. Like the withdrawal of stale approval
// requests it runs at start, before this server dispatches anything.
func (db *DB) InterruptRunning(ctx context.Context) (int64, error) {
	return db.interruptRunning(ctx, db.WithContext(ctx).Table("audit_running"))
}

// interruptRunning marks the running calls q selects as interrupted.
func (db *DB) interruptRunning(ctx context.Context, q *gorm.DB) (int64, error) {
	var rows []auditRow
	if err := q.Find(&rows).Error; err != nil {
		return 0, fmt.Errorf("interrupt running calls: %w", err)
	}
	var n int64
	for _, r := range rows {
		if err := db.interrupt(ctx, r); err != nil {
			return n, fmt.Errorf("interrupt running calls: %w", err)
		}
		n++
	}
	return n, nil
}

func (db *DB) interrupt(ctx context.Context, r auditRow) error {
	r.Outcome, r.Error = outcomeCodes[OutcomeInterrupted], interruptedError
	if err := db.WithContext(ctx).Table("audit_log").Clauses(clause.OnConflict{DoNothing: true}).Create(&r).Error; err != nil {
		return err
	}
	return db.WithContext(ctx).Exec("DELETE FROM audit_running WHERE id = ?", r.ID).Error
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
	q, err := db.auditQuery(ctx, ownerID, f)
	if errors.Is(err, errNoName) {
		return out, nil // a value the log never held: nothing matches
	}
	if err != nil {
		return nil, err
	}
	var rows, running []auditRow
	if err := q.Session(&gorm.Session{}).Table("audit_log").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	if err := q.Session(&gorm.Session{}).Table("audit_running").Find(&running).Error; err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return db.entriesOf(ctx, ownerID, mergeNewest(rows, running, limitOf(f)))
}

// mergeNewest merges two lists of rows, each newest first, into the newest
// limit of them; a row in both (a call ended as it was read) counts once,
// ended.
func mergeNewest(ended, running []auditRow, limit int) []auditRow {
	if len(running) == 0 {
		return ended
	}
	seen := map[string]bool{}
	for _, r := range ended {
		seen[string(r.ID)] = true
	}
	out := slices.Clone(ended)
	for _, r := range running {
		if !seen[string(r.ID)] {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b auditRow) int { return bytes.Compare(b.ID, a.ID) })
	return out[:min(len(out), limit)]
}

// limitOf is the page size f asks for: 1–500, 100 when unset.
func limitOf(f AuditFilter) int {
	if f.Limit <= 0 || f.Limit > 500 {
		return 100
	}
	return f.Limit
}

// entriesOf turns stored rows into entries, reading the names they use.
func (db *DB) entriesOf(ctx context.Context, ownerID string, rows []auditRow) ([]AuditEntry, error) {
	keys := map[int64]bool{}
	for _, r := range rows {
		for _, k := range []int64{r.Workspace, r.Token, r.Task, r.Site, r.Tool, -r.Outcome, r.Decision, r.DecidedBy} {
			keys[k] = true
		}
	}
	if err := db.namesOf(ctx, keys); err != nil {
		return nil, err
	}
	out := make([]AuditEntry, len(rows))
	for i, r := range rows {
		id, at := unpackID(r.ID)
		out[i] = AuditEntry{ID: id, UserID: ownerID, WorkspaceID: db.nameText(r.Workspace), TokenID: db.nameText(r.Token),
			TaskID: db.nameText(r.Task), Site: db.nameText(r.Site), Tool: db.nameText(r.Tool), ArgsBytes: r.ArgsBytes,
			ResultBytes: r.ResultBytes, Decision: db.nameText(r.Decision), DecidedBy: db.nameText(r.DecidedBy),
			Outcome: db.outcomeText(r.Outcome), Error: r.Error, DurationMS: r.DurationMS, RequestID: r.RequestID,
			Result: r.Result, CreatedAt: at}
	}
	return out, nil
}

// auditQuery selects a person's entries matching f, newest first. A name
// key belongs to one person, so a filter on a site, tool, outcome or task
// reads the matching rows in id order from that column's (column, id) index
// alone and stops when the page is full; errNoName means nothing matches.
// Outcomes are numbers shared by everyone, so an outcome filter reads the
// (owner, outcome, id) index.
func (db *DB) auditQuery(ctx context.Context, ownerID string, f AuditFilter) (*gorm.DB, error) {
	q := db.WithContext(ctx)
	keyed := false
	for _, c := range []struct {
		col  string
		kind int
		v    string
	}{{"site", nameSite, f.Site}, {"tool", nameTool, f.Tool}, {"task", nameTask, f.TaskID},
		{"workspace", nameWorkspace, f.WorkspaceID}} {
		if c.v == "" {
			continue
		}
		k, err := db.lookupName(ctx, ownerID, c.kind, c.v)
		if err != nil {
			return nil, err
		}
		q, keyed = q.Where(c.col+" = ?", k), true
	}
	if f.Outcome != "" {
		c, err := outcomeCode(f.Outcome, func(kind int, name string) (int64, error) { return db.lookupName(ctx, ownerID, kind, name) })
		if err != nil {
			return nil, err
		}
		// Literals, so that both planners see the partial index applies
		// (SQLite only when the query repeats the index's own condition).
		q = q.Where(fmt.Sprintf("outcome = %d", c))
		if c != 0 {
			q = q.Where("outcome <> 0")
		}
	}
	if !keyed {
		owner, err := db.lookupName(ctx, ownerID, nameOwner, "")
		if err != nil {
			return nil, err
		}
		q = q.Where("owner = ?", owner)
	}
	if f.Before != "" {
		b, err := packID(f.Before)
		if err != nil {
			return nil, errNoName // not an entry's id: nothing is before it
		}
		q = q.Where("id < ?", b)
	}
	return q.Order("id DESC").Limit(limitOf(f)), nil
}

// AuditColumns are the audit log's columns whose distinct values
// AuditValues reads: each has a (column, id) index.
var AuditColumns = []string{"site", "tool", "task_id"}

// AuditValues returns the distinct non-empty values of one of AuditColumns
// in a person's audit log, in the database's order. They are the person's
// names of that kind, each kept if one row still uses it: one probe of the
// column's index per name, however many rows the log holds.
func (db *DB) AuditValues(ctx context.Context, ownerID, column string) ([]string, error) {
	q, err := auditValuesSQL(column)
	if err != nil {
		return nil, err
	}
	if err := db.FlushAudit(ctx); err != nil {
		return nil, err
	}
	out := []string{}
	if err := db.WithContext(ctx).Raw(q, ownerID).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("audit %s values: %w", column, err)
	}
	return out, nil
}

// auditValuesSQL is AuditValues' query for column; it takes the owner.
func auditValuesSQL(column string) (string, error) {
	if !slices.Contains(AuditColumns, column) {
		return "", fmt.Errorf("audit values: %q is not one of %v", column, AuditColumns)
	}
	col, kind := map[string]string{"site": "site", "tool": "tool", "task_id": "task"}[column],
		map[string]int{"site": nameSite, "tool": nameTool, "task_id": nameTask}[column]
	return fmt.Sprintf("SELECT n.name FROM audit_names n WHERE n.user_id = ? AND n.kind = %d"+
		" AND (EXISTS (SELECT 1 FROM audit_log a WHERE a.%s = n.id) OR EXISTS (SELECT 1 FROM audit_running r WHERE r.%[2]s = n.id))"+
		" ORDER BY n.name", kind, col), nil
}

// PruneAuditBatch deletes up to batch of the oldest entries made before
// before, in one short statement through the primary key, and returns how
// many it deleted. On PostgreSQL the rows another instance is deleting at
// the same moment are skipped (SKIP LOCKED), so runners on several
// instances never wait on each other or fail; SQLite has one writer, and a
// batch holds it only briefly.
func (db *DB) PruneAuditBatch(ctx context.Context, before time.Time, batch int) (int64, error) {
	lock := ""
	if db.Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	res := db.WithContext(ctx).Exec("DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE id < ? ORDER BY id LIMIT ?"+lock+")",
		idFloor(before), batch)
	if res.Error != nil {
		return 0, fmt.Errorf("prune audit log: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// PruneAudit deletes every entry made before before, batch by batch,
// waiting pause between batches so calls keep the database, until a batch
// comes back short or ctx ends. It returns how many it deleted.
func (db *DB) PruneAudit(ctx context.Context, before time.Time, batch int, pause time.Duration) (int64, error) {
	var total int64
	for {
		n, err := db.PruneAuditBatch(ctx, before, batch)
		total += n
		if err != nil || n < int64(batch) {
			return total, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return total, ctx.Err()
		case <-t.C:
		}
	}
}

// AuditStats is what the server's owner sees of the audit log as a whole.
type AuditStats struct {
	// Bytes is the space the audit log's tables and indexes take.
	Bytes int64 `json:"bytes"`
	// Oldest is when the oldest entry was made; nil for an empty log.
	Oldest *time.Time `json:"oldest"`
}

// auditSizeTTL is how long AuditStats trusts a size SQLite read page by
// page (its dbstat table walks every page of the log).
const auditSizeTTL = 5 * time.Minute

// AuditStats reads the audit log's size and oldest entry.
func (db *DB) AuditStats(ctx context.Context) (AuditStats, error) {
	var st AuditStats
	if err := db.FlushAudit(ctx); err != nil {
		return st, err
	}
	var ids [][]byte
	if err := db.WithContext(ctx).Raw("SELECT id FROM audit_log ORDER BY id LIMIT 1").Scan(&ids).Error; err != nil {
		return st, fmt.Errorf("audit stats: %w", err)
	}
	if len(ids) == 1 && len(ids[0]) == 16 {
		at := idTime(ids[0])
		st.Oldest = &at
	}
	size, err := db.auditBytes(ctx)
	if err != nil {
		return st, fmt.Errorf("audit stats: %w", err)
	}
	st.Bytes = size
	return st, nil
}

func (db *DB) auditBytes(ctx context.Context) (int64, error) {
	var n int64
	if db.Postgres {
		err := db.WithContext(ctx).Raw("SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace" +
			" WHERE ns.nspname = current_schema() AND c.relkind = 'r' AND c.relname IN ('audit_log', 'audit_names', 'audit_running')").Scan(&n).Error
		return n, err
	}
	if v, ok := db.auditSize.get(auditSizeTTL); ok {
		return v, nil
	}
	err := db.WithContext(ctx).Raw("SELECT COALESCE(SUM(pgsize), 0) FROM dbstat('main', 1) WHERE name IN " +
		"(SELECT name FROM sqlite_schema WHERE tbl_name IN ('audit_log', 'audit_names', 'audit_running'))").Scan(&n).Error
	if err == nil {
		db.auditSize.put(n)
	}
	return n, err
}

// AuditOfRequests returns a person's entries of the calls that waited on
// the given approval requests, oldest first, reading only entries made at
// or after since (the oldest request's creation: a call is recorded after
// the request it waited on opened), through the (owner, id) index.
func (db *DB) AuditOfRequests(ctx context.Context, ownerID string, requestIDs []string, since time.Time) ([]AuditEntry, error) {
	if len(requestIDs) == 0 {
		return []AuditEntry{}, nil
	}
	owner, err := db.lookupName(ctx, ownerID, nameOwner, "")
	if errors.Is(err, errNoName) {
		return []AuditEntry{}, nil // no entry of this person's yet
	}
	if err != nil {
		return nil, err
	}
	floor := idFloor(since.Add(-time.Second)) // ids carry milliseconds; a second of slack for clocks
	var rows []auditRow
	for _, table := range []string{"audit_log", "audit_running"} {
		var part []auditRow
		err := db.WithContext(ctx).Table(table).Where("owner = ? AND id >= ? AND request_id IN ?", owner, floor, requestIDs).
			Order("id").Limit(1000).Find(&part).Error
		if err != nil {
			return nil, fmt.Errorf("audit of requests: %w", err)
		}
		rows = append(rows, part...)
	}
	slices.SortFunc(rows, func(a, b auditRow) int { return bytes.Compare(a.ID, b.ID) })
	rows = slices.CompactFunc(rows, func(a, b auditRow) bool { return bytes.Equal(a.ID, b.ID) })
	return db.entriesOf(ctx, ownerID, rows)
}
