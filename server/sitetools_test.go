package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gorm.io/gorm"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

const shop = "https://shop.example"

const shopTools = `[
 {"name":"search","title":"Search","description":"Search the catalogue","annotations":{"readOnlyHint":true},
  "inputSchema":{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["q"]}},
 {"name":"buy","description":"Buy an item","inputSchema":{"type":"object","properties":{"item":{"type":"string"},"qty":{"type":"integer","minimum":1}},"required":["item"]}}
]`

// siteWorld is a person with a shared site open in one test browser, and an
// agent connected over MCP to the site's workspace.
type siteWorld struct {
	env    *servertest.Env
	person *servertest.Client
	ws     string
	token  string
	agent  *mcp.ClientSession
	br     *bridgetest.Browser
	task   string
}

func newSiteWorld(t testing.TB, k storetest.Kind, tweak func(*server.Options), mcpOpts *servertest.MCPOptions) *siteWorld {
	t.Helper()
	env := servertest.Start(t, k, tweak)
	w := &siteWorld{env: env, person: env.Person(t, "alice@example.com")}
	w.ws = w.person.Workspace("Shopping")
	w.token = w.person.AgentToken(w.ws, "laptop")
	w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": shop, "workspaceId": w.ws}, 201, nil)
	var task struct {
		Task struct{ ID string } `json:"task"`
	}
	w.person.MustJSON("POST", "/api/workspaces/"+w.ws+"/tasks", map[string]string{"title": "Buy tea"}, 201, &task)
	w.task = task.Task.ID
	w.br, _ = extBrowser(t, env, w.person, "browser-one")
	w.agent = env.MCP(t, w.token, mcpOpts)
	return w
}

func (w *siteWorld) announce(t testing.TB, doc string, used time.Time) {
	t.Helper()
	w.announceAt(t, doc, used, shopTools)
}

// announceTools announces doc with tools, a JSON array of two tools.
func (w *siteWorld) announceTools(t testing.TB, doc, tools string) {
	t.Helper()
	w.announceAt(t, doc, time.Now(), tools)
}

func (w *siteWorld) announceAt(t testing.TB, doc string, used time.Time, tools string) {
	t.Helper()
	m, err := w.br.Announce(bridgetest.Doc{ID: doc, Origin: shop, URL: shop + "/" + doc, Title: "Shop " + doc, TabID: 7, LastUsed: used, Tools: tools}, testutil.WaitShort)
	if err != nil || m.Type != "tools.accepted" || len(m.Accepted) != 2 {
		t.Fatalf("announce %s: %+v %v", doc, m, err)
	}
}

type callOut struct {
	res *mcp.CallToolResult
	err error
}

// callAsync calls an MCP tool without waiting; cancel stops it.
func callAsync(cs *mcp.ClientSession, name string, args any) (chan callOut, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	out := make(chan callOut, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		out <- callOut{res, err}
	}()
	return out, cancel
}

func awaitCall(t *testing.T, ch chan callOut) *mcp.CallToolResult {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("call failed at the protocol level: %v", o.err)
		}
		return o.res
	case <-time.After(30 * time.Second):
		t.Fatal("call did not return")
	}
	return nil
}

func wantError(t *testing.T, res *mcp.CallToolResult, parts ...string) {
	t.Helper()
	text := servertest.ResultText(res)
	if !res.IsError {
		t.Fatalf("want an error result, got %q", text)
	}
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Fatalf("error %q does not mention %q", text, p)
		}
	}
}

func TestListAndDescribeSiteTools(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		w.announce(t, "d1", time.Now())
		res := servertest.CallTool(t, w.agent, "listSiteTools", map[string]any{})
		var list struct {
			Sites []struct {
				Site     string
				Online   bool
				OpenTabs int
				LastURL  string
				Tools    []struct {
					Name, Description string
					ReadOnly          bool
				}
			}
		}
		servertest.Structured(t, res, &list)
		if len(list.Sites) != 1 || list.Sites[0].Site != shop || !list.Sites[0].Online || list.Sites[0].OpenTabs != 1 || list.Sites[0].LastURL != shop+"/d1" {
			t.Fatalf("listing: %+v", list.Sites)
		}
		if ts := list.Sites[0].Tools; len(ts) != 2 || ts[0].Name != "buy" || ts[0].ReadOnly || ts[1].Name != "search" || !ts[1].ReadOnly {
			t.Fatalf("tools: %+v", ts)
		}
		if strings.Contains(servertest.ResultText(res), "inputSchema") {
			t.Fatal("listing carries schemas")
		}
		res = servertest.CallTool(t, w.agent, "getSiteToolDefinition", map[string]any{"site": shop, "tool": "search"})
		var def struct {
			InputSchema map[string]any
			Annotations struct{ ReadOnlyHint bool }
		}
		servertest.Structured(t, res, &def)
		if def.InputSchema["required"] == nil || !def.Annotations.ReadOnlyHint {
			t.Fatalf("definition: %+v", def)
		}
		// The browser leaves: the site still lists its tools, offline.
		w.br.Conn.Close()
		testutil.Eventually(t, testutil.WaitShort, func() bool {
			res := servertest.CallTool(t, w.agent, "listSiteTools", map[string]any{})
			servertest.Structured(t, res, &list)
			return !list.Sites[0].Online
		}, "the condition never held")
		if len(list.Sites[0].Tools) != 2 || list.Sites[0].OpenTabs != 0 {
			t.Fatalf("offline listing: %+v", list.Sites[0])
		}
		res = servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
		wantError(t, res, "Chrome is not connected", "Ask them to open Chrome")
	})
}

func TestReadOnlyCallRunsInTheMostRecentlyUsedTab(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		now := time.Now()
		w.announce(t, "d1", now.Add(-time.Minute))
		w.announce(t, "d2", now)
		call := func(wantDoc string) {
			t.Helper()
			ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
			defer cancel()
			m, err := w.br.Expect("call", testutil.WaitShort)
			if err != nil {
				t.Fatal(err)
			}
			if m.DocumentID != wantDoc || m.Tool != "search" || m.Site != shop || string(m.Arguments) != `{"q":"tea"}` || m.URL != shop+"/d2" && m.URL != shop+"/d1" {
				t.Fatalf("call message: %s", m.Raw)
			}
			w.br.Dispatched(m.ID, wantDoc)
			w.br.Result(m.ID, map[string]any{"content": []map[string]string{{"type": "text", "text": "3 teas from " + wantDoc}}})
			res := awaitCall(t, ch)
			if res.IsError || servertest.ResultText(res) != "3 teas from "+wantDoc {
				t.Fatalf("result: %v %q", res.IsError, servertest.ResultText(res))
			}
		}
		call("d2")
		if err := w.br.Used("d1", now.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		// The server handles a socket's frames in order: the pong means it has
		// taken document.used before the next call is routed.
		if _, err := w.br.Ping("p1", testutil.WaitShort); err != nil {
			t.Fatal(err)
		}
		call("d1")
		// The audit log has both calls, decided as read-only.
		var audit struct {
			Entries []struct{ Tool, Decision, Outcome, Site string } `json:"entries"`
		}
		w.person.MustJSON("GET", "/api/audit?tool=search", nil, 200, &audit)
		if len(audit.Entries) != 2 || audit.Entries[0].Decision != "read-only" || audit.Entries[0].Outcome != "ok" {
			t.Fatalf("audit: %+v", audit.Entries)
		}
	})
}

func TestCallErrorsAreWrittenForTheAgent(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, func(o *server.Options) { o.CallTimeout = 1500 * time.Millisecond }, nil) // long enough for each step below on a loaded machine
	w.announce(t, "d1", time.Now())
	call := func(args map[string]any) *mcp.CallToolResult {
		return servertest.CallTool(t, w.agent, "callSiteTool", args)
	}
	wantError(t, call(map[string]any{"site": "https://other.example", "tool": "search"}), "not shared with this workspace", shop)
	wantError(t, call(map[string]any{"site": shop, "tool": "delete"}), `no tool named "delete"`, "buy, search")
	wantError(t, call(map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": 3, "limit": 0}}),
		"arguments.q", "arguments.limit", "getSiteToolDefinition")
	wantError(t, call(map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{}}), `missing required property "q"`)
	wantError(t, call(map[string]any{"site": shop, "tool": "buy", "arguments": map[string]any{"item": "tea"}}), "approves it inside a task", "taskId", "createTask")
	other := w.person.Workspace("Other")
	var ot struct {
		Task struct{ ID string } `json:"task"`
	}
	w.person.MustJSON("POST", "/api/workspaces/"+other+"/tasks", map[string]string{"title": "x"}, 201, &ot)
	wantError(t, call(map[string]any{"site": shop, "tool": "buy", "taskId": ot.Task.ID, "arguments": map[string]any{"item": "tea"}}), "not a task of this workspace")

	search := map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}}
	// The page goes away mid-call.
	ch, cancel := callAsync(w.agent, "callSiteTool", search)
	m, _ := w.br.Expect("call", testutil.WaitShort)
	w.br.Dispatched(m.ID, "d1")
	w.br.Gone("d1")
	wantError(t, awaitCall(t, ch), "went away")
	cancel()
	w.announce(t, "d1", time.Now())
	// The result is too large.
	ch, cancel = callAsync(w.agent, "callSiteTool", search)
	m, _ = w.br.Expect("call", testutil.WaitShort)
	w.br.Result(m.ID, strings.Repeat("x", 300<<10))
	wantError(t, awaitCall(t, ch), "returned 307200 bytes", "262144")
	cancel()
	// The page's own error, in its own words.
	ch, cancel = callAsync(w.agent, "callSiteTool", search)
	m, _ = w.br.Expect("call", testutil.WaitShort)
	w.br.Fail(m.ID, "tool_error", "Out of stock")
	wantError(t, awaitCall(t, ch), "failed in the page: Out of stock")
	cancel()
	// Over the deadline: the browser is told to cancel, the agent is told why.
	ch, cancel = callAsync(w.agent, "callSiteTool", search)
	m, _ = w.br.Expect("call", testutil.WaitShort)
	c, err := w.br.Expect("call.cancel", testutil.WaitShort)
	if err != nil || c.CallID != m.ID || c.Reason != "timeout" {
		t.Fatalf("cancel on timeout: %+v %v", c, err)
	}
	wantError(t, awaitCall(t, ch), "did not finish within 1.5s")
	cancel()
	// A late answer to a call that is gone is refused, not ignored.
	w.br.Result(m.ID, "late")
	if e, err := w.br.Expect("error", testutil.WaitShort); err != nil || e.Code != "unknown_call" {
		t.Fatalf("late result: %+v %v", e, err)
	}
	// The browser disconnects mid-call.
	ch, cancel = callAsync(w.agent, "callSiteTool", search)
	defer cancel()
	w.br.Expect("call", testutil.WaitShort)
	w.br.Conn.Close()
	wantError(t, awaitCall(t, ch), "disconnected")
}

func TestCancelReachesTheBrowser(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "slow"}})
	m, err := w.br.Expect("call", testutil.WaitShort)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	c, err := w.br.Expect("call.cancel", testutil.WaitShort)
	if err != nil || c.CallID != m.ID || c.Reason != "cancelled" {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	<-ch
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		var audit struct {
			Entries []struct{ Outcome string } `json:"entries"`
		}
		w.person.MustJSON("GET", "/api/audit", nil, 200, &audit)
		return len(audit.Entries) == 1 && audit.Entries[0].Outcome == "cancelled"
	}, "the condition never held")
}

func TestAnnouncementsOnlyForSharedSites(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	m, err := w.br.Announce(bridgetest.Doc{ID: "x1", Origin: "https://bank.example", URL: "https://bank.example/", Tools: shopTools}, testutil.WaitShort)
	if err != nil || m.Type != "error" || m.Code != "site_not_shared" {
		t.Fatalf("unshared announce: %+v %v", m, err)
	}
	// A page that lies: a bad tool among good ones is refused with its reason.
	m, err = w.br.Announce(bridgetest.Doc{ID: "d9", Origin: shop, URL: shop + "/", Tools: `[{"name":"ok","description":"fine"},{"name":"bad name!","description":"x"}]`}, testutil.WaitShort)
	if err != nil || m.Type != "tools.accepted" || len(m.Accepted) != 1 || len(m.Refused) != 1 || m.Refused[0].Reason == "" {
		t.Fatalf("mixed announce: %+v %v", m, err)
	}
	var raw json.RawMessage
	w.person.MustJSON("GET", "/api/sites", nil, 200, &raw)
	if !strings.Contains(string(raw), `"name":"ok"`) {
		t.Fatalf("sites do not show the tool: %s", raw)
	}
}

func TestTooManyToolsForOneSiteAreRefusedWithTheReason(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	page := func(prefix string, n int) string {
		var ds []string
		for i := 0; i < n; i++ {
			ds = append(ds, fmt.Sprintf(`{"name":"%s%d","description":"d"}`, prefix, i))
		}
		return "[" + strings.Join(ds, ",") + "]"
	}
	if m, err := w.br.Announce(bridgetest.Doc{ID: "p1", Origin: shop, URL: shop + "/", Tools: page("a", 100)}, testutil.WaitShort); err != nil || len(m.Accepted) != 100 {
		t.Fatalf("first page: %v", err)
	}
	m, err := w.br.Announce(bridgetest.Doc{ID: "p2", Origin: shop, URL: shop + "/2", Tools: page("b", 50)}, testutil.WaitShort)
	if err != nil || m.Type != "error" || !strings.Contains(m.Message, "limit is 128 per site") {
		t.Fatalf("second page over the limit: %+v %v", m, err)
	}
}

// TestArgumentsReachThePageExactly: the agent's argument text reaches the
// page unchanged — numbers are not re-encoded (a number a browser would read
// as another value is refused: attack_numbers_test.go) — and a malformed
// callSiteTool input gets an answer the agent can act on.
func TestArgumentsReachThePageExactly(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	for _, args := range []string{`{"q":"tea","limit":12345678901234567000}`, `{"q":"tea","limit":1e300}`} { // 1e400 is refused (attack_args_test.go)
		ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": json.RawMessage(args)})
		m, err := w.br.Expect("call", testutil.WaitShort)
		if err != nil {
			t.Fatal(err)
		}
		if got := compactJSON(t, m.Arguments); got != args {
			t.Fatalf("the page got %s, the agent sent %s", got, args)
		}
		w.br.Dispatched(m.ID, "d1")
		w.br.Result(m.ID, "ok")
		if res := awaitCall(t, ch); res.IsError {
			t.Fatal(servertest.ResultText(res))
		}
		cancel()
	}
	call := func(in map[string]any) *mcp.CallToolResult {
		return servertest.CallTool(t, w.agent, "callSiteTool", in)
	}
	wantError(t, call(map[string]any{"site": shop, "tool": "search", "arguments": []int{1}}), `"arguments" must be a JSON object`, "getSiteToolDefinition")
	wantError(t, call(map[string]any{"site": 5, "tool": "search"}), `"site" must be a string`, "listSiteTools")
	wantError(t, call(map[string]any{"site": shop}), `needs both "site" and "tool"`)
	wantError(t, call(map[string]any{"site": shop, "tool": "search", "task": "x"}), `callSiteTool takes no field "task"`, `send "taskId" instead`)
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A finished task asks nothing more: rejecting it withdraws what waits in
// it, and a later write in it (or in a completed one) is refused at once,
// each with what the agent should do; read-only calls need no task and run.
func TestFinishedTasksAskNothingMore(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		w.announce(t, "d1", time.Now())
		var me struct {
			User struct{ ID string } `json:"user"`
		}
		w.person.MustJSON("GET", "/api/auth/me", nil, 200, &me)
		pending := func() int {
			reqs, err := w.env.Server.ApprovalGate().Pending(context.Background(), me.User.ID, w.task)
			if err != nil {
				t.Fatal(err)
			}
			return len(reqs)
		}
		events := openStream(t, w.env, w.person, nil)
		buy := map[string]any{"site": shop, "tool": "buy", "taskId": w.task, "arguments": map[string]any{"item": "tea"}}
		ch, cancel := callAsync(w.agent, "callSiteTool", buy)
		defer cancel()
		eventOf(t, events, "approval.created")
		w.person.MustJSON("PATCH", "/api/tasks/"+w.task, map[string]string{"status": "rejected"}, 200, nil)
		wantError(t, awaitCall(t, ch), "was not run: its task was set to completed or rejected while the call waited")
		eventOf(t, events, "approval.withdrawn")
		if n := pending(); n != 0 {
			t.Fatalf("%d requests still wait in the rejected task", n)
		}
		wantError(t, servertest.CallTool(t, w.agent, "callSiteTool", buy), "its task is rejected", "ask the person what they want")
		// and the agent cannot undo the person's rejection
		wantError(t, servertest.CallTool(t, w.agent, "updateTask", map[string]any{"taskId": w.task, "status": "ongoing"}), "only the person can reopen it")
		w.person.MustJSON("PATCH", "/api/tasks/"+w.task, map[string]string{"status": "completed"}, 200, nil)
		wantError(t, servertest.CallTool(t, w.agent, "callSiteTool", buy), "its task is completed", "set the task back to ongoing with updateTask")
		if n := pending(); n != 0 {
			t.Fatalf("a call in a finished task opened %d requests", n)
		}
		// Reading needs no task, finished or not.
		ch, cancel2 := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "taskId": w.task, "arguments": map[string]any{"q": "tea"}})
		defer cancel2()
		m, err := w.br.Expect("call", testutil.WaitShort)
		if err != nil {
			t.Fatal(err)
		}
		w.br.Result(m.ID, `{"items":["green tea"]}`)
		if res := awaitCall(t, ch); res.IsError {
			t.Fatalf("a read-only call in a finished task: %s", servertest.ResultText(res))
		}
	})
}

// TestACallWhoseWorkspaceWentIsToldSo: the person deletes the workspace while an agent's write is
// being placed (after its task was found, before its request opened). The agent reads what
// happened and what to do, not a store error.
func TestACallWhoseWorkspaceWentIsToldSo(t *testing.T) {
	// The hook goes on the test's own database before the server uses it (gorm's callbacks may not
	// change under running queries) and stays: it acts once, when armed.
	var armed atomic.Bool
	var w *siteWorld
	w = newSiteWorld(t, storetest.SQLite, func(o *server.Options) {
		if err := o.DB.Callback().Query().Before("gorm:query").Register("test:delete_workspace", func(tx *gorm.DB) {
			if tx.Statement.Table == "grants" && armed.CompareAndSwap(true, false) {
				w.person.MustJSON("DELETE", "/api/workspaces/"+w.ws, nil, 204, nil)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}, retrying) // the deletion also closes the agent's session (revoke.go), once the call answered
	w.announce(t, "d1", time.Now())
	armed.Store(true)
	res := servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "buy", "taskId": w.task, "arguments": map[string]any{"item": "tea"}})
	// Told by the gate (the workspace went while the call was placed) or by the revocation that
	// follows the deletion, whichever ends the call first.
	wantError(t, res, "deleted the workspace")
}
