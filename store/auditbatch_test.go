package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// outcomes reads the outcome of every row of user, by tool, straight from
// the database past the store's queue: the ended calls in audit_log and the
// running ones in audit_running. A call in both fails the test.
func outcomes(t *testing.T, db *store.DB, user string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range []string{"audit_log", "audit_running"} {
		var rows []struct {
			Tool    string
			Outcome int64
		}
		q := "SELECT n.name AS tool, a.outcome FROM " + table + " a JOIN audit_names n ON n.id = a.tool WHERE n.user_id = ?"
		if err := db.Raw(q, user).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if o, ok := out[r.Tool]; ok {
				t.Fatalf("call %s is both %s and %s", r.Tool, o, db.OutcomeText(r.Outcome))
			}
			out[r.Tool] = db.OutcomeText(r.Outcome)
		}
	}
	return out
}

// TestBegunCallIsCommittedBeforeBeginReturns: the running row a call
// writes before dispatch is committed when BeginAudit returns — another
// connection to the database (another instance, or the next start after a
// crash) sees it.
func TestBegunCallIsCommittedBeforeBeginReturns(t *testing.T) {
	for _, k := range []storetest.Kind{storetest.SQLite, storetest.Postgres} {
		t.Run(string(k), func(t *testing.T) {
			opts := storetest.Options(t, k)
			ctx := context.Background()
			db, err := store.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			other, err := store.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
			if err := db.BeginAudit(ctx, &store.AuditEntry{UserID: u.ID, Site: "s", Tool: "buy", Decision: "none"}); err != nil {
				t.Fatal(err)
			}
			if got := outcomes(t, other, u.ID); got["buy"] != store.OutcomeRunning {
				t.Fatalf("another connection reads %v after BeginAudit; want buy running", got)
			}
			if n, err := other.InterruptRunning(ctx); err != nil || n != 1 {
				t.Fatalf("a restart would mark %d calls interrupted (%v), want 1", n, err)
			}
		})
	}
}

// TestConcurrentBeginsShareATransaction: calls that begin while a commit is
// under way go together in the next one, and each returns once it is in.
func TestConcurrentBeginsShareATransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		var mu sync.Mutex
		txs := 0
		first, release := make(chan struct{}), make(chan struct{})
		db.HoldAudit(func() {
			mu.Lock()
			txs++
			n := txs
			mu.Unlock()
			if n == 1 {
				close(first)
				<-release
			}
		})
		const calls = 12
		all := make(chan struct{})
		db.OnAuditQueued(func(n int) {
			if n == calls {
				close(all)
			}
		})
		errs := make(chan error, calls+1)
		go func() { errs <- db.BeginAudit(ctx, &store.AuditEntry{UserID: u.ID, Tool: "t0", Decision: "none"}) }()
		<-first // t0's transaction is open: the others queue behind it
		for i := 1; i <= calls; i++ {
			go func() {
				errs <- db.BeginAudit(ctx, &store.AuditEntry{UserID: u.ID, Tool: fmt.Sprintf("t%d", i), Decision: "none"})
			}()
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			t.Fatal("the begins did not queue behind the open transaction")
		}
		close(release)
		for i := 0; i <= calls; i++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := outcomes(t, db, u.ID); len(got) != calls+1 {
			t.Fatalf("%d rows after %d begins: %v", len(got), calls+1, got)
		}
		mu.Lock()
		defer mu.Unlock()
		if txs != 2 {
			t.Fatalf("%d begins took %d transactions; want 2 (the first, then the rest together)", calls+1, txs)
		}
	})
}

// TestCompletionsAreWrittenOffTheCallsPath: a completion returns at once,
// is written within the flush interval with no other call to take it
// along, and a read of the audit log sees it even before that.
func TestCompletionsAreWrittenOffTheCallsPath(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		a := &store.AuditEntry{UserID: u.ID, Tool: "a", Decision: "none"}
		b := &store.AuditEntry{UserID: u.ID, Tool: "b", Decision: "none"}
		for _, e := range []*store.AuditEntry{a, b} {
			if err := db.BeginAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		written := make(chan error, 1)
		a.Outcome = "ok"
		db.CompleteAudit(a, func(err error) { written <- err })
		select {
		case err := <-written:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a completion was not written by its timer")
		}
		if got := outcomes(t, db, u.ID)["a"]; got != "ok" {
			t.Fatalf("a reads %q once written; want ok", got)
		}
		b.Outcome = "failed"
		db.CompleteAudit(b, nil)
		log, err := db.AuditLog(ctx, u.ID, store.AuditFilter{Tool: "b"})
		if err != nil || len(log) != 1 || log[0].Outcome != "failed" {
			t.Fatalf("AuditLog right after the completion: %+v (%v); want b failed", log, err)
		}
		refused := &store.AuditEntry{UserID: u.ID, Tool: "refused", Decision: "none", Outcome: "refused"}
		db.CompleteAudit(refused, nil) // never begun: appended
		if vals, err := db.AuditValues(ctx, u.ID, "tool"); err != nil || len(vals) != 3 {
			t.Fatalf("tools after a refused call: %v (%v); want a, b, refused", vals, err)
		}
		var ended int64
		id := uuid.MustParse(refused.ID)
		if err := db.Raw("SELECT COUNT(*) FROM audit_log WHERE id = ?", id[:]).Scan(&ended).Error; err != nil || ended != 1 {
			t.Fatalf("the refused call is in audit_log %d times (%v); want once, never running", ended, err)
		}
	})
}

// TestALoneBeginLeavesTheLastCompletionToItsTimer: a begin with nothing
// else waiting commits its own row only; the completion queued before it
// (its timer still due) is not written in the begin's transaction, but by
// the timer or the next read of the log.
func TestALoneBeginLeavesTheLastCompletionToItsTimer(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		db.SetAuditFlushInterval(time.Hour)
		u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		a := &store.AuditEntry{UserID: u.ID, Tool: "a", Decision: "none"}
		if err := db.BeginAudit(ctx, a); err != nil {
			t.Fatal(err)
		}
		a.Outcome = "ok"
		db.CompleteAudit(a, nil)
		if err := db.BeginAudit(ctx, &store.AuditEntry{UserID: u.ID, Tool: "b", Decision: "none"}); err != nil {
			t.Fatal(err)
		}
		if got := outcomes(t, db, u.ID); got["a"] != store.OutcomeRunning || got["b"] != store.OutcomeRunning {
			t.Fatalf("rows right after b's begin: %v; want a still running (its completion waits for its timer) and b running", got)
		}
		if err := db.FlushAudit(ctx); err != nil {
			t.Fatal(err)
		}
		if got := outcomes(t, db, u.ID)["a"]; got != "ok" {
			t.Fatalf("a reads %q after a flush; want ok", got)
		}
	})
}

// TestCleanShutdownLosesNoCompletion: after a burst of concurrent calls and
// a clean shutdown (Close) every call reads completed on the next start —
// none running, none interrupted.
func TestCleanShutdownLosesNoCompletion(t *testing.T) {
	for _, k := range []storetest.Kind{storetest.SQLite, storetest.Postgres} {
		t.Run(string(k), func(t *testing.T) {
			opts := storetest.Options(t, k)
			ctx := context.Background()
			db, err := store.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
			const calls = 200
			var wg sync.WaitGroup
			for i := 0; i < calls; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					e := &store.AuditEntry{UserID: u.ID, Tool: fmt.Sprintf("t%03d", i), Decision: "none"}
					if err := db.BeginAudit(ctx, e); err != nil {
						t.Error(err)
						return
					}
					e.Outcome = "ok"
					db.CompleteAudit(e, nil)
				}()
			}
			wg.Wait()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			next, err := store.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer next.Close()
			if n, err := next.InterruptRunning(ctx); err != nil || n != 0 {
				t.Fatalf("the next start finds %d calls running (%v); want 0", n, err)
			}
			got := outcomes(t, next, u.ID)
			ok := 0
			for _, o := range got {
				if o == "ok" {
					ok++
				}
			}
			if len(got) != calls || ok != calls {
				t.Fatalf("after a clean shutdown: %d rows, %d ok; want %d of each", len(got), ok, calls)
			}
		})
	}
}

// TestABadRowFailsOnlyItsOwnCall: a row the database refuses (here a
// duplicate id) in a shared transaction fails its own BeginAudit; the
// others in the batch are written.
func TestABadRowFailsOnlyItsOwnCall(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		first := &store.AuditEntry{UserID: u.ID, Tool: "first", Decision: "none"}
		if err := db.BeginAudit(ctx, first); err != nil {
			t.Fatal(err)
		}
		opened, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		db.HoldAudit(func() { once.Do(func() { close(opened); <-release }) })
		two := make(chan struct{})
		db.OnAuditQueued(func(n int) {
			if n == 2 {
				close(two)
			}
		})
		held := make(chan error, 1)
		go func() { held <- db.BeginAudit(ctx, &store.AuditEntry{UserID: u.ID, Tool: "held", Decision: "none"}) }()
		<-opened
		dup, good := make(chan error, 1), make(chan error, 1)
		go func() {
			dup <- db.BeginAudit(ctx, &store.AuditEntry{ID: first.ID, UserID: u.ID, Tool: "dup", Decision: "none"})
		}()
		go func() { good <- db.BeginAudit(ctx, &store.AuditEntry{UserID: u.ID, Tool: "good", Decision: "none"}) }()
		select {
		case <-two:
		case <-time.After(10 * time.Second):
			t.Fatal("the begins did not queue behind the open transaction")
		}
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		if err := <-dup; err == nil {
			t.Fatal("a row with a taken id was accepted")
		}
		if err := <-good; err != nil {
			t.Fatalf("the good row beside a bad one: %v", err)
		}
		if got := outcomes(t, db, u.ID); len(got) != 3 || got["good"] != store.OutcomeRunning {
			t.Fatalf("rows: %v; want first, held and good running", got)
		}
	})
}
