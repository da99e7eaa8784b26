package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/google/uuid"
	"github.com/pressly/goose/v3"
	"gorm.io/gorm"

	"github.com/tabbridge/tabbridge/migrations"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestCompactAuditMigratesExistingRows: entries written by the schema before
// 00016 read back the same after it (ids, times, every field), a call left
// running is still running and then interrupted, and long text is bounded.
func TestCompactAuditMigratesExistingRows(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		ctx := context.Background()
		opts := storetest.Options(t, k)
		raw, dialect := rawDB(t, opts)
		p, err := goose.NewProvider(dialect, raw, migrations.FS)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.UpTo(ctx, 15); err != nil {
			t.Fatal(err)
		}
		bind := func(q string) string {
			for n := 1; k == storetest.Postgres && strings.Contains(q, "?"); n++ {
				q = strings.Replace(q, "?", fmt.Sprintf("$%d", n), 1)
			}
			return q
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		uid := store.NewID()
		if _, err := raw.Exec(bind("INSERT INTO users (id, email, name, password_hash, is_owner, created_at, updated_at) VALUES (?, 'a@example.com', 'A', 'h', TRUE, ?, ?)"), uid, now, now); err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("é", 5000)
		old := []store.AuditEntry{
			{ID: store.NewID(), WorkspaceID: "ws1", TokenID: "tok1", TaskID: "task1", Site: "https://a.example", Tool: "buy", ArgsBytes: 12, ResultBytes: 34,
				Decision: "asked", DecidedBy: uid, Outcome: "ok", DurationMS: 56, RequestID: store.NewID(), Result: `{"ok":true}`},
			{ID: store.NewID(), WorkspaceID: "ws1", TokenID: "tok1", Site: "https://b.example", Tool: "search", Decision: "read-only", Outcome: "failed", Error: long},
			{ID: store.NewID(), WorkspaceID: "ws1", TokenID: "tok1", TaskID: "task1", Site: "https://a.example", Tool: "buy", Decision: "none", Outcome: store.OutcomeRunning},
		}
		for i := range old {
			e := &old[i]
			e.UserID = uid
			e.CreatedAt = uuidTime(e.ID)
			_, err := raw.Exec(bind("INSERT INTO audit_log (id, user_id, workspace_id, token_id, task_id, site, tool, args_bytes, result_bytes, decision, decided_by, outcome, error, duration_ms, request_id, result, created_at)"+
				" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"), e.ID, e.UserID, e.WorkspaceID, e.TokenID, e.TaskID, e.Site, e.Tool, e.ArgsBytes,
				e.ResultBytes, e.Decision, e.DecidedBy, e.Outcome, e.Error, e.DurationMS, e.RequestID, e.Result, e.CreatedAt)
			if err != nil {
				t.Fatal(err)
			}
		}
		raw.Close()
		db, err := store.Open(ctx, opts)
		if err != nil {
			t.Fatalf("migrate to the compact audit log: %v", err)
		}
		defer db.Close()
		got, err := db.AuditLog(ctx, uid, store.AuditFilter{})
		if err != nil || len(got) != 3 {
			t.Fatalf("after the migration: %d entries, %v; want 3", len(got), err)
		}
		old[1].Error = got[1].Error // bounded, checked below
		for i, e := range got {
			want := old[len(old)-1-i]
			if e != want {
				t.Errorf("entry %d after the migration:\n got %+v\nwant %+v", i, e, want)
			}
		}
		if n := len(got[1].Error); n > store.AuditTextMax || !strings.HasPrefix(long, got[1].Error[:100]) || !strings.Contains(got[1].Error, "more bytes not kept") {
			t.Errorf("a 10,000-byte error was kept as %d bytes ending %q", n, got[1].Error[max(0, n-60):])
		}
		if n, err := db.InterruptRunning(ctx); err != nil || n != 1 {
			t.Errorf("interrupted %d, %v; want the one call left running", n, err)
		}
		sites, _ := db.AuditValues(ctx, uid, "site")
		if strings.Join(sites, " ") != "https://a.example https://b.example" {
			t.Errorf("sites after the migration: %q", sites)
		}
	})
}

// rawDB opens the database opts names without migrating it.
func rawDB(t *testing.T, opts store.Options) (*sql.DB, goose.Dialect) {
	t.Helper()
	if opts.DatabaseURL != "" {
		db, err := sql.Open("pgx", opts.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db, goose.DialectPostgres
	}
	g, err := gorm.Open(sqlite.Open(filepath.Join(opts.DataDir, "tabbridge.db")), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := g.DB()
	if err != nil {
		t.Fatal(err)
	}
	return db, goose.DialectSQLite3
}

// uuidTime is the millisecond in a UUIDv7.
func uuidTime(id string) time.Time {
	u := uuid.MustParse(id)
	ms := int64(u[0])<<40 | int64(u[1])<<32 | int64(u[2])<<24 | int64(u[3])<<16 | int64(u[4])<<8 | int64(u[5])
	return time.UnixMilli(ms).UTC()
}
