package store_test

import (
	"context"
	"testing"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestRunningCallsAreCompletedOnceOrInterrupted: a begun row reads running,
// is completed once, and one a killed server left is marked interrupted and
// then stays as it is, even when its call later finishes.
func TestRunningCallsAreCompletedOnceOrInterrupted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		done := &store.AuditEntry{UserID: u.ID, Site: "s", Tool: "done", Decision: "none"}
		left := &store.AuditEntry{UserID: u.ID, Site: "s", Tool: "left", Decision: "none"}
		for _, e := range []*store.AuditEntry{done, left} {
			if err := db.BeginAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		done.Outcome, done.Result, done.RequestID = "ok", "bought", "r1"
		if err := db.FinishAudit(ctx, done); err != nil {
			t.Fatal(err)
		}
		if n, err := db.InterruptRunning(ctx); err != nil || n != 1 {
			t.Fatalf("interrupted %d rows (%v), want 1", n, err)
		}
		left.Outcome = "ok"
		if err := db.FinishAudit(ctx, left); err != nil {
			t.Fatal(err)
		}
		log, err := db.AuditLog(ctx, u.ID, store.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]store.AuditEntry{}
		for _, e := range log {
			got[e.Tool] = e
		}
		if e := got["done"]; e.Outcome != "ok" || e.Result != "bought" || e.RequestID != "r1" {
			t.Fatalf("completed row: %+v", e)
		}
		if e := got["left"]; e.Outcome != store.OutcomeInterrupted || e.Error == "" {
			t.Fatalf("row a killed server left: %+v", e)
		}
	})
}
