package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
)

// TestExtensionPageOpenedAgain: a page that calls document.open() (or document.write() once
// loaded) erases every listener on its window and document, the extension's own in both worlds,
// yet stays the same document with its tools registered and its port open. Its tools must still
// answer, the tools it registers afterwards must still be announced, and Chrome freezing it must
// still be heard, instead of every call waiting unheard for its deadline.
func TestExtensionPageOpenedAgain(t *testing.T) {
	b := startExtensionBrowser(t, ChromiumOptions{})
	site := serveTestSite(t)
	worker := b.Worker(t)
	b.EnableDetection(t)

	u := site + "/rewritten.html"
	tab := b.Tab(t, u)
	d := waitDocument(t, b, worker, u, "before", "rewriteNow")
	if o := callTool(t, b, worker, site, "before", `{}`); !o.OK || o.Result["text"] != "As loaded" {
		t.Fatalf("before, as loaded = %+v", o)
	}

	rewritten := time.Now()
	b.eval(t, tab, `rewrite()`, nil)
	// The tool registered in the same task as document.open() is announced, by the same document.
	if got := waitDocument(t, b, worker, u, "before", "after"); got.DocumentID != d.DocumentID {
		t.Fatalf("the rewritten page is document %s, want the same %s", got.DocumentID, d.DocumentID)
	}
	t.Logf("the tool registered with the rewrite was announced after %v", time.Since(rewritten).Round(time.Millisecond))
	start := time.Now()
	if o := callTool(t, b, worker, site, "before", `{}`); !o.OK || o.Result["text"] != "Written anew" {
		t.Fatalf("before, after the page wrote itself anew = %+v (after %v)", o, time.Since(start))
	}
	t.Logf("a call after the rewrite took %v", time.Since(start).Round(time.Millisecond))
	if o := callTool(t, b, worker, site, "after", `{}`); !o.OK || o.Result["after"] != true {
		t.Fatalf("after = %+v", o)
	}

	// A call whose own execute rewrites the page: its answer, sent just after, is heard.
	if o := callTool(t, b, worker, site, "rewriteNow", `{"text": "Written by a call"}`); !o.OK || o.Result["rewrote"] != "Written by a call" {
		t.Fatalf("rewriteNow = %+v", o)
	}
	if o := callTool(t, b, worker, site, "before", `{}`); !o.OK || o.Result["text"] != "Written by a call" {
		t.Fatalf("before, after a call rewrote the page = %+v", o)
	}

	// The document's freeze and resume listeners were erased too: Chrome freezing the tab must
	// still block it in the worker, and resuming unblock it.
	setLifecycle(t, tab, page.SetWebLifecycleStateStateFrozen)
	b.waitJS(t, worker, 10*time.Second, fmt.Sprintf(`__tabbridgeTest.pages.blocked.has(%q)`, d.DocumentID), nil)
	setLifecycle(t, tab, page.SetWebLifecycleStateStateActive)
	b.waitJS(t, worker, 10*time.Second, fmt.Sprintf(`!__tabbridgeTest.pages.blocked.has(%q)`, d.DocumentID), nil)
}
