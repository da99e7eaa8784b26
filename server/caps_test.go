package server_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestUnansweredCallsNeverCloseTheBrowser is issue 11 items 4 and 5: a flood
// of calls the page never answers is capped per browser, and when the calls
// that went out all time out together, their call.cancel messages find room
// in the queue even while the browser reads slowly — the browser is not
// closed as a slow consumer, and the next call runs on the same socket.
func TestUnansweredCallsNeverCloseTheBrowser(t *testing.T) {
	const maxCalls, flood = 8, 11
	w := newSiteWorld(t, storetest.SQLite, func(o *server.Options) {
		o.ExtensionQueue = 2 // replies only: calls and cancels have room of their own
		o.ExtensionMaxCalls = maxCalls
		o.CallTimeout = 2 * time.Second
	}, nil)
	w.announce(t, "d1", time.Now())
	// The browser stops reading, with a small receive buffer, so the
	// server's writer blocks on the large calls while more are queued.
	if err := w.br.Conn.NetConn().(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1000<<10)
	var calls []chan callOut
	for i := 0; i < flood; i++ {
		ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": big}})
		defer cancel()
		calls = append(calls, ch)
	}
	busy, timedOut := 0, 0
	for _, ch := range calls {
		res := awaitCall(t, ch)
		text := servertest.ResultText(res)
		switch {
		case strings.Contains(text, "already running 8 tool calls"):
			wantError(t, res, "Wait for some of your calls to finish")
			busy++
		case strings.Contains(text, "did not finish within 2s"):
			timedOut++
		default:
			t.Fatalf("unexpected result: %.300s", text)
		}
	}
	if busy != flood-maxCalls || timedOut != maxCalls {
		t.Fatalf("%d refused as busy and %d timed out; want %d and %d", busy, timedOut, flood-maxCalls, maxCalls)
	}
	// Now the browser reads again: every call, then every cancel, and no close.
	sent := map[string]bool{}
	for cancels := 0; cancels < maxCalls; {
		m, err := w.br.Next(wait)
		if err != nil {
			t.Fatalf("after %d calls and %d cancels: %v", len(sent), cancels, err)
		}
		switch m.Type {
		case "call":
			sent[m.ID] = true
		case "call.cancel":
			if !sent[m.CallID] || m.Reason != "timeout" {
				t.Fatalf("cancel %+v for a call not sent", m)
			}
			cancels++
		}
	}
	if len(sent) != maxCalls {
		t.Fatalf("%d calls reached the browser, want %d", len(sent), maxCalls)
	}
	// The slots are free again: the next call runs on the same socket.
	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
	defer cancel()
	m, err := w.br.Expect("call", wait)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.br.Result(m.ID, "green tea"); err != nil {
		t.Fatal(err)
	}
	if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "green tea" {
		t.Fatalf("the call after the flood: %+v", res)
	}
}
