package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

type taskList struct {
	Tasks []struct{ ID, Status string } `json:"tasks"`
	Next  string                        `json:"next"`
}

// An agent cannot open tasks without end: at the cap a new or reopened task
// is refused with a sentence that says what to do, on the API and on /mcp,
// and a burst cannot race past it.
func TestOpenTasksAreCapped(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.TasksOpenMax = 5 })
		alice, id, token := aliceWorld(t, env) // one open task: "Ship it"
		cs := env.MCP(t, token, nil)
		var wg sync.WaitGroup
		var mu sync.Mutex
		made, refused := 0, 0
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := servertest.CallTool(t, cs, "createTask", map[string]any{"title": fmt.Sprintf("task %d", i)})
				mu.Lock()
				defer mu.Unlock()
				switch text := servertest.ResultText(res); {
				case !res.IsError:
					made++
				case strings.Contains(text, "This workspace has 5 open tasks, the most it may have. Reuse an open task (listTasks)"):
					refused++
				default:
					t.Errorf("createTask at the cap: %s", text)
				}
			}()
		}
		wg.Wait()
		if made != 4 || refused != 8 {
			t.Fatalf("12 creates at a cap of 5 with 1 open: %d made, %d refused", made, refused)
		}
		ws := "/api/workspaces/" + id.workspace + "/tasks"
		alice.MustJSON("POST", ws, map[string]string{"title": "one more"}, http.StatusConflict, nil)
		// A finished task makes room; reopening one at the cap is refused.
		alice.MustJSON("PATCH", "/api/tasks/"+id.task, map[string]string{"status": "completed"}, 200, nil)
		var tk struct{ Task struct{ ID string } }
		alice.MustJSON("POST", ws, map[string]string{"title": "now there is room"}, 201, &tk)
		alice.MustJSON("PATCH", "/api/tasks/"+id.task, map[string]string{"status": "ongoing"}, http.StatusConflict, nil)
		res := servertest.CallTool(t, cs, "updateTask", map[string]any{"taskId": id.task, "status": "blocked"})
		if !res.IsError || !strings.Contains(servertest.ResultText(res), "set finished ones to completed or rejected") {
			t.Fatalf("reopening at the cap through updateTask: %v %s", res.IsError, servertest.ResultText(res))
		}
		// Finished tasks may still be made and renamed; open ones may change status among themselves.
		alice.MustJSON("POST", ws, map[string]string{"title": "done already", "status": "completed"}, 201, nil)
		alice.MustJSON("PATCH", "/api/tasks/"+id.task, map[string]string{"title": "Shipped"}, 200, nil)
		alice.MustJSON("PATCH", "/api/tasks/"+tk.Task.ID, map[string]string{"status": "blocked"}, 200, nil)
		var all taskList
		alice.MustJSON("GET", ws+"?limit=500", nil, 200, &all)
		open := 0
		for _, t := range all.Tasks {
			if t.Status != "completed" && t.Status != "rejected" {
				open++
			}
		}
		if open != 5 {
			t.Fatalf("%d tasks open, want the cap of 5: %+v", open, all.Tasks)
		}
	})
}

// Every reader of a workspace's tasks is paged: the API by a cursor, the
// agent's listTasks 50 at a time, the workspace page with an "Older tasks"
// link; each page newest first, together every task once.
func TestTaskListsArePaged(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, token := aliceWorld(t, env)
	ws := "/api/workspaces/" + id.workspace + "/tasks"
	for i := range 59 { // and aliceWorld's: 60
		alice.MustJSON("POST", ws, map[string]string{"title": fmt.Sprintf("task %02d", i), "status": "completed"}, 201, nil)
	}
	seen := map[string]bool{}
	last := ""
	for page, before := 0, ""; ; page++ {
		var l taskList
		alice.MustJSON("GET", ws+"?limit=25&before="+before, nil, 200, &l)
		for _, t2 := range l.Tasks {
			if seen[t2.ID] || (last != "" && t2.ID >= last) {
				t.Fatalf("page %d: task %s again or out of order", page, t2.ID)
			}
			seen[t2.ID], last = true, t2.ID
		}
		if l.Next == "" {
			if page != 2 || len(l.Tasks) != 10 {
				t.Fatalf("last page %d has %d tasks", page, len(l.Tasks))
			}
			break
		}
		before = l.Next
	}
	if len(seen) != 60 {
		t.Fatalf("the pages hold %d tasks, want 60", len(seen))
	}
	alice.MustJSON("GET", ws+"?before=not-an-id", nil, 400, nil)
	alice.MustJSON("GET", ws+"?limit=501", nil, 400, nil)

	cs := env.MCP(t, token, nil)
	var first, second struct {
		Tasks []struct{ TaskID string }
		Next  string
	}
	servertest.Structured(t, servertest.CallTool(t, cs, "listTasks", map[string]any{}), &first)
	servertest.Structured(t, servertest.CallTool(t, cs, "listTasks", map[string]any{"before": first.Next}), &second)
	if len(first.Tasks) != 50 || first.Next == "" || len(second.Tasks) != 10 || second.Next != "" {
		t.Fatalf("listTasks pages: %d (next %q), then %d (next %q)", len(first.Tasks), first.Next, len(second.Tasks), second.Next)
	}
	if res := servertest.CallTool(t, cs, "listTasks", map[string]any{"before": "x"}); !res.IsError || !strings.Contains(servertest.ResultText(res), "call listTasks without it") {
		t.Fatalf("listTasks with a bad cursor: %v %s", res.IsError, servertest.ResultText(res))
	}

	b := newBrowser(t, env, alice)
	p := b.get("/workspaces/" + id.workspace)
	p.want(t, 200, "task 58", `id="tasks-older"`)
	older := regexpFind(t, p.body, `id="tasks-older" href="([^"]+)"`)
	if strings.Count(p.body, `class="item-title" id="task-`) != 50 || strings.Contains(p.body, "Ship it") {
		t.Fatal("the workspace page does not show the newest 50 tasks")
	}
	o := b.get(strings.ReplaceAll(older, "&amp;", "&"))
	o.want(t, 200, "Ship it", "task 00", `id="tasks-newest"`)
	if strings.Contains(o.body, `id="tasks-older"`) || strings.Count(o.body, `class="item-title" id="task-`) != 10 {
		t.Fatal("the older page of tasks is not the last 10")
	}
}
