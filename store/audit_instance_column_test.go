package store_test

import (
	"context"
	"testing"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

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
		log, err := db.AuditLog(ctx, u.ID, store.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range log {
			got[e.Tool] = e.Outcome
		}
		if got["dies"] != store.OutcomeInterrupted || got["lives"] != store.OutcomeRunning {
			t.Fatalf("outcomes after web-1 died: %v", got)
		}
		if n, err := db.InterruptInstance(ctx, ""); err != nil || n != 0 {
			t.Fatalf("the empty instance interrupted %d (%v); want none", n, err)
		}
	})
}
