package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestExtensionFollowStaysOnSite: a form tool whose form navigates is answered with the first
// application/ld+json of the page it went to, read only on the site's own origin. The worker reads
// the tab by its id once the tab says it has loaded a page of the site; here the site's page
// sends the tab on to another origin before that read runs (the worker is slow to get to it: the
// test holds the read until the tab shows the other site). That site's page, loaded with the
// person's own cookies, must not be read, and the agent is told where the form went.
func TestExtensionFollowStaysOnSite(t *testing.T) {
	b := startExtensionBrowser(t, ChromiumOptions{})
	site := serveTestSite(t)
	other := serveTestSite(t) // another origin: the same files on another port
	worker := b.Worker(t)
	b.EnableDetection(t)

	forms := site + "/forms.html"
	tab := b.Tab(t, forms)
	d := waitDocument(t, b, worker, forms, "orderForm")

	b.eval(t, worker, `__tabbridgeTest.holdReads(), true`, nil)
	t.Cleanup(func() { b.eval(t, worker, `__tabbridgeTest.releaseReads(), true`, nil) })
	id := startCall(t, b, worker, site, "orderForm", `{"item": "tea"}`)

	// The form went to the site's ordered.html, the tab finished loading it, and the worker's
	// read of it is waiting.
	b.waitJS(t, worker, 10*time.Second, `__tabbridgeTest.heldReads() === 1`, nil)
	var at string
	b.eval(t, worker, fmt.Sprintf(`chrome.tabs.get(%d).then(t => t.url)`, d.TabID), &at)
	if !strings.HasPrefix(at, site+"/ordered.html?item=tea") {
		t.Fatalf("the tab shows %q while the read waits, want the site's ordered page", at)
	}

	// The site's page sends the tab on to another site, whose page carries its own JSON-LD.
	away := other + "/ordered.html?item=account-4242"
	b.eval(t, tab, fmt.Sprintf(`location.replace(%q), true`, away), nil)
	b.waitJS(t, worker, 10*time.Second, fmt.Sprintf(`chrome.tabs.get(%d).then(t => t.status === 'complete' && t.url === %q)`, d.TabID, away), nil)
	b.eval(t, worker, `__tabbridgeTest.releaseReads(), true`, nil)

	o := outcomeOf(t, b, worker, id)
	if !o.OK || o.Result["navigated"] != true || o.Result["url"] != other || o.Result["result"] != nil ||
		o.Result["note"] != fmt.Sprintf("The form navigated to another site (%s); its page is not read.", other) {
		t.Fatalf("orderForm = %+v, want the other site named and its page not read", o)
	}
	if s := fmt.Sprint(o.Result); strings.Contains(s, "account-4242") {
		t.Fatalf("the other site's page reached the answer: %s", s)
	}
}
