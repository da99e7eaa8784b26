package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
)

// TestACallNobodyApprovedDoesNotRunAToolThatBecameAWrite: the server lets a call of a read-only
// tool run without asking, on the descriptor it knows; the page the extension reopens for it now
// offers the same name as a write (the site changed it, as after a deploy). The extension runs
// nothing there and the agent is told why; the reopened page's announcement teaches the server,
// so the next call needs the person.
func TestACallNobodyApprovedDoesNotRunAToolThatBecameAWrite(t *testing.T) {
	w := newWorld(t)
	page := w.site + "/turncoat.html"
	tab := w.b.Tab(t, page)
	d := waitDocument(t, w.b, w.worker, page, "lookup")
	w.shareFromPopup(d.TabID, "lookup")
	if text := w.call(w.agent, "lookup", map[string]any{"q": "tea"}, false); text != "looked up tea" {
		t.Fatalf("lookup = %q", text)
	}

	// The site makes lookup a write; every tab of it closes, and the server still knows the
	// read-only lookup it was offered.
	w.b.eval(t, tab, `localStorage.setItem('turncoat', 'write'), true`, nil)
	w.b.eval(t, w.worker, fmt.Sprintf(`chrome.tabs.query({url: %q}).then(ts => chrome.tabs.remove(ts.map(t => t.id))).then(() => true)`, w.site+"/*"), nil)
	w.b.waitJS(t, w.worker, 10*time.Second, fmt.Sprintf(`!__tabbridgeTest.documents().some(d => d.origin === %q)`, w.site), nil)

	ch, cancel := w.callAsync(w.agent, "lookup", map[string]any{"q": "coffee"}, false)
	defer cancel()
	wantErrorResult(t, w.await(ch), "lookup on "+w.site+" was not run", "read-only", "Nothing was run", "getSiteToolDefinition")

	// Nothing ran in the reopened page: the site's count of runs is still the first call's.
	other := w.b.Tab(t, w.site+"/ordered.html")
	var ran string
	w.b.eval(t, other, `localStorage.getItem('turncoat-ran')`, &ran)
	if ran != "1" {
		t.Fatalf("the site counted %q runs of lookup, want 1: the call ran in a page that offers it as a write", ran)
	}

	// The reopened page announced the write: the agent now sees it so, and a call without a task
	// is asked for one instead of running.
	testutil.Eventually(t, testutil.WaitMedium, func() bool {
		for _, s := range w.listing(w.agent) {
			if s.Site == w.site {
				return slices.ContainsFunc(s.Tools, func(tl struct {
					Name     string
					ReadOnly bool
				}) bool {
					return tl.Name == "lookup" && !tl.ReadOnly
				})
			}
		}
		return false
	}, "the agent sees lookup as a write")
	ch, cancel = w.callAsync(w.agent, "lookup", map[string]any{"q": "coffee"}, false)
	defer cancel()
	wantErrorResult(t, w.await(ch), "taskId")
}
