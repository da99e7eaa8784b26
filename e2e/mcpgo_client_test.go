package e2e

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestMCPGoClient drives /mcp with mark3labs/mcp-go's client, the other
// Go MCP library agents are built on, as such an agent would: it
// negotiates the newest protocol it knows, lists the tools and the site,
// reads a definition, runs a read in a (Go test) browser and reads an
// error written for it.
func TestMCPGoClient(t *testing.T) {
	w := newTSClientWorld(t, "mcp-go-browser",
		`[{"name":"search","description":"Search","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}]`,
		"results for ")
	c, err := mcpgo.NewStreamableHttpClient(w.env.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + w.token}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "mcp-go-agent", Version: "1.0.0"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	t.Logf("mcp-go negotiated %s with %s %s", res.ProtocolVersion, res.ServerInfo.Name, res.ServerInfo.Version)

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "callSiteTool,createTask,getSiteToolDefinition,listSiteTools,listTasks,updateTask" {
		t.Errorf("tools %v", names)
	}
	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = args
		r, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var text string
		for _, ct := range r.Content {
			text += mcp.GetTextFromContent(ct)
		}
		return text, r.IsError
	}
	if text, isErr := call("listSiteTools", map[string]any{}); isErr || !strings.Contains(text, tsSite) || !strings.Contains(text, `"search"`) {
		t.Errorf("listSiteTools: %v %s", isErr, text)
	}
	if text, isErr := call("getSiteToolDefinition", map[string]any{"site": tsSite, "tool": "search"}); isErr || !strings.Contains(text, `"required":["q"]`) {
		t.Errorf("getSiteToolDefinition: %v %s", isErr, text)
	}
	if text, isErr := call("callSiteTool", map[string]any{"site": tsSite, "tool": "search", "arguments": map[string]any{"q": "tea"}}); isErr || text != `results for {"q":"tea"}` {
		t.Errorf("callSiteTool: %v %q", isErr, text)
	}
	if text, isErr := call("callSiteTool", map[string]any{"site": tsSite, "tool": "serach", "arguments": map[string]any{}}); !isErr || !strings.Contains(text, "no tool named") {
		t.Errorf("a wrong tool name: %v %q", isErr, text)
	}
	if err := c.Ping(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}
	if n := w.calls.Load(); n != 1 {
		t.Errorf("the browser ran %d calls, want 1", n)
	}
}

// TestMCPGoClientWaitsForThePerson: mcp-go's client through a write the
// person answers — it waits, hears progress meanwhile, gets the page's
// result once allowed — and one it gives up on: over HTTP it cancels by
// closing the request's stream (it sends no notifications/cancelled), and
// the person's card is withdrawn once the grace has passed.
func TestMCPGoClientWaitsForThePerson(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.ApprovalGrace = 500 * time.Millisecond })
	owner := env.Person(t, "alice@example.com")
	agent := newAgentCaller(t, env, owner, "Shop", "Buy tea", "https://shop.example", "order")
	c, err := mcpgo.NewStreamableHttpClient(env.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + owner.AgentToken(agent.ws, "mcp-go agent")}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var progress atomic.Int32
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			progress.Add(1)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "mcp-go-agent", Version: "1.0.0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	order := func(ctx context.Context) (*mcp.CallToolResult, error) {
		req := mcp.CallToolRequest{}
		req.Params.Name = "callSiteTool"
		req.Params.Arguments = map[string]any{"site": "https://shop.example", "tool": "order", "taskId": agent.task, "arguments": map[string]any{"item": "tea"}}
		req.Params.Meta = &mcp.Meta{ProgressToken: "order-1"}
		return c.CallTool(ctx, req)
	}
	pending := func() []string {
		var out struct {
			Approvals []struct{ ID string } `json:"approvals"`
		}
		owner.MustJSON("GET", "/api/approvals", nil, 200, &out)
		var ids []string
		for _, a := range out.Approvals {
			ids = append(ids, a.ID)
		}
		return ids
	}

	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	got := make(chan outcome, 1)
	go func() { r, err := order(ctx); got <- outcome{r, err} }()
	testutil.Eventually(t, testutil.WaitMedium, func() bool { return len(pending()) == 1 }, "the write waits for the person")
	testutil.Eventually(t, testutil.WaitMedium, func() bool { return progress.Load() > 0 }, "the waiting call hears progress")
	owner.MustJSON("POST", "/api/approvals/"+pending()[0]+"/answer", map[string]string{"answer": "once"}, 200, nil)
	o := testutil.RequireReceive(t, testutil.WaitMedium, got)
	if o.err != nil || o.res.IsError || len(o.res.Content) != 1 || mcp.GetTextFromContent(o.res.Content[0]) != "done: order" {
		t.Fatalf("the allowed write returned %+v %v", o.res, o.err)
	}

	gaveUp, stop := context.WithCancel(ctx)
	go func() { r, err := order(gaveUp); got <- outcome{r, err} }()
	testutil.Eventually(t, testutil.WaitMedium, func() bool { return len(pending()) == 1 }, "the second write waits for the person")
	stop()
	if o := testutil.RequireReceive(t, testutil.WaitMedium, got); o.err == nil {
		t.Fatalf("a cancelled call returned %+v", o.res)
	}
	testutil.Eventually(t, testutil.WaitMedium, func() bool { return len(pending()) == 0 }, "the card of the call mcp-go gave up on is withdrawn")
}
