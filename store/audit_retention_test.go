package store_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// agedLog gives a new person old entries made 100 to 91 days ago and new
// ones made in the last 89 days; it returns the person's id.
func agedLog(t *testing.T, db *store.DB, email string, old, fresh int) string {
	t.Helper()
	ctx := context.Background()
	u, err := db.CreateUser(ctx, email, "A", "hash")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var es []store.AuditEntry
	for i := range old + fresh {
		at := now.Add(-100*24*time.Hour + time.Duration(i)*time.Minute)
		if i >= old {
			at = now.Add(-89*24*time.Hour + time.Duration(i)*time.Minute)
		}
		es = append(es, store.AuditEntry{UserID: u.ID, WorkspaceID: "w", TokenID: "t", Site: "https://s.example",
			Tool: fmt.Sprintf("tool_%d", i%3), Decision: "read-only", Outcome: "ok", CreatedAt: at})
	}
	if err := db.AppendAudits(ctx, es); err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// TestAuditRetentionDeletesOnlyOlderEntriesInBatches: a batch deletes at
// most its size, the oldest first; pruning deletes every entry older than
// the cut and none newer; the owner's stats then show the oldest left.
func TestAuditRetentionDeletesOnlyOlderEntriesInBatches(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		uid := agedLog(t, db, "a@example.com", 300, 40)
		cut := time.Now().Add(-90 * 24 * time.Hour)
		n, err := db.PruneAuditBatch(ctx, cut, 64)
		if err != nil || n != 64 {
			t.Fatalf("one batch deleted %d, %v; want 64", n, err)
		}
		all, _ := db.AuditLog(ctx, uid, store.AuditFilter{Limit: 500})
		if len(all) != 340-64 {
			t.Fatalf("%d entries left; want %d", len(all), 340-64)
		}
		if oldest := all[len(all)-1].CreatedAt; oldest.Before(time.Now().Add(-100*24*time.Hour + 63*time.Minute)) {
			t.Errorf("the batch left an entry of %s: it must delete the oldest first", oldest)
		}
		n, err = db.PruneAudit(ctx, cut, 64, 0)
		if err != nil || n != 300-64 {
			t.Fatalf("pruning deleted %d, %v; want %d", n, err, 300-64)
		}
		all, _ = db.AuditLog(ctx, uid, store.AuditFilter{Limit: 500})
		if len(all) != 40 {
			t.Fatalf("%d entries left; want the 40 newer than the cut", len(all))
		}
		for _, e := range all {
			if e.CreatedAt.Before(cut) {
				t.Errorf("entry of %s is older than the cut %s and was kept", e.CreatedAt, cut)
			}
		}
		st, err := db.AuditStats(ctx)
		if err != nil || st.Oldest == nil || !st.Oldest.Equal(all[len(all)-1].CreatedAt) || st.Bytes <= 0 {
			t.Errorf("stats %+v, %v; want the oldest entry's time %s and a size", st, err, all[len(all)-1].CreatedAt)
		}
		if n, err := db.PruneAudit(ctx, cut, 64, 0); err != nil || n != 0 {
			t.Errorf("pruning again deleted %d, %v; want nothing", n, err)
		}
	})
}

// TestAuditRetentionRunnersAtOnce: several runners pruning one database at
// once (on PostgreSQL each through its own connection pool, as instances
// do) all succeed, and together delete exactly the older entries.
func TestAuditRetentionRunnersAtOnce(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		ctx := context.Background()
		opts := storetest.Options(t, k)
		dbs := make([]*store.DB, 3)
		for i := range dbs {
			db, err := store.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			dbs[i] = db
		}
		uid := agedLog(t, dbs[0], "a@example.com", 2000, 100)
		cut := time.Now().Add(-90 * 24 * time.Hour)
		var wg sync.WaitGroup
		deleted := make([]int64, len(dbs)*2)
		errs := make([]error, len(deleted))
		for i := range deleted {
			wg.Add(1)
			go func() {
				defer wg.Done()
				deleted[i], errs[i] = dbs[i%len(dbs)].PruneAudit(ctx, cut, 50, 0)
			}()
		}
		wg.Wait()
		var total int64
		for i, err := range errs {
			if err != nil {
				t.Errorf("runner %d: %v", i, err)
			}
			total += deleted[i]
		}
		left, _ := dbs[1].AuditLog(ctx, uid, store.AuditFilter{Limit: 500})
		if total != 2000 || len(left) != 100 {
			t.Errorf("runners deleted %d (%v) and left %d; want 2000 deleted, the 100 newer left", total, deleted, len(left))
		}
	})
}

// TestAuditNamesFromSeveralInstancesAtOnce: instances recording calls with
// the same new sites, tools and tasks at once agree on one key for each
// name, and every call reads back with its own strings.
func TestAuditNamesFromSeveralInstancesAtOnce(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		ctx := context.Background()
		opts := storetest.Options(t, k)
		dbs := make([]*store.DB, 3)
		for i := range dbs {
			db, err := store.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			dbs[i] = db
		}
		u, err := dbs[0].CreateUser(ctx, "a@example.com", "A", "hash")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 60)
		for i := range 60 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e := &store.AuditEntry{UserID: u.ID, WorkspaceID: "w", TokenID: "t", TaskID: fmt.Sprintf("task-%d", i%5),
					Site: fmt.Sprintf("https://s%d.example", i%4), Tool: fmt.Sprintf("tool_%d", i%6), Decision: "read-only"}
				if err := dbs[i%len(dbs)].BeginAudit(ctx, e); err != nil {
					errs <- err
					return
				}
				e.Outcome = "ok"
				errs <- dbs[(i+1)%len(dbs)].FinishAudit(ctx, e)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		all, err := dbs[2].AuditLog(ctx, u.ID, store.AuditFilter{Limit: 500})
		if err != nil || len(all) != 60 {
			t.Fatalf("%d entries, %v; want 60", len(all), err)
		}
		tools := map[string]int{}
		for _, e := range all {
			tools[e.Tool]++
			if e.Outcome != "ok" || e.Site == "" || e.TaskID == "" {
				t.Errorf("entry read back as %+v", e)
			}
		}
		for i := range 6 {
			if n := tools[fmt.Sprintf("tool_%d", i)]; n != 10 {
				t.Errorf("tool_%d: %d entries; want 10", i, n)
			}
		}
		var names int64
		dbs[0].Raw("SELECT COUNT(*) FROM audit_names WHERE user_id = ? AND kind = 6", u.ID).Scan(&names)
		if names != 6 {
			t.Errorf("%d tool names; want one per tool, 6", names)
		}
	})
}

// BenchmarkAuditPruneBatch measures one retention batch (500 entries): how
// long it holds the database (on SQLite, its one writer) while calls wait.
//
//	go test ./store -run XXX -bench AuditPruneBatch -benchtime 40x
//
// TABBRIDGE_BENCH_DB=postgres runs it on the test PostgreSQL instead of SQLite.
func BenchmarkAuditPruneBatch(b *testing.B) {
	kind := storetest.SQLite
	if os.Getenv("TABBRIDGE_BENCH_DB") == "postgres" {
		kind = storetest.Postgres
	}
	db := storetest.Open(b, kind)
	ctx := context.Background()
	u, _ := db.CreateUser(ctx, "a@example.com", "A", "hash")
	old := time.Now().Add(-200 * 24 * time.Hour)
	es := make([]store.AuditEntry, 0, 500*b.N)
	for i := range 500 * b.N {
		es = append(es, store.AuditEntry{UserID: u.ID, WorkspaceID: "w", TokenID: "t", TaskID: fmt.Sprintf("task-%d", i%50),
			Site: fmt.Sprintf("https://s%d.example", i%6), Tool: fmt.Sprintf("tool_%d", i%30), Decision: "read-only", Outcome: "ok",
			CreatedAt: old.Add(time.Duration(i) * time.Second)})
	}
	if err := db.AppendAudits(ctx, es); err != nil {
		b.Fatal(err)
	}
	cut := time.Now().Add(-90 * 24 * time.Hour)
	b.ResetTimer()
	for range b.N {
		if n, err := db.PruneAuditBatch(ctx, cut, 500); err != nil || n != 500 {
			b.Fatalf("deleted %d, %v", n, err)
		}
	}
}
