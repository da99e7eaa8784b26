package store_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// explain returns the database's plan for query, one line per step. On
// PostgreSQL sequential scans are priced out, so that a small test table
// shows the plan a long log gets.
func explain(t *testing.T, db *store.DB, query string, args ...any) string {
	t.Helper()
	sqlDB, err := db.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := sqlDB.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	prefix := "EXPLAIN QUERY PLAN "
	if db.Postgres {
		prefix = "EXPLAIN "
		for n := 1; strings.Contains(query, "?"); n++ {
			query = strings.Replace(query, "?", fmt.Sprintf("$%d", n), 1)
		}
		if _, err := tx.Exec("SET LOCAL enable_seqscan = off"); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(prefix+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var plan []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, fmt.Sprint(vals[len(vals)-1])) // SQLite's detail, PostgreSQL's only column
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

// scansTable reports whether a plan reads all of audit_log (or all of one
// of its indexes) rather than searching an index.
func scansTable(db *store.DB, plan string) bool {
	if db.Postgres {
		return strings.Contains(plan, "Seq Scan on audit_log") // audit_running holds only the calls in flight
	}
	for _, l := range strings.Split(plan, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "SCAN audit_log") {
			return true
		}
	}
	return false
}

// TestAuditFiltersAndValuesUseTheirIndexes: a filter by site, tool, outcome
// or task searches that column's index instead of walking the person's whole
// log, and the distinct sites, tools and tasks are read from the indexes one
// value at a time, never by scanning the log.
func TestAuditFiltersAndValuesUseTheirIndexes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		b, _ := db.CreateUser(ctx, "b@example.com", "B", "hash")
		var rows []store.AuditEntry
		for i := 0; i < 3000; i++ {
			e := store.AuditEntry{ID: store.NewID(), UserID: a.ID, WorkspaceID: "w", TokenID: "t", TaskID: fmt.Sprintf("task-%d", i%3),
				Site: fmt.Sprintf("https://s%d.example", i%3), Tool: fmt.Sprintf("tool_%d", i%4), Decision: "read-only", Outcome: "ok", CreatedAt: store.Now()}
			if i%1000 == 7 {
				e.Site, e.Tool, e.Outcome, e.TaskID = "https://rare.example", "rare_tool", "expired", "rare-task"
			}
			if i%500 == 1 {
				e.UserID, e.Site, e.Tool, e.TaskID = b.ID, "https://b.example", "b_tool", "b-task"
			}
			rows = append(rows, e)
		}
		if err := db.AppendAudits(ctx, rows); err != nil {
			t.Fatal(err)
		}
		if db.Postgres {
			if err := db.Exec("ANALYZE audit_log").Error; err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			f     store.AuditFilter
			index string
			want  int
		}{
			{store.AuditFilter{Site: "https://rare.example"}, "audit_log_user_site", 3},
			{store.AuditFilter{Tool: "rare_tool"}, "audit_log_user_tool", 3},
			{store.AuditFilter{Outcome: "expired", Limit: 51}, "audit_log_user_outcome", 3},
			{store.AuditFilter{TaskID: "rare-task"}, "audit_log_user_task", 3},
			{store.AuditFilter{Site: "https://rare.example", Before: rows[2007].ID}, "audit_log_user_site", 2},
		} {
			query, args := db.AuditLogSQL(ctx, a.ID, c.f)
			plan := explain(t, db, query, args...)
			if !strings.Contains(plan, c.index) || scansTable(db, plan) {
				t.Errorf("filter %+v does not search %s:\n%s", c.f, c.index, plan)
			}
			got, err := db.AuditLog(ctx, a.ID, c.f)
			if err != nil || len(got) != c.want {
				t.Errorf("filter %+v: %d entries, %v; want %d", c.f, len(got), err, c.want)
			}
		}
		for _, c := range []struct {
			column, index string
			want          []string
		}{
			{"site", "audit_log_user_site", []string{"https://rare.example", "https://s0.example", "https://s1.example", "https://s2.example"}},
			{"tool", "audit_log_user_tool", []string{"rare_tool", "tool_0", "tool_1", "tool_2", "tool_3"}},
			{"task_id", "audit_log_user_task", []string{"rare-task", "task-0", "task-1", "task-2"}},
		} {
			query, err := store.AuditValuesSQL(c.column)
			if err != nil {
				t.Fatal(err)
			}
			plan := explain(t, db, query, a.ID)
			if !strings.Contains(plan, c.index) || scansTable(db, plan) {
				t.Errorf("the distinct %ss do not step through %s:\n%s", c.column, c.index, plan)
			}
			got, err := db.AuditValues(ctx, a.ID, c.column)
			slices.Sort(got)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("distinct %ss: %q, %v; want %q", c.column, got, err, c.want)
			}
		}
		if _, err := db.AuditValues(ctx, a.ID, "error"); err == nil {
			t.Error("AuditValues read a column without an index")
		}
	})
}

// BenchmarkAuditQueries reads one person's 50,000-entry log the ways the
// audit page does: a page filtered to a rare site (20 entries), to a common
// tool, and the distinct sites, tools and tasks (200) for the filters.
//
//	go test ./store -run XXX -bench AuditQueries
//
// TABBRIDGE_BENCH_DB=postgres runs it on the test PostgreSQL instead of SQLite.
func BenchmarkAuditQueries(b *testing.B) {
	kind := storetest.SQLite
	if os.Getenv("TABBRIDGE_BENCH_DB") == "postgres" {
		kind = storetest.Postgres
	}
	db := storetest.Open(b, kind)
	ctx := context.Background()
	a, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
	rows := make([]store.AuditEntry, 0, 50_000)
	for i := range 50_000 {
		site := fmt.Sprintf("https://site%d.example", i%5)
		if i%2500 == 0 {
			site = "https://rare.example"
		}
		rows = append(rows, store.AuditEntry{ID: store.NewID(), UserID: a.ID, WorkspaceID: "w", TokenID: "t", TaskID: fmt.Sprintf("task-%03d", i%200),
			Site: site, Tool: fmt.Sprintf("tool_%02d", i%40), Decision: "read-only", Outcome: "ok", CreatedAt: store.Now()})
	}
	if err := db.AppendAudits(ctx, rows); err != nil {
		b.Fatal(err)
	}
	if db.Postgres {
		if err := db.Exec("ANALYZE audit_log").Error; err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []store.AuditFilter{{Site: "https://rare.example"}, {Tool: "tool_07"}} {
		f.Limit = 51
		b.Run(fmt.Sprintf("filter-%s%s", f.Site, f.Tool), func(b *testing.B) {
			for b.Loop() {
				if _, err := db.AuditLog(ctx, a.ID, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, col := range store.AuditColumns {
		b.Run("values-"+col, func(b *testing.B) {
			for b.Loop() {
				if _, err := db.AuditValues(ctx, a.ID, col); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
