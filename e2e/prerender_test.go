package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
)

// TestPrerenderedPageAnnouncesOnActivation: Chrome prerenders a page the person is likely to open
// (speculation rules here; the address bar does it too), and the page runs its scripts unseen.
// The bridge sends nothing while its document is prerendering (a port opened then comes from a
// main frame whose frame id is not 0, which the worker refuses as a subframe's) and announces on
// activation (prerenderingchange). Here, in real Chromium: the page runs prerendering and the
// worker tracks nothing of it; the link is followed; the activated page (activationStart > 0,
// the prerendered document and not a fresh load) is tracked in its tab with its tools, and a call
// runs in it. Without the activation's announcement the page is never tracked (checked by
// removing the bridge's prerenderingchange listener). This Chromium settles WebMCP's registerTool
// only on activation, so the holding back itself is not reached here; the test logs which it was.
//
// The tab is opened by the extension and no DevTools session attaches to it: Chrome does not
// prerender for a page a DevTools client holds as a page target (PrerenderingDisabledByDevTools,
// crbug.com/1440085, even with Page.setPrerenderingAllowed). The page reports to this test's
// server instead.
func TestPrerenderedPageAnnouncesOnActivation(t *testing.T) {
	b := startExtensionBrowser(t, ChromiumOptions{})
	seen := make(chan url.Values, 4)
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(repoPath(t, "e2e/testsite"))))
	mux.HandleFunc("/seen", func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.URL.Query():
		default:
		}
	})
	site := serve(t, mux)
	worker := b.Worker(t)
	b.EnableDetection(t)
	next := site + "/prerendered.html"

	var tabID int
	b.eval(t, worker, fmt.Sprintf(`chrome.tabs.create({url: %q, active: true}).then(t => t.id)`, site+"/prerender.html"), &tabID)
	report := func(at string) url.Values {
		t.Helper()
		select {
		case got := <-seen:
			if got.Get("at") != at {
				t.Fatalf("the prerendered page reported %v, want its %q report", got, at)
			}
			return got
		case <-time.After(testutil.WaitMedium):
			t.Fatalf("the prerendered page never reported %q", at)
		}
		return nil
	}
	if r := report("start"); r.Get("prerendering") != "true" {
		t.Fatalf("the page ran with document.prerendering %s: Chrome did not prerender it", r.Get("prerendering"))
	}
	for _, d := range documentsOf(t, b, worker, site) {
		if d.URL == next {
			t.Fatalf("the worker tracks the prerendered page before it is shown: %+v", d)
		}
	}

	// inTab runs body as a function in the tab's page (the main world) and decodes what it returns.
	inTab := func(body string, out any) {
		t.Helper()
		b.eval(t, worker, fmt.Sprintf(`chrome.scripting.executeScript({target: {tabId: %d}, world: 'MAIN', func: () => { %s }}).then(r => r[0].result)`, tabID, body), out)
	}
	inTab(`document.getElementById('next').click(); return true;`, nil)
	d := waitDocument(t, b, worker, next, "search", "addItem")
	// This Chromium settles WebMCP's registerTool only once the page is activated; if a later one
	// settles it while prerendering, the bridge's holding back is what keeps the port from being
	// refused as a subframe's, and this test covers that too.
	if r := report("registered"); r.Get("errors") != "{}" {
		t.Fatalf("the page's tools failed to register: %s", r.Get("errors"))
	} else {
		t.Logf("the page's tools were registered with document.prerendering %s", r.Get("prerendering"))
	}
	if d.TabID != tabID {
		t.Fatalf("the activated page is tracked in tab %d, want its tab %d", d.TabID, tabID)
	}
	var page struct {
		URL             string
		ActivationStart float64
		Secret          string
	}
	inTab(`return {url: location.href, activationStart: performance.getEntriesByType('navigation')[0].activationStart, secret: window.testsite.secret};`, &page)
	if page.URL != next || page.ActivationStart <= 0 {
		t.Fatalf("the tab shows %s with activationStart %v, want the prerendered %s activated", page.URL, page.ActivationStart, next)
	}
	o := callTool(t, b, worker, site, "search", `{"q":"tea"}`)
	if !o.OK || o.Result["q"] != "tea" || o.Result["secret"] != page.Secret {
		t.Fatalf("a call on the activated page = %+v, want its own answer with secret %q", o, page.Secret)
	}
}
