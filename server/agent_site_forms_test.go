package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestASiteInAnotherSpellingOfItsOriginIsFound: agents write a site the way people do — without
// its scheme, in upper case, with the scheme's default port, with a query or a fragment. Each of
// these names exactly one shared origin, so the tool is found there; a spelling that names another
// origin (another scheme, port or host, credentials pointing elsewhere) is still refused, and a
// site without its scheme that two shared origins could be is refused naming both.
func TestASiteInAnotherSpellingOfItsOriginIsFound(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	def := func(site string) (string, bool) {
		res := servertest.CallTool(t, w.agent, "getSiteToolDefinition", map[string]any{"site": site, "tool": "search"})
		if res.IsError {
			return servertest.ResultText(res), false
		}
		var d struct{ Site string }
		servertest.Structured(t, res, &d)
		return d.Site, true
	}
	for _, site := range []string{"shop.example", "shop.example/", "SHOP.example", "HTTPS://Shop.Example", "https://shop.example:443",
		"https://shop.example:443/cart", "https://shop.example?q=tea", "https://shop.example#top", " https://shop.example/ ",
		"https://shop.example./cart"} { // read as a shared origin is (sitetools.NormalizeOrigin)
		if got, ok := def(site); !ok || got != shop {
			t.Errorf("%q: %v %s", site, ok, got)
		}
	}
	for _, site := range []string{"http://shop.example", "https://shop.example:8443", "shop.example:8443", "https://www.shop.example",
		"https://shop.example.evil.example", "https://shop.example@evil.example", "https://evil.example/https://shop.example", "evil.example/shop.example"} {
		if got, ok := def(site); ok || !containsAll(got, "not shared with this workspace", shop) {
			t.Errorf("%q: %v %s", site, ok, got)
		}
	}
	// A call made with such a spelling runs on the shared origin, as the page and the audit log say.
	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": "Shop.Example", "tool": "search", "arguments": map[string]any{"q": "tea"}})
	defer cancel()
	m, err := w.br.Expect("call", testutil.WaitShort)
	if err != nil || m.Site != shop {
		t.Fatalf("call: %+v %v", m, err)
	}
	w.br.Dispatched(m.ID, "d1")
	w.br.Result(m.ID, "3 teas")
	if res := awaitCall(t, ch); res.IsError {
		t.Fatalf("call: %s", servertest.ResultText(res))
	}
	// With both schemes shared, a site without one could be either.
	w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": "http://shop.example", "workspaceId": w.ws}, 201, nil)
	if got, ok := def("shop.example"); ok || !containsAll(got, "http://shop.example", shop, "scheme") {
		t.Errorf("ambiguous: %v %s", ok, got)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestArgumentsSentAsAStringHoldingAnObjectAreThatObject: models often send "arguments" as a
// JSON string whose text is the object ("{\"q\":\"tea\"}"). That text can mean nothing else, so
// it is taken as the arguments: checked against the schema, shown and sent to the page as the
// object itself. A string holding anything else is still refused, saying to send an object.
func TestArgumentsSentAsAStringHoldingAnObjectAreThatObject(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": ` {"q":"tea","limit":2} `})
	defer cancel()
	m, err := w.br.Expect("call", testutil.WaitShort)
	if err != nil || string(m.Arguments) != `{"q":"tea","limit":2}` {
		t.Fatalf("call: %+v %v", m, err)
	}
	w.br.Dispatched(m.ID, "d1")
	w.br.Result(m.ID, "2 teas")
	if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "2 teas" {
		t.Fatalf("result: %s", servertest.ResultText(res))
	}
	// The object inside is checked like any other.
	wantError(t, servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": `{"limit":0}`}),
		`missing required property "q"`, "arguments.limit")
	for _, args := range []string{`tea`, `[{"q":"tea"}]`, `{"q":"tea"`} {
		wantError(t, servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": args}),
			`"arguments" must be a JSON object`)
	}
	// Decoding a string with half a surrogate pair would change it: refused, not guessed at.
	body := rawCall(t, w, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"callSiteTool","arguments":`+
		`{"site":"`+shop+`","tool":"search","arguments":"{\"q\":\"\ud800\"}"}}}`)
	if text, isErr := resultOf(t, body); !isErr || !strings.Contains(text, `"arguments" must be a JSON object`) {
		t.Fatalf("surrogate: %v %s", isErr, text)
	}
}

// TestATaskOfAnotherWorkspaceIsNeverTheCallsTask: an agent that passes the taskId of another
// workspace's task (or one that does not exist) is told so even for a read-only call, which
// otherwise would run and be filed under that task on the person's task page; and the refused
// call is not filed there either.
func TestATaskOfAnotherWorkspaceIsNeverTheCallsTask(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	other := w.person.Workspace("Other")
	var ot struct {
		Task struct{ ID string } `json:"task"`
	}
	w.person.MustJSON("POST", "/api/workspaces/"+other+"/tasks", map[string]string{"title": "x"}, 201, &ot)
	for _, task := range []string{ot.Task.ID, "no-such-task"} {
		wantError(t, servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "taskId": task, "arguments": map[string]any{"q": "tea"}}),
			"not a task of this workspace", "listTasks")
		wantError(t, servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "buy", "taskId": task, "arguments": map[string]any{"item": "tea"}}),
			"not a task of this workspace", "listTasks")
	}
	var audit struct {
		Entries []struct{ Tool, Outcome, TaskID string } `json:"entries"`
	}
	w.person.MustJSON("GET", "/api/audit?task="+ot.Task.ID, nil, 200, &audit)
	if len(audit.Entries) != 0 {
		t.Fatalf("calls filed under another workspace's task: %+v", audit.Entries)
	}
	w.person.MustJSON("GET", "/api/audit?outcome=refused", nil, 200, &audit)
	if len(audit.Entries) != 4 {
		t.Fatalf("refused calls: %+v", audit.Entries)
	}
}

// TestAnInputThatDoesNotFitSaysWhatToSend: the SDK's own schema check of the other tools'
// input answers in its own terms ("validating root: unexpected additional properties"); the agent
// reads what was wrong and the input that tool takes.
func TestAnInputThatDoesNotFitSaysWhatToSend(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	for _, c := range []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"getSiteToolDefinition", map[string]any{"site": shop, "name": "search"}, []string{`["name"]`, `Send {"site": "<origin from listSiteTools>", "tool": "<tool name from listSiteTools>"}`}},
		{"getSiteToolDefinition", map[string]any{"site": shop}, []string{`["tool"]`, `Send {"site": `}},
		{"getSiteToolDefinition", map[string]any{"site": shop, "tool": 3}, []string{`"integer"`, `Send {"site": `}},
		{"listSiteTools", map[string]any{"site": shop}, []string{`["site"]`, "takes no input"}},
		{"createTask", map[string]any{"name": "Buy tea"}, []string{`Send {"title": `}},
		{"updateTask", map[string]any{"taskId": w.task, "status": 1}, []string{`Send {"taskId": `, "ongoing"}},
		{"listTasks", map[string]any{"limit": 5}, []string{`["limit"]`, `"before"`}},
	} {
		res := servertest.CallTool(t, w.agent, c.tool, c.args)
		if text := servertest.ResultText(res); !res.IsError || !containsAll(text, append(c.want, c.tool+"'s input does not fit", "nothing was done")...) {
			t.Errorf("%s %v: %v %s", c.tool, c.args, res.IsError, text)
		}
	}
}

// TestAFieldCallSiteToolDoesNotTakeIsNamed: agents often name callSiteTool's fields as other
// tools do ("args", "name", "task_id"). The answer names the field it does not take and the one
// that was meant, not a Go decoder's message.
func TestAFieldCallSiteToolDoesNotTakeIsNamed(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	for field, want := range map[string]string{"args": `"arguments"`, "input": `"arguments"`, "name": `"tool"`, "task_id": `"taskId"`, "url": `"site"`, "extra": `Send {"site": `} {
		args := map[string]any{"site": shop, "tool": "search", field: "x"}
		if field == "name" {
			delete(args, "tool")
		}
		res := servertest.CallTool(t, w.agent, "callSiteTool", args)
		if text := servertest.ResultText(res); !res.IsError || strings.Contains(text, "json:") || !containsAll(text, `callSiteTool takes no field "`+field+`"`, want) {
			t.Errorf("%s: %s", field, text)
		}
	}
}

// TestAToolOfAnotherSharedSiteIsPointedTo: an agent that names the wrong one of its shared sites
// for a tool is told which shared site has it; one that writes the tool's name in another case
// is told the name it has.
func TestAToolOfAnotherSharedSiteIsPointedTo(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	const docs = "https://docs.example"
	w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": docs, "workspaceId": w.ws}, 201, nil)
	m, err := w.br.Announce(bridgetest.Doc{ID: "e1", Origin: docs, URL: docs + "/e1", TabID: 8, LastUsed: time.Now(), Tools: `[
 {"name":"publish","description":"Publish a page","inputSchema":{"type":"object"}},
 {"name":"read","description":"Read a page","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object"}}]`}, testutil.WaitShort)
	if err != nil || m.Type != "tools.accepted" {
		t.Fatalf("announce: %+v %v", m, err)
	}
	for _, name := range []string{"getSiteToolDefinition", "callSiteTool"} {
		wantError(t, servertest.CallTool(t, w.agent, name, map[string]any{"site": shop, "tool": "publish"}),
			`has no tool named "publish"`, "buy, search", `"publish" is a tool of `+docs)
		wantError(t, servertest.CallTool(t, w.agent, name, map[string]any{"site": shop, "tool": "Search"}),
			`has no tool named "Search"`, `names are case-sensitive: did you mean "search"?`)
	}
}
