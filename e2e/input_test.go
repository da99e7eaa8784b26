package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// rawToolCall posts a tools/call as raw bytes on the agent's MCP session, as no client library
// would send it, and returns the response body (an event stream or JSON).
func (w *world) rawToolCall(t *testing.T, body string) string {
	t.Helper()
	req, err := http.NewRequest("POST", w.live.env.URL+"/mcp", strings.NewReader(body))
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
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// badUTF8ThenGood is issue 11's item 2 end to end: an argument string holding bytes that are not
// UTF-8, sent as raw HTTP to /mcp, is refused with where the bytes are; before the fix it reached
// Chromium in a text frame and Chromium failed the whole extension socket (1006). The next call
// must then run on the same socket: no reconnect in between.
func badUTF8ThenGood(t *testing.T, w *world) {
	before := w.link()
	if before.State != "open" {
		t.Fatalf("the link is %s before the call", before.State)
	}
	body := w.rawToolCall(t, `{"jsonrpc":"2.0","id":9001,"method":"tools/call","params":{"name":"callSiteTool",`+
		`"arguments":{"site":"`+w.site+`","tool":"search","arguments":{"q":"shoes `+"\xff\xfe"+`"}}}}`)
	for _, want := range []string{"not valid UTF-8", "arguments.q", "at byte 12 of the arguments", "nothing was run"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the bad call's answer %q does not say %q", body, want)
		}
	}
	if r := w.search(w.agent, "boots"); r.Q != "boots" {
		t.Fatalf("the good call after the bad one: %+v", r)
	}
	after := w.link()
	if after.State != "open" || after.Stats.Connects != before.Stats.Connects || after.Stats.Welcomes != before.Stats.Welcomes {
		t.Fatalf("the browser's socket did not survive: before %+v, after %+v", before.Stats, after.Stats)
	}
}
