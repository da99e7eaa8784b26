package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

func TestMCPTasksThroughARealClient(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		alice, id, token := aliceWorld(t, env)
		cs := env.MCP(t, token, nil)

		res := servertest.CallTool(t, cs, "createTask", map[string]any{"title": "Update the docs"})
		if res.IsError {
			t.Fatalf("createTask: %s", servertest.ResultText(res))
		}
		var task struct{ TaskID, Title, Status string }
		servertest.Structured(t, res, &task)
		if task.Title != "Update the docs" || task.Status != "notstarted" {
			t.Fatalf("created %+v", task)
		}
		// The person sees the agent's task in the workspace.
		var got struct {
			Task struct{ WorkspaceID, CreatedBy string } `json:"task"`
		}
		alice.MustJSON("GET", "/api/tasks/"+task.TaskID, nil, 200, &got)
		if got.Task.WorkspaceID != id.workspace || !strings.HasPrefix(got.Task.CreatedBy, "agent:") {
			t.Fatalf("task as the person sees it: %+v", got.Task)
		}

		res = servertest.CallTool(t, cs, "updateTask", map[string]any{"taskId": task.TaskID, "status": "ongoing"})
		servertest.Structured(t, res, &task)
		if res.IsError || task.Status != "ongoing" {
			t.Fatalf("updateTask: %s", servertest.ResultText(res))
		}
		res = servertest.CallTool(t, cs, "updateTask", map[string]any{"taskId": task.TaskID, "status": "finished"})
		if !res.IsError || !strings.Contains(servertest.ResultText(res), "notstarted, ongoing, blocked, completed, rejected") {
			t.Fatalf("bad status: %v %s", res.IsError, servertest.ResultText(res))
		}
		// Another workspace's task is not found, and the message says what to do.
		other := alice.Workspace("Other")
		var ot struct {
			Task struct{ ID string } `json:"task"`
		}
		alice.MustJSON("POST", "/api/workspaces/"+other+"/tasks", map[string]string{"title": "secret"}, 201, &ot)
		res = servertest.CallTool(t, cs, "updateTask", map[string]any{"taskId": ot.Task.ID, "status": "completed"})
		if !res.IsError || !strings.Contains(servertest.ResultText(res), "listTasks") {
			t.Fatalf("foreign task: %v %s", res.IsError, servertest.ResultText(res))
		}
		res = servertest.CallTool(t, cs, "listTasks", map[string]any{})
		var list struct{ Tasks []struct{ TaskID string } }
		servertest.Structured(t, res, &list)
		if len(list.Tasks) != 2 { // the agent's task and the one aliceWorld made
			t.Fatalf("listTasks sees %d tasks: %s", len(list.Tasks), servertest.ResultText(res))
		}
		for _, tk := range list.Tasks {
			if tk.TaskID == ot.Task.ID {
				t.Fatal("listTasks shows another workspace's task")
			}
		}
	})
}

func TestMCPRefusesCookiesAndBadTokens(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, token := aliceWorld(t, env)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	if status, body := alice.Do("POST", "/mcp", init); status != 401 || servertest.ErrorCode(body) != "cookie_not_allowed" {
		t.Errorf("cookie on /mcp: %d %s", status, body)
	}
	if status, body := env.Agent(t, "tba_forged").Do("POST", "/mcp", init); status != 401 || servertest.ErrorCode(body) != "agent_token_invalid" {
		t.Errorf("forged token: %d %s", status, body)
	}
	if status, body := env.NewClient(t).Do("POST", "/mcp", init); status != 401 || servertest.ErrorCode(body) != "agent_token_required" {
		t.Errorf("no token: %d %s", status, body)
	}
	// A session opened with one token cannot be driven with another: its id is, to another
	// token, an id that is gone. A DELETE is 404 and ends nothing; the session goes on.
	cs := env.MCP(t, token, nil)
	second := alice.AgentToken(id.workspace, "second")
	thief := env.Agent(t, second)
	req := mustRequest(t, "DELETE", env.URL+"/mcp", "")
	req.Header.Set("Authorization", "Bearer "+second)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := thief.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.TrimSpace(string(body)) != "session not found" {
		t.Errorf("another token's DELETE of the session: %d %q, want 404 session not found", resp.StatusCode, body)
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Errorf("the session after another token's DELETE: %v", err)
	}
}

// TestMCPToolsSayWhatTheyDo: every tool carries a title and annotations that
// say what it does, so a client's own policy treats it as what it is — Codex
// asks before (or, unattended, refuses) any tool whose annotations leave it
// destructive, as the spec's defaults do.
func TestMCPToolsSayWhatTheyDo(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	_, _, token := aliceWorld(t, env)
	cs := env.MCP(t, token, nil)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ readOnly, destructive, idempotent, openWorld bool }
	wants := map[string]want{
		"listSiteTools":         {readOnly: true},
		"getSiteToolDefinition": {readOnly: true},
		"listTasks":             {readOnly: true},
		"createTask":            {},
		"updateTask":            {idempotent: true},
		"callSiteTool":          {destructive: true, openWorld: true},
	}
	for _, tool := range res.Tools {
		w, ok := wants[tool.Name]
		if !ok {
			t.Errorf("tool %s has no expectation here", tool.Name)
			continue
		}
		delete(wants, tool.Name)
		a := tool.Annotations
		if tool.Title == "" || a == nil {
			t.Errorf("%s: title %q, annotations %v", tool.Name, tool.Title, a)
			continue
		}
		got := want{readOnly: a.ReadOnlyHint, idempotent: a.IdempotentHint,
			destructive: a.DestructiveHint == nil || *a.DestructiveHint, openWorld: a.OpenWorldHint == nil || *a.OpenWorldHint}
		if a.ReadOnlyHint {
			got.destructive = false // the spec: destructiveHint means nothing for a read-only tool
		}
		if got != w {
			t.Errorf("%s: annotations read as %+v, want %+v", tool.Name, got, w)
		}
	}
	for name := range wants {
		t.Errorf("tool %s is not listed", name)
	}
}
