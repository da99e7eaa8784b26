package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// auditBytesMax is the most the audit log may grow by per call, on either
// database (issue 17 measured 798 B on SQLite and 982 B on PostgreSQL).
const auditBytesMax = 400

// auditSize is the space the audit log's tables and indexes take: on SQLite
// the pages in use (the file less its free pages) after a checkpoint, on
// PostgreSQL pg_total_relation_size of audit_log and audit_names.
// audit_running is left out there: it holds only the calls in flight, and
// its dead rows (one per call, until autovacuum) do not stay.
func auditSize(t testing.TB, db *store.DB) int64 {
	t.Helper()
	var n int64
	if db.Postgres {
		err := db.Raw("SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c " +
			"JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = current_schema() AND c.relkind = 'r' AND c.relname IN ('audit_log', 'audit_names')").Scan(&n).Error
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var pages, free, size int64
	if err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)").Error; err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		q  string
		to *int64
	}{{"PRAGMA page_count", &pages}, {"PRAGMA freelist_count", &free}, {"PRAGMA page_size", &size}} {
		if err := db.Raw(p.q).Scan(p.to).Error; err != nil {
			t.Fatal(err)
		}
	}
	return (pages - free) * size
}

// writeCalls records n calls the way sitetools does (begun as running, then
// finished), shaped like the soak's: a person's workspace and token, 50
// tasks, 6 sites, 30 tools, small arguments and results; one call in 20
// asked the person and keeps its result.
func writeCalls(t testing.TB, db *store.DB, owner, workspace, token string, n int) {
	t.Helper()
	ctx := context.Background()
	tasks := make([]string, 50)
	for i := range tasks {
		tasks[i] = store.NewID()
	}
	for i := range n {
		e := &store.AuditEntry{UserID: owner, WorkspaceID: workspace, TokenID: token, TaskID: tasks[i%len(tasks)],
			Site: fmt.Sprintf("https://shop%d.example.com", i%6), Tool: fmt.Sprintf("search_products_%d", i%30),
			ArgsBytes: 84, Decision: "none"}
		if err := db.BeginAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		e.Decision, e.Outcome, e.ResultBytes, e.DurationMS = "read-only", "ok", 1800, 38
		if i%20 == 0 {
			e.Decision, e.DecidedBy, e.RequestID, e.Result = "asked", owner, store.NewID(), `{"ordered":true,"order":"A-1234"}`
		}
		if err := db.FinishAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuditBytesPerCall writes calls and measures how much the audit log
// grows per call on each database: it must stay under auditBytesMax. The
// first calls warm the tables up (names, first pages); the growth is read
// over the calls after them. TABBRIDGE_AUDIT_CALLS sets how many (default
// 3000).
//
//	go test ./store -run TestAuditBytesPerCall -v
func TestAuditBytesPerCall(t *testing.T) {
	n := 3000
	if v := os.Getenv("TABBRIDGE_AUDIT_CALLS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, err := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		if err != nil {
			t.Fatal(err)
		}
		ws, err := db.CreateWorkspace(ctx, u.ID, "W")
		if err != nil {
			t.Fatal(err)
		}
		tok, _, err := db.CreateAgentToken(ctx, u.ID, ws.ID, "agent")
		if err != nil {
			t.Fatal(err)
		}
		writeCalls(t, db, u.ID, ws.ID, tok.ID, 200)
		before := auditSize(t, db)
		writeCalls(t, db, u.ID, ws.ID, tok.ID, n)
		per := float64(auditSize(t, db)-before) / float64(n)
		t.Logf("%s: %.0f B per call over %d calls", map[bool]string{true: "postgres", false: "sqlite"}[db.Postgres], per, n)
		if per >= auditBytesMax {
			t.Errorf("the audit log grew by %.0f B per call; want under %d", per, auditBytesMax)
		}
	})
}
