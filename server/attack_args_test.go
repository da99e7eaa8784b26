package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestArgumentsTwoParsersWouldReadDifferentlyAreRefused: arguments sent as raw JSON-RPC, as no
// client library would, whose text two parsers read differently — a property named twice (the
// validator keeps one value, the person's card shows both, a page's parser may take either), a
// number a browser reads as Infinity — are refused with where, and never reach the browser.
func TestArgumentsTwoParsersWouldReadDifferentlyAreRefused(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	for args, want := range map[string]string{
		`{"q":"tea","q":"coffee"}`: `arguments: has the property \"q\" more than once`,
		`{"q":"tea","n":1e999}`:    "arguments.n: is a number outside what a browser holds",
	} {
		body := rawCall(t, w, `{"jsonrpc":"2.0","id":78,"method":"tools/call","params":{"name":"callSiteTool",`+
			`"arguments":{"site":"`+shop+`","tool":"search","arguments":`+args+`}}}`)
		for _, s := range []string{"could be read two ways", want, "nothing was run"} {
			if !strings.Contains(body, s) {
				t.Fatalf("%s: answer %q does not say %q", args, body, s)
			}
		}
	}
	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
	defer cancel()
	m, err := w.br.Expect("call", testutil.WaitShort)
	if err != nil {
		t.Fatalf("the browser did not get the good call: %v", err)
	}
	if got := compactJSON(t, m.Arguments); got != `{"q":"tea"}` {
		t.Fatalf("the first call to reach the page has arguments %s", got)
	}
	w.br.Dispatched(m.ID, "d1")
	w.br.Result(m.ID, "found")
	if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "found" {
		t.Fatalf("good call after refused ones: %q", servertest.ResultText(res))
	}
}
