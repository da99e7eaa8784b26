package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// postAs posts bytes to /mcp on the agent's open session under the given protocol version
// (batches are the SDK's only before 2025-06-18) and returns the status and body.
func postAs(t *testing.T, w *siteWorld, version, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", w.env.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Mcp-Session-Id", w.agent.ID())
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// rpcAnswer is one JSON-RPC answer read from a JSON body or the first event of a stream.
type rpcAnswer struct {
	ID    json.RawMessage
	Error *struct {
		Code    int
		Message string
	}
	Result json.RawMessage
}

func answerOf(t *testing.T, body string) rpcAnswer {
	t.Helper()
	if i := strings.Index(body, "data: "); i >= 0 {
		body, _, _ = strings.Cut(body[i+len("data: "):], "\n")
	}
	var a rpcAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("not a JSON-RPC answer: %q", body)
	}
	return a
}

// TestRequestIDsAClientCouldNotMatchAreRefused: the SDK reads a numeric id through a float64
// into an int64, so {"id": 1.5} was answered as id 1, 1e3 as 1000 and 2^53+1 as 2^53; a null id
// made a request a notification that no answer ever came for; a bool, object or array id got
// a plain-text 400; a lone surrogate in a string id came back as U+FFFD; two "id" members (or
// "ID" beside "id", which encoding/json's reader in this server matched and the SDK's did not)
// were read differently by the two parsers. Each is refused with a JSON-RPC error saying what
// is wrong and what to send, and ids a client can match come back exactly as sent.
func TestRequestIDsAClientCouldNotMatchAreRefused(t *testing.T) {
	const idCap = server.MaxIDBytes
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	const list = `"method":"tools/call","params":{"name":"listTasks","arguments":{}}`
	for id, want := range map[string]string{
		`1.5`:                                    "fraction or an exponent",
		`1e3`:                                    "fraction or an exponent",
		`-0.0`:                                   "fraction or an exponent",
		`9007199254740993`:                       "integer this large",
		`-9007199254740992`:                      "integer this large",
		`123456789012345678901234`:               "integer this large",
		`null`:                                   "does not allow a null id",
		`true`:                                   "not true",
		`{"a":1}`:                                "not an object",
		`[1]`:                                    "not an array",
		`"tea\ud800"`:                            "half of a UTF-16 surrogate pair",
		"\"tea\xff\"":                            "not UTF-8",
		`"` + strings.Repeat("a", idCap-1) + `"`: "bytes long as JSON",
		`"` + strings.Repeat(`\n`, idCap/2) + `"`: "at most 1024 bytes",
	} {
		st, body := postAs(t, w, "2025-06-18", `{"jsonrpc":"2.0","id":`+id+`,`+list+`}`)
		a := answerOf(t, body)
		if st != 400 || a.Error == nil || a.Error.Code != -32600 || !strings.Contains(a.Error.Message, want) ||
			!strings.Contains(a.Error.Message, "Send a string id, or an integer id") || string(a.ID) != "null" {
			t.Errorf("id %s: %d %s", id, st, body)
		}
	}
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1,"id":2,` + list + `}`:                   `the member "id" more than once`,
		`{"jsonrpc":"2.0","id":3,"ID":"x",` + list + `}`:                 `a member "ID"; JSON-RPC member names are case-sensitive`,
		`{"jsonrpc":"2.0","id":4,"Method":"ping",` + list + `}`:          `a member "Method"`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/list","method":"ping"}`: `the member "method" more than once`,
		`[1,2]`:                           "not a JSON object",
		`{"jsonrpc":"2.0","id":6,` + list: "not valid JSON",
		`{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`: "exceeded max depth",
	} {
		st, out := postAs(t, w, "2025-03-26", body)
		if a := answerOf(t, out); st != 400 || a.Error == nil || !strings.Contains(a.Error.Message, want) {
			t.Errorf("%s: %d %s", body, st, out)
		}
	}
	for _, id := range []string{`7`, `-3`, `0`, `9007199254740991`, `-9007199254740991`, `"call-7"`, `"tea \u00e9"`, `"` + strings.Repeat("a", idCap-2) + `"`} {
		st, body := postAs(t, w, "2025-06-18", `{"jsonrpc":"2.0","id":`+id+`,`+list+`}`)
		a := answerOf(t, body)
		want := id
		if id == `"tea \u00e9"` {
			want = `"tea é"`
		}
		if st != 200 || a.Error != nil || string(a.ID) != want {
			t.Errorf("id %s: answered %d with id %s: %s", id, st, a.ID, body)
		}
	}
	if res := servertest.CallTool(t, w.agent, "listTasks", map[string]any{}); res.IsError {
		t.Fatalf("the session broke: %s", servertest.ResultText(res))
	}
}

// TestIDsInsideParamsAClientMatchesAreRefused: a cancel's requestId and a progress token are ids
// too. notifications/cancelled with requestId 1.5 cancelled call 1 (the SDK's float-to-int
// reading); a progress token of 2^53+1 came back on progress notifications as 2^53; two calls
// with one id in one batch were one entry in the SDK's table of calls, so one answer was lost.
func TestIDsInsideParamsAClientMatchesAreRefused(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.5,"reason":"x"}}`:                                              "cancels the request 1.5",
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"requestId":3}}`:                                               `params has the member "requestId" more than once`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"listTasks","arguments":{},"_meta":{"progressToken":9007199254740993}}}`:    "progress token 9007199254740993",
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"listTasks","arguments":{},"_meta":{"progressToken":1,"progressToken":2}}}`: `params._meta has the member "progressToken" more than once`,
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"createTask","name":"listTasks","arguments":{}}}`:                          `params has the member "name" more than once`,
		`[{"jsonrpc":"2.0","id":11,"method":"ping"},{"jsonrpc":"2.0","id":11,"method":"tools/list"}]`:                                               "the id 11 of an earlier request in the batch",
	} {
		st, out := postAs(t, w, "2025-03-26", body)
		if a := answerOf(t, out); st != 400 || a.Error == nil || !strings.Contains(a.Error.Message, want) {
			t.Errorf("%s: %d %s", body, st, out)
		}
	}
	st, out := postAs(t, w, "2025-03-26", `[{"jsonrpc":"2.0","id":12,"method":"ping"},{"jsonrpc":"2.0","id":"12","method":"ping"}]`)
	if st != 200 || !strings.Contains(out, `"id":12`) || !strings.Contains(out, `"id":"12"`) {
		t.Errorf("a batch of two ids that differ: %d %s", st, out)
	}
}

// TestTypedToolArgumentsHaveOneReading: the SDK's typed tools kept the last of two members with
// one name (createTask {"title": A, "title": B} opened B while the agent's transcript says A)
// and read half a surrogate pair as U+FFFD (the person's list showed another title than was
// sent). Refused as a tool error saying where, and nothing is done; a member in another case
// is refused by the tool's schema.
func TestTypedToolArgumentsHaveOneReading(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	for call, want := range map[string]string{
		`"name":"createTask","arguments":{"title":"Shown","title":"Kept"}`:                                    `arguments has the property "title" more than once`,
		`"name":"updateTask","arguments":{"taskId":"` + w.task + `","status":"ongoing","status":"completed"}`: `arguments has the property "status" more than once`,
		`"name":"getSiteToolDefinition","arguments":{"site":"` + shop + `","tool":"search","tool":"buy"}`:     `arguments has the property "tool" more than once`,
		`"name":"listSiteTools","arguments":{"a":{"b":1,"b":2}}`:                                              `arguments.a has the property "b" more than once`,
		`"name":"createTask","arguments":{"title":"tea\udc00"}`:                                               "half of a UTF-16 surrogate pair",
		"\"name\":\"createTask\",\"arguments\":{\"title\":\"tea\xff\"}":                                       "not valid UTF-8",
		`"name":"createTask","arguments":{"title":"Shown","Title":"Kept"}`:                                    "Title",
	} {
		body := rawCall(t, w, `{"jsonrpc":"2.0","id":80,"method":"tools/call","params":{`+call+`}}`)
		text, isErr := resultOf(t, body)
		if !isErr || !strings.Contains(text, want) {
			t.Errorf("%s: answer %q does not say %q", call, text, want)
		}
	}
	var tasks struct {
		Tasks []struct{ Title, Status string }
	}
	w.person.MustJSON("GET", "/api/workspaces/"+w.ws+"/tasks", nil, 200, &tasks)
	if len(tasks.Tasks) != 1 || tasks.Tasks[0].Title != "Buy tea" || tasks.Tasks[0].Status != "notstarted" {
		t.Fatalf("a refused call changed the tasks: %+v", tasks.Tasks)
	}
}

// TestMCPHeadersThatNameOneThingAreSentOnce: two Authorization, Mcp-Session-Id or
// Mcp-Protocol-Version headers were served with the first (the agent guard and the SDK both read
// it) while a proxy in front may check or route by the last; such a request is refused before
// anything reads it.
func TestMCPHeadersThatNameOneThingAreSentOnce(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	other := w.person.AgentToken(w.ws, "other")
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"listTasks","arguments":{}}}`
	for name, values := range map[string][]string{
		"Authorization":        {"Bearer " + w.token, "Bearer " + other},
		"Mcp-Session-Id":       {w.agent.ID(), "elsewhere.x"},
		"Mcp-Protocol-Version": {"2025-06-18", "2025-03-26"},
		"Last-Event-Id":        {"1", "2"},
	} {
		req, err := http.NewRequest("POST", w.env.URL+"/mcp", strings.NewReader(list))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+w.token)
		req.Header.Set("Mcp-Session-Id", w.agent.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		req.Header[name] = values
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if code, msg := servertest.ErrorOf(body); resp.StatusCode != 400 || code != "header_repeated" || !strings.Contains(msg, name+" header 2 times") {
			t.Errorf("two %s headers: %d %s", name, resp.StatusCode, body)
		}
	}
}

// TestAgentAPIAuthorizationIsSentOnce: the agent endpoints beside /mcp read the token the
// same way, so two Authorization headers are refused there too, not served with the first.
func TestAgentAPIAuthorizationIsSentOnce(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	other := w.person.AgentToken(w.ws, "other")
	req, err := http.NewRequest("GET", w.env.URL+"/api/agent/workspace", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header["Authorization"] = []string{"Bearer " + w.token, "Bearer " + other}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if code, msg := servertest.ErrorOf(body); resp.StatusCode != 400 || code != "header_repeated" || !strings.Contains(msg, "Authorization header 2 times") {
		t.Errorf("two Authorization headers on the agent API: %d %s", resp.StatusCode, body)
	}
	if st, _ := w.env.Agent(t, w.token).Do("GET", "/api/agent/workspace", nil); st != 200 {
		t.Errorf("one Authorization header on the agent API: %d", st)
	}
}

// TestMCPBatchesAreBoundedAndSayTheirVersion: a batch (protocol 2025-03-26) ran every message
// in it, so one 4 MiB POST was 50,000 calls; a message without "jsonrpc": "2.0" got the SDK's
// plain text. Both are JSON-RPC errors now, and a batch within the bound still runs.
func TestMCPBatchesAreBoundedAndSayTheirVersion(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	var batch []string
	for i := range 101 {
		batch = append(batch, `{"jsonrpc":"2.0","id":`+strconv.Itoa(100+i)+`,"method":"tools/call","params":{"name":"createTask","arguments":{"title":"t"}}}`)
	}
	st, out := postAs(t, w, "2025-03-26", "["+strings.Join(batch, ",")+"]")
	if a := answerOf(t, out); st != 400 || a.Error == nil || !strings.Contains(a.Error.Message, "The batch holds 101 messages; this server takes at most 100") {
		t.Errorf("a batch of 101: %d %s", st, out)
	}
	var tasks struct{ Tasks []struct{ Title string } }
	w.person.MustJSON("GET", "/api/workspaces/"+w.ws+"/tasks", nil, 200, &tasks)
	if len(tasks.Tasks) != 1 {
		t.Fatalf("a refused batch opened %d tasks", len(tasks.Tasks)-1)
	}
	if st, out := postAs(t, w, "2025-03-26", "["+strings.Join(batch[:3], ",")+"]"); st != 200 || strings.Count(out, `"taskId"`) < 3 {
		t.Errorf("a batch of 3: %d %s", st, out)
	}
	for body, want := range map[string]string{
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`: `needs "jsonrpc": "2.0" (it has "1.0")`,
		`{"id":1,"method":"ping"}`:                 `needs "jsonrpc": "2.0" (it has none)`,
	} {
		st, out := postAs(t, w, "2025-06-18", body)
		if a := answerOf(t, out); st != 400 || a.Error == nil || a.Error.Code != -32600 || !strings.Contains(a.Error.Message, want) {
			t.Errorf("%s: %d %s", body, st, out)
		}
	}
}

// TestAnotherSessionOrTokenCannotReachTheCall: notifications/cancelled naming a call's id from
// another session of the same token, or with another token on the call's session, and a GET
// (the session's stream) or DELETE of the call's session with another token (each answered as
// for a session that is gone: a DELETE 404, the others served in a session of the thief's own)
// leave the call waiting for the person; its own answer still runs it.
func TestAnotherSessionOrTokenCannotReachTheCall(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	answered := make(chan string, 1)
	go func() {
		_, out := postAs(t, w, "2025-06-18", `{"jsonrpc":"2.0","id":4242,"method":"tools/call","params":{"name":"callSiteTool","arguments":`+
			`{"site":"`+shop+`","tool":"buy","taskId":"`+w.task+`","arguments":{"item":"tea"}}}}`)
		answered <- out
	}()
	p := w.pending(t, 1)
	second := w.env.MCP(t, w.token, nil)
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4242,"reason":"mine now"}}`
	thief := w.person.AgentToken(w.ws, "thief")
	for i, s := range []struct{ method, token, sid string }{
		{"DELETE", thief, w.agent.ID()}, {"POST", w.token, second.ID()}, {"POST", thief, w.agent.ID()}, {"GET", thief, w.agent.ID()}, {"DELETE", thief, w.agent.ID()},
	} {
		req, _ := http.NewRequest(s.method, w.env.URL+"/mcp", strings.NewReader(cancel))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+s.token)
		req.Header.Set("Mcp-Session-Id", s.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// Another token's session is answered as one gone: a DELETE of it is 404, and the rest
		// are served in a session of the thief's own (the last DELETE ends that one).
		if s.token == thief && (i == 0) != (resp.StatusCode == http.StatusNotFound) || resp.StatusCode == http.StatusForbidden {
			t.Errorf("%s of another token's session: %d", s.method, resp.StatusCode)
		}
	}
	// The second session handles its messages in order: once a call on it answers, its cancel
	// was read.
	if res := servertest.CallTool(t, second, "listTasks", map[string]any{}); res.IsError {
		t.Fatal(servertest.ResultText(res))
	}
	w.pending(t, 1)
	w.answer(t, p[0].ID, "once")
	w.runInBrowser(t, "bought")
	if text, isErr := resultOf(t, testutil.RequireReceive(t, testutil.WaitMedium, answered)); isErr || text != "bought" {
		t.Fatalf("the call answered %q", text)
	}
}

// TestMCPMethodAndNameHeadersAgreeWithTheBody: Mcp-Method and Mcp-Name let a gateway in front
// allow or route a call without reading the body, and the SDK checks them only from protocol
// 2026-07-28 on, which this server does not speak: "Mcp-Name: listTasks" on a body calling
// createTask ran createTask. A header that disagrees is refused; one that agrees is served.
func TestMCPMethodAndNameHeadersAgreeWithTheBody(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	create := `{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"createTask","arguments":{"title":"Behind the gateway's back"}}}`
	post := func(headers map[string]string) (int, string) {
		req, err := http.NewRequest("POST", w.env.URL+"/mcp", strings.NewReader(create))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Authorization": "Bearer " + w.token, "Mcp-Session-Id": w.agent.ID(), "Mcp-Protocol-Version": "2025-06-18"} {
			req.Header.Set(k, v)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, h := range []map[string]string{
		{"Mcp-Method": "tools/call", "Mcp-Name": "listTasks"},
		{"Mcp-Method": "tools/list"},
	} {
		st, out := post(h)
		if a := answerOf(t, out); st != 400 || a.Error == nil || a.Error.Code != -32020 || !strings.Contains(a.Error.Message, "header says") {
			t.Errorf("%v: %d %s", h, st, out)
		}
	}
	var tasks struct{ Tasks []struct{ Title string } }
	w.person.MustJSON("GET", "/api/workspaces/"+w.ws+"/tasks", nil, 200, &tasks)
	if len(tasks.Tasks) != 1 {
		t.Fatalf("a refused call opened a task: %+v", tasks.Tasks)
	}
	if st, out := post(map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "createTask"}); st != 200 || !strings.Contains(out, "Behind the gateway") {
		t.Errorf("headers that agree: %d %s", st, out)
	}
}
