package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestPagesNameTasksInBoundedQueries: the audit page, the inbox and the
// grants page name every task they show with a fixed number of queries, not
// one per task: each finished call re-renders every open audit tab, and the
// log only grows.
func TestPagesNameTasksInBoundedQueries(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		alice, id, _ := aliceWorld(t, env)
		b := newBrowser(t, env, alice)
		uid := env.Server.UserIDForTest(t, "alice@example.com")
		ctx := context.Background()
		made := 0
		// grow gives alice n more tasks, each with a call, a waiting request
		// and a grant given answering another request.
		grow := func(n int) {
			for range n {
				task, err := env.DB.CreateTask(ctx, store.NewTask{WorkspaceID: id.workspace, Title: fmt.Sprintf("Errand %d", made), CreatedBy: uid})
				if err != nil {
					t.Fatal(err)
				}
				tool := fmt.Sprintf("tool_%d", made)
				made++
				now := store.Now()
				allowed := &approvals.Request{ID: store.NewID(), UserID: uid, WorkspaceID: id.workspace, TaskID: task.ID, Site: site, Tool: tool,
					Arguments: "{}", Status: approvals.StatusAllowed, Answer: approvals.AlwaysAllow, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
				waiting := &approvals.Request{ID: store.NewID(), UserID: uid, WorkspaceID: id.workspace, TaskID: task.ID, Site: site, Tool: tool + "_ask",
					Arguments: "{}", Status: approvals.StatusPending, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
				grant := &approvals.Grant{ID: store.NewID(), UserID: uid, WorkspaceID: id.workspace, Site: site, Tool: tool, CreatedBy: uid,
					RequestID: allowed.ID, CreatedAt: now}
				for _, row := range []any{allowed, waiting, grant} {
					if err := env.DB.Create(row).Error; err != nil {
						t.Fatal(err)
					}
				}
				if err := env.DB.AppendAudit(ctx, &store.AuditEntry{UserID: uid, WorkspaceID: id.workspace, TokenID: id.token,
					TaskID: task.ID, Site: site, Tool: tool, Decision: "grant", Outcome: "ok"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		pages := []string{"/", "/grants", "/audit"}
		render := func() map[string]int64 {
			out := map[string]int64{}
			for _, p := range pages {
				queries := countQueries(t, env.DB)
				b.get(p).want(t, 200, "Errand 0")
				out[p] = queries()
			}
			return out
		}
		grow(2)
		small := render()
		grow(40)
		if err := env.DB.AppendAudit(ctx, &store.AuditEntry{UserID: uid, WorkspaceID: id.workspace, TokenID: id.token,
			TaskID: "a-deleted-task", Site: site, Tool: "tool_0", Decision: "grant", Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
		big := render()
		for _, p := range pages {
			// A stray background query may land in a count; forty more
			// tasks must not add forty queries.
			if big[p] > small[p]+2 {
				t.Errorf("GET %s: %d queries with 2 tasks, %d with 42", p, small[p], big[p])
			}
		}
		b.get("/").want(t, 200, ">Errand 41</a>")
		b.get("/grants").want(t, 200, ">Errand 41</a>")
		b.get("/audit").want(t, 200, ">Errand 41</a>", ">Errand 41</option>", `<option value="a-deleted-task">Deleted task</option>`,
			`<option value="cancelled">Cancelled by the agent</option>`)
	})
}
