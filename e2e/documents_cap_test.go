package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
)

// TestOpenPagesOverTheCapSayWhy: with the real extension in real Chromium, a person whose
// browsers already hold --open-documents-max pages with tools opens one more. The server refuses
// that page's announcement (limit_reached), the extension tells the page's console why and what to
// do, and the agent still sees the site with the page held and gets its calls answered (the worker
// runs each on the site's most recently used tab offering the same tool); once the held page
// closes, the next page announced is taken.
func TestOpenPagesOverTheCapSayWhy(t *testing.T) {
	w := newWorld(t, func(o *server.Options) { o.OpenDocumentsMax = 1 })
	index := w.site + "/"
	first := w.b.Tab(t, index)
	waitDocument(t, w.b, w.worker, index, "search")
	w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": w.site, "workspaceId": w.ws}, 201, nil)
	w.b.eval(t, w.worker, `__tabbridgeTest.ready().then(() => { __tabbridgeTest.link.kick(); return true; })`, nil)
	w.waitOnline(w.agent, "search")

	second := w.site + "/?second"
	_, logs := consoleTab(t, w.b, second)
	waitDocument(t, w.b, w.worker, second, "search")
	line := w.waitConsole(logs, "server did not share this page's tools", "already have 1 open page with tools", "Close tabs of shared sites")
	t.Logf("the second page's console says: %s", line)
	if l := w.listing(w.agent); len(l) != 1 || l[0].OpenTabs != 1 {
		t.Fatalf("the agent sees %+v; want the site with the one page held", l)
	}
	if r := w.search(w.agent, "held"); r.Q != "held" {
		t.Fatalf("search = %+v", r)
	}
	if err := chromedp.Cancel(first); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testutil.WaitShort, func() bool { l := w.listing(w.agent); return len(l) == 1 && l[0].OpenTabs == 0 },
		"the held page closed, and the agent still counts it")
	third := w.site + "/?third"
	thirdTab := w.b.Tab(t, third)
	waitDocument(t, w.b, w.worker, third, "search")
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		l := w.listing(w.agent)
		return len(l) == 1 && l[0].OpenTabs == 1
	}, "the page opened after the held one closed is not taken")
	if r := w.search(w.agent, "taken"); r.Secret != w.secretOf(thirdTab) {
		t.Fatalf("search = %+v; want it answered by the page opened last (secret %q)", r, w.secretOf(thirdTab))
	}
}
