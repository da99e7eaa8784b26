package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestCallsTakeTheLane, in real Chromium: a page's bridge hands the worker its lane (a
// MessageChannel, through a moment's extension frame) once the worker offers one; the frame is
// gone from the page once the lane is bound; calls then go to the page on the lane, and each
// result comes back on the lane and on the port, settling the call once. A page that removes
// every frame it sees keeps calls on the port, and they run as before.
func TestCallsTakeTheLane(t *testing.T) {
	b := startExtensionBrowser(t, ChromiumOptions{})
	site := serveTestSite(t)
	worker := b.Worker(t)
	b.EnableDetection(t)
	t.Run("a page's calls go on its lane", func(t *testing.T) {
		tab := b.Tab(t, site+"/")
		d := waitDocument(t, b, worker, site+"/", "search")
		b.waitJS(t, worker, 10*time.Second, fmt.Sprintf(`__tabbridgeTest.traffic(%q)['lane-bound'] === 1`, d.DocumentID), nil)
		b.waitJS(t, tab, 10*time.Second, `document.querySelectorAll('iframe').length === 0`, nil)
		for i := range 3 {
			q := fmt.Sprintf("tea %d", i)
			if o := callTool(t, b, worker, site, "search", fmt.Sprintf(`{"q": %q}`, q)); !o.OK || fmt.Sprint(o.Result["q"]) != q {
				t.Fatalf("call %d: %+v", i, o)
			}
		}
		// Each result's copy on the port arrives after the lane's; wait for the last.
		b.waitJS(t, worker, 10*time.Second, fmt.Sprintf(`__tabbridgeTest.traffic(%q).result === 3`, d.DocumentID), nil)
		if tr := trafficOf(t, b, worker, d.DocumentID); tr["call:lane"] != 3 || tr["call:port"] != 0 || tr["lane:result"] != 3 || tr["lane-bound"] != 1 || tr["lane-refused"] != 0 {
			t.Fatalf("the lane's traffic %+v: want 3 calls on the lane, 3 results on it (and on the port), 1 lane bound", tr)
		}
	})

	t.Run("a page that removes the frame keeps its calls on the port", func(t *testing.T) {
		tab := b.Tab(t, site+"/noframes.html")
		d := waitDocument(t, b, worker, site+"/noframes.html", "search")
		b.waitJS(t, tab, 10*time.Second, `window.framesRemoved === 1`, nil)
		for i := range 2 {
			q := fmt.Sprintf("cake %d", i)
			if o := callTool(t, b, worker, site, "search", fmt.Sprintf(`{"q": %q}`, q)); !o.OK || fmt.Sprint(o.Result["q"]) != q {
				t.Fatalf("call %d: %+v", i, o)
			}
		}
		if tr := trafficOf(t, b, worker, d.DocumentID); tr["call:port"] != 2 || tr["call:lane"] != 0 || tr["lane-bound"] != 0 || tr["result"] != 2 {
			t.Fatalf("the page's traffic %+v: want both calls and results on the port, no lane", tr)
		}
	})
}
