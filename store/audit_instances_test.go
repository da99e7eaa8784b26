package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// logOutcomes reads user's audit log as the web app does and returns each tool's outcome.
func logOutcomes(t *testing.T, db *store.DB, user string) map[string]string {
	t.Helper()
	log, err := db.AuditLog(context.Background(), user, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range log {
		got[e.Tool] = e.Outcome
	}
	return got
}

// TestInterruptRunningBeforeEndsOnlyCallsOlderThanAnyCallLives: with several instances,
// a call running longer than any call can is a dead instance's; newer running calls belong
// to living instances and are left running.
func TestInterruptRunningBeforeEndsOnlyCallsOlderThanAnyCallLives(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		old := &store.AuditEntry{UserID: u.ID, Site: "s", Tool: "old", Decision: "none", CreatedAt: time.Now().Add(-10 * time.Minute)}
		young := &store.AuditEntry{UserID: u.ID, Site: "s", Tool: "young", Decision: "none"}
		for _, e := range []*store.AuditEntry{old, young} {
			if err := db.BeginAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := db.InterruptRunningBefore(ctx, time.Now().Add(-5*time.Minute)); err != nil || n != 1 {
			t.Fatalf("interrupted %d (%v), want the one older call", n, err)
		}
		got := logOutcomes(t, db, u.ID)
		if got["old"] != store.OutcomeInterrupted || got["young"] != store.OutcomeRunning {
			t.Fatalf("outcomes after the sweep: %v", got)
		}
	})
}

// TestAuditOfRequestsReadsTheCallsThatWaitedOnThem: the inbox's "Just answered" cards read
// what each answered request's calls did, running or ended, and no one else's.
func TestAuditOfRequestsReadsTheCallsThatWaitedOnThem(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		other, err := db.CreateUser(ctx, "b@example.com", "B", "hash")
		if err != nil {
			t.Fatal(err)
		}
		since := time.Now()
		ended := &store.AuditEntry{UserID: u.ID, Site: "s", Tool: "ended", Decision: "once", Outcome: "ok", RequestID: "r1", Result: "n4"}
		running := &store.AuditEntry{UserID: u.ID, Site: "s", Tool: "running", Decision: "once", RequestID: "r2"}
		unrelated := &store.AuditEntry{UserID: u.ID, Site: "s", Tool: "unrelated", Decision: "once", Outcome: "ok", RequestID: "r3"}
		foreign := &store.AuditEntry{UserID: other.ID, Site: "s", Tool: "foreign", Decision: "once", Outcome: "ok", RequestID: "r1"}
		for _, e := range []*store.AuditEntry{ended, unrelated, foreign} {
			if err := db.AppendAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.BeginAudit(ctx, running); err != nil {
			t.Fatal(err)
		}
		runs, err := db.AuditOfRequests(ctx, u.ID, []string{"r1", "r2"}, since)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 || runs[0].Tool != "ended" || runs[0].Result != "n4" || runs[1].Tool != "running" || runs[1].Outcome != store.OutcomeRunning {
			t.Fatalf("runs of r1, r2: %+v", runs)
		}
		if runs, err := db.AuditOfRequests(ctx, u.ID, []string{"r1"}, time.Now().Add(time.Hour)); err != nil || len(runs) != 0 {
			t.Fatalf("runs made before since were read: %+v %v", runs, err)
		}
	})
}

// TestInterruptInstanceEndsOnlyThatInstancesCalls: each running call
// records the instance that began it, so the calls of a dead instance are
// interrupted at once, whatever their age, and another instance's are not.
func TestInterruptInstanceEndsOnlyThatInstancesCalls(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		begin := func(instance, tool string) {
			db.SetInstance(instance)
			if err := db.BeginAudit(ctx, &store.AuditEntry{UserID: u.ID, Site: "s", Tool: tool, Decision: "none"}); err != nil {
				t.Fatal(err)
			}
		}
		begin("web-1", "dies")
		begin("web-2", "lives")
		if n, err := db.InterruptInstance(ctx, "web-1"); err != nil || n != 1 {
			t.Fatalf("interrupted %d (%v), want web-1's one call", n, err)
		}
		got := logOutcomes(t, db, u.ID)
		if got["dies"] != store.OutcomeInterrupted || got["lives"] != store.OutcomeRunning {
			t.Fatalf("outcomes after web-1 died: %v", got)
		}
		if n, err := db.InterruptInstance(ctx, ""); err != nil || n != 0 {
			t.Fatalf("the empty instance interrupted %d (%v); want none", n, err)
		}
	})
}
