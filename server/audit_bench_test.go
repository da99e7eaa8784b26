package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// bigAuditLog gives one person a workspace with tasks tasks and rows audit
// entries spread over 6 sites (one of them rare: every 2,500th call), 40
// tools, every outcome and every task. It returns the person's client and
// the rare site.
func bigAuditLog(tb testing.TB, env *servertest.Env, rows, tasks int) (*servertest.Client, string) {
	tb.Helper()
	ctx := context.Background()
	alice := env.Person(tb, "alice@example.com")
	ws := alice.Workspace("Alice's")
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	alice.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	taskIDs := make([]string, tasks)
	for i := range taskIDs {
		t, err := env.DB.CreateTask(ctx, store.NewTask{WorkspaceID: ws, Title: fmt.Sprintf("Task %d", i), CreatedBy: me.User.ID})
		if err != nil {
			tb.Fatal(err)
		}
		taskIDs[i] = t.ID
	}
	outcomes := []string{sitetools.OutcomeOK, sitetools.OutcomeOK, sitetools.OutcomeOK, sitetools.OutcomeRefused,
		sitetools.OutcomeDenied, sitetools.OutcomeExpired, sitetools.OutcomeFailed}
	const rare = "https://rare.example"
	batch := make([]store.AuditEntry, 0, 500)
	at := time.Now().Add(-time.Duration(rows) * time.Second)
	for i := 0; i < rows; i++ {
		site := fmt.Sprintf("https://site%d.example", i%5)
		if i%2500 == 0 {
			site = rare
		}
		batch = append(batch, store.AuditEntry{UserID: me.User.ID, WorkspaceID: ws, TokenID: "t",
			TaskID: taskIDs[i%tasks], Site: site, Tool: fmt.Sprintf("tool_%02d", i%40), Decision: "read-only",
			Outcome: outcomes[i%len(outcomes)], ArgsBytes: 100, ResultBytes: 1000, DurationMS: 12, CreatedAt: at.Add(time.Duration(i) * time.Second)})
		if len(batch) == cap(batch) || i == rows-1 {
			if err := env.DB.AppendAudits(ctx, batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return alice, rare
}

// BenchmarkAuditPage renders the audit page (the whole page, as a browser
// opens it and as each finished call re-renders it) for a person with 50,000
// audit entries over 200 tasks: unfiltered, and filtered to a site with only
// 20 of the entries.
//
//	go test ./server -run XXX -bench AuditPage -benchtime 200x
//
// TABBRIDGE_BENCH_DB=postgres runs it on the test PostgreSQL instead of SQLite.
func BenchmarkAuditPage(b *testing.B) {
	kind := storetest.SQLite
	if os.Getenv("TABBRIDGE_BENCH_DB") == "postgres" {
		kind = storetest.Postgres
	}
	env := servertest.Start(b, kind, nil)
	alice, rare := bigAuditLog(b, env, 50_000, 200)
	if kind == storetest.Postgres {
		if err := env.DB.Exec("ANALYZE").Error; err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct{ name, path string }{
		{"all", "/audit"},
		{"rare-site", "/audit?site=" + url.QueryEscape(rare)},
		{"tool", "/audit?tool=tool_07"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			queries := countQueries(b, env.DB)
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest("GET", env.URL+bc.path, nil)
				req.Header.Set("Accept", "text/html")
				resp, err := alice.HTTP.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("GET %s: %d", bc.path, resp.StatusCode)
				}
			}
			b.ReportMetric(float64(queries())/float64(b.N), "queries/op")
		})
	}
}

// countQueries counts the statements that read db (gorm queries, raw SQL and
// single rows) from now until the test ends; the count may include a
// background sweep, so use it as an upper bound.
func countQueries(tb testing.TB, db *store.DB) func() int64 {
	tb.Helper()
	var n atomic.Int64
	var on atomic.Bool
	on.Store(true)
	tb.Cleanup(func() { on.Store(false) })
	count := func(*gorm.DB) {
		if on.Load() {
			n.Add(1)
		}
	}
	name := fmt.Sprintf("test:count:%p", &n)
	cb := db.Callback()
	for _, err := range []error{cb.Query().After("gorm:query").Register(name, count),
		cb.Raw().After("gorm:raw").Register(name, count), cb.Row().After("gorm:row").Register(name, count)} {
		if err != nil {
			tb.Fatal(err)
		}
	}
	return n.Load
}
