package server_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// pruneLog is a slog handler that passes on the count of every audit
// retention deletion the server logs.
type pruneLog struct{ counts chan int64 }

func (h pruneLog) Enabled(context.Context, slog.Level) bool { return true }
func (h pruneLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h pruneLog) WithGroup(string) slog.Handler            { return h }
func (h pruneLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "deleted audit entries older than the retention" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "count" {
			h.counts <- a.Value.Int64()
		}
		return true
	})
	return nil
}

// TestServerPrunesTheAuditLogOnItsTimer: a running server deletes, on its
// own timer and in batches, the entries older than its retention, and keeps
// the newer ones.
func TestServerPrunesTheAuditLogOnItsTimer(t *testing.T) {
	counts := make(chan int64, 100)
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) {
		o.AuditRetention = 30 * 24 * time.Hour
		o.AuditPrune = server.AuditPrune{Every: 20 * time.Millisecond, Batch: 7, Pause: time.Millisecond}
		o.Logger = slog.New(pruneLog{counts})
	})
	alice := env.Person(t, "alice@example.com")
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	alice.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	var es []store.AuditEntry
	for i := range 50 {
		at := time.Now().Add(-40*24*time.Hour + time.Duration(i)*time.Minute) // 40 older than 30 days
		if i >= 40 {
			at = time.Now().Add(-time.Duration(i) * time.Minute)
		}
		es = append(es, store.AuditEntry{UserID: me.User.ID, WorkspaceID: "w", TokenID: "t", Site: "https://s.example", Tool: "t",
			Decision: "read-only", Outcome: "ok", CreatedAt: at})
	}
	if err := env.DB.AppendAudits(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for deleted := int64(0); deleted < 40; {
		select {
		case n := <-counts:
			deleted += n
		case <-deadline:
			t.Fatalf("the server deleted %d of the 40 entries older than its retention within 10 s", deleted)
		}
	}
	var out struct {
		Entries []store.AuditEntry `json:"entries"`
	}
	alice.MustJSON("GET", "/api/audit", nil, 200, &out)
	if len(out.Entries) != 10 {
		t.Errorf("%d entries left; want the 10 newer than the retention", len(out.Entries))
	}
}
