package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// rawCall posts a tools/call as raw bytes on the agent's open MCP session, as a client library
// would never send it, and returns the response body (JSON or an event stream).
func rawCall(t *testing.T, w *siteWorld, body string) string {
	t.Helper()
	req, err := http.NewRequest("POST", w.env.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Mcp-Session-Id", w.agent.ID())
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return string(out)
}

// TestNonUTF8ArgumentsNeverReachTheBrowser: a raw byte that is not UTF-8 inside an argument
// string is refused with where it is, before validation, and the browser's socket, which Chromium
// would drop on such a frame, carries on with the next call (issue 11, item 2).
func TestNonUTF8ArgumentsNeverReachTheBrowser(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	body := rawCall(t, w, "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":{\"name\":\"callSiteTool\","+
		"\"arguments\":{\"site\":\""+shop+"\",\"tool\":\"search\",\"arguments\":{\"q\":\"tea \xff\xfe\"}}}}")
	for _, want := range []string{"not valid UTF-8", "arguments.q", "at byte 10 of the arguments", "nothing was run"} {
		if !strings.Contains(body, want) {
			t.Fatalf("answer %q does not say %q", body, want)
		}
	}
	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea é"}})
	defer cancel()
	m, err := w.br.Expect("call", testutil.WaitShort)
	if err != nil {
		t.Fatalf("the browser did not get the good call after the bad one: %v", err)
	}
	if got := compactJSON(t, m.Arguments); got != `{"q":"tea é"}` {
		t.Fatalf("the first call to reach the page has arguments %s", got)
	}
	w.br.Dispatched(m.ID, "d1")
	w.br.Result(m.ID, "found")
	if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "found" {
		t.Fatalf("good call after a bad one: %q", servertest.ResultText(res))
	}
}

// TestResultLimitCountsWhatThePageReturned: the 256 KiB cap is on a string's own bytes (not its
// JSON quotes and escapes) and on any other value's JSON text (issue 11, item 8).
func TestResultLimitCountsWhatThePageReturned(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	search := map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}}
	run := func(result any) *mcp.CallToolResult {
		ch, cancel := callAsync(w.agent, "callSiteTool", search)
		defer cancel()
		m, err := w.br.Expect("call", testutil.WaitShort)
		if err != nil {
			t.Fatal(err)
		}
		w.br.Dispatched(m.ID, "d1")
		w.br.Result(m.ID, result)
		return awaitCall(t, ch)
	}
	exact := strings.Repeat("x", 256<<10)
	if res := run(exact); res.IsError || len(servertest.ResultText(res)) != 256<<10 {
		t.Fatalf("a result of exactly 256 KiB was refused: %.200s", servertest.ResultText(res))
	}
	lines := strings.Repeat("\n", 256<<10) // 512 KiB as JSON, 256 KiB as the page returned it
	if res := run(lines); res.IsError || servertest.ResultText(res) != lines {
		t.Fatalf("256 KiB of line breaks was refused: %.200s", servertest.ResultText(res))
	}
	wantError(t, run(exact+"é"), "returned 262146 bytes", "limited to 262144 bytes")
	list := json.RawMessage(`["` + strings.Repeat("y", 256<<10-4) + `"]`) // JSON text of exactly 256 KiB
	if res := run(list); res.IsError {
		t.Fatalf("a value whose JSON is exactly 256 KiB was refused: %.200s", servertest.ResultText(res))
	}
	wantError(t, run(json.RawMessage(`["`+strings.Repeat("y", 256<<10-3)+`"]`)), "returned 262145 bytes")
}

// TestArgumentsTooLargeSaySo: a size refusal is not headed "do not match the input schema".
func TestArgumentsTooLargeSaySo(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	res := servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search",
		"arguments": map[string]any{"q": strings.Repeat("x", 1<<20)}})
	wantError(t, res, "The arguments for search on "+shop+" are too large", "1048584 bytes; the limit is 1048576")
	if text := servertest.ResultText(res); strings.Contains(text, "do not match") {
		t.Fatalf("a size refusal reads %q", text)
	}
}
