package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// expectGate takes the next call in the test browser, checks the reason the
// server gives for letting it run, and answers it.
func (w *siteWorld) expectGate(t *testing.T, want string) {
	t.Helper()
	m, err := w.br.Expect("call", testutil.WaitShort)
	if err != nil {
		t.Fatal(err)
	}
	if m.Gate != want {
		t.Errorf("call of %s says gate %q, want %q", m.Tool, m.Gate, want)
	}
	w.br.Dispatched(m.ID, "d1")
	w.br.Result(m.ID, "done")
}

// TestTheCallSaysWhyItMayRun: every call carries the approval's source, so
// the extension can refuse to run a call that nobody approved in a page whose
// tool is no longer what the server let run without asking (a read-only call
// reaching a write, a grant reaching a consequential tool).
func TestTheCallSaysWhyItMayRun(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())

	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
	w.expectGate(t, "read-only")
	awaitCall(t, ch)
	cancel()

	ch, cancel = w.buy("tea")
	w.answer(t, w.pending(t, 1)[0].ID, "always")
	w.expectGate(t, "asked")
	awaitCall(t, ch)
	cancel()

	ch, cancel = w.buy("tea")
	w.expectGate(t, "grant")
	awaitCall(t, ch)
	cancel()
}

// TestAToolThatChangedIsNotRun: when the extension finds the tool changed in
// the page (tool_changed), the agent is told nothing ran and what to do, in
// the extension's words.
func TestAToolThatChangedIsNotRun(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	ch, m := w.searchInBrowser(t)
	why := `The open tab of https://shop.example now offers "search" as a tool that changes something. Nothing was run. Call getSiteToolDefinition to see the tool as it is now, then call again.`
	w.br.Fail(m.ID, "tool_changed", why)
	res := awaitCall(t, ch)
	wantError(t, res, "search on "+shop+" was not run", why)
	if got := w.auditOf(t, "search"); len(got) != 1 || got[0].Outcome == "ok" {
		t.Errorf("audit of the refused call: %+v", got)
	}
}

// TestApprovedArgumentsMeetTheSchemaTheToolHasNow: a page that registers a
// write again while its call waits for the person, with a schema the
// arguments no longer fit, gets no call: the person's answer allowed those
// arguments for the tool it knew, and the agent is told what is wrong now.
func TestApprovedArgumentsMeetTheSchemaTheToolHasNow(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	ch, cancel := w.buy("tea")
	defer cancel()
	p := w.pending(t, 1)
	stricter := strings.Replace(shopTools, `"item":{"type":"string"}`, `"item":{"type":"string","enum":["coffee"]}`, 1)
	m, err := w.br.Announce(bridgetest.Doc{ID: "d1", Origin: shop, URL: shop + "/d1", Title: "Shop d1", TabID: 7, LastUsed: time.Now(), Tools: stricter}, testutil.WaitShort)
	if err != nil || m.Type != "tools.accepted" || len(m.Accepted) != 2 {
		t.Fatalf("announce: %+v %v", m, err)
	}
	w.answer(t, p[0].ID, "once")
	res := awaitCall(t, ch)
	// (an error before the browser answered anything: no call was sent)
	wantError(t, res, "item", "coffee")
}

// searchInBrowser starts an agent's search for tea and returns where its
// answer arrives and the call as the test browser got it; the agent gives
// the call up when the test ends.
func (w *siteWorld) searchInBrowser(t *testing.T) (chan callOut, *bridgetest.Message) {
	t.Helper()
	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
	t.Cleanup(cancel)
	m, err := w.br.Expect("call", testutil.WaitShort)
	if err != nil {
		t.Fatal(err)
	}
	return ch, m
}
