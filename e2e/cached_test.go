package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestExtensionCachedMidCall: a page put in the back/forward cache while a call runs is not gone.
// Shown again, it goes on where it was, and the call's execute would finish its work then,
// although the worker failed the call when its port closed and nobody hears the answer. The
// call's signal must fire as the page is cached, so the page's own execute stops.
func TestExtensionCachedMidCall(t *testing.T) {
	b := startExtensionBrowser(t, ChromiumOptions{})
	site := serveTestSite(t)
	worker := b.Worker(t)
	b.EnableDetection(t)

	u := site + "/?cached-mid-call"
	tab := b.Tab(t, u)
	d := waitDocument(t, b, worker, u, "slow")
	id := startCall(t, b, worker, site, "slow", `{"seconds": 2}`)
	pageLog(t, b, tab, "slow started (2 s)")
	if err := chromedp.Do(tab, chromedp.Navigate(site+"/away.html")); err != nil {
		t.Fatalf("navigate away: %v", err)
	}
	o := outcomeOf(t, b, worker, id)
	if o.OK || o.Code != "page_gone" {
		t.Fatalf("the call of the cached page = %+v, want page_gone", o)
	}

	// A restore from the cache fires no load event, so chromedp.NavigateBack would wait forever.
	b.eval(t, tab, `history.back(), true`, nil)
	pageLog(t, b, tab, "pageshow persisted=true")
	if back := waitDocument(t, b, worker, u, "slow"); back.DocumentID != d.DocumentID {
		t.Fatalf("restored document %s, want the cached %s: the page was not cached", back.DocumentID, d.DocumentID)
	}
	// Past its two seconds, the page has either finished the call's work or heard it stop.
	var ended []string
	b.waitJS(t, tab, 10*time.Second, `(() => { const l = window.testsite.log.filter(l => l === 'slow finished' || l.startsWith('slow aborted')); return l.length > 0 && l; })()`, &ended)
	if len(ended) != 1 || !strings.Contains(ended[0], "back/forward cache") {
		var log []string
		b.eval(t, tab, `window.testsite.log`, &log)
		t.Fatalf("the restored page went on with the call's work: %q (its log: %q)", ended, log)
	}
}
