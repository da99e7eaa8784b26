package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// promptly is how soon a call on a page that lies must end: well before the 60 s deadline a
// hang would run to.
const promptly = 15 * time.Second

// quick awaits a call that must end promptly, and says how long it took.
func (w *world) quick(ch <-chan asyncCall) (*mcp.CallToolResult, time.Duration) {
	w.t.Helper()
	start := time.Now()
	select {
	case o := <-ch:
		if o.err != nil {
			w.t.Fatalf("the call failed at the protocol level: %v", o.err)
		}
		return o.res, time.Since(start)
	case <-time.After(promptly):
		w.t.Fatalf("the call did not end within %v: it would have run to its deadline", promptly)
	}
	return nil, 0
}

// hostileTab opens e2e/testsite/hostile.html with query q, and makes it the tab that answers.
// A page whose promises cannot settle answers nothing, so lying says not to wait for its answer.
func (w *world) hostileTab(q string, lying bool, tools ...string) (context.Context, string) {
	w.t.Helper()
	u := w.site + "/hostile.html" + q
	tab, logs := consoleTab(w.t, w.b, u)
	w.t.Cleanup(func() {
		if w.t.Failed() {
			w.t.Logf("the console of %s: %q", u, logs())
		}
	})
	w.activateTab(waitDocument(w.t, w.b, w.worker, u, append([]string{"whoAmI"}, tools...)...).TabID)
	if !lying {
		testutil.Eventually(w.t, testutil.WaitShort, func() bool { return w.callText("whoAmI") == q }, "the tab "+q+" answers")
	}
	return tab, u
}

// TestHostileSites runs the extension on pages that lie to the scripts in their world (they
// replace the globals and prototypes a script uses, make their promises unanswerable, spy for the
// extension's channel), open dialogs inside a tool, and churn, duplicate, oversize or leave their
// tools mid-call: each must end the call promptly with what happened, never at the deadline.
func TestHostileSites(t *testing.T) {
	w := newWorld(t)
	b := w.b
	first := w.site + "/hostile.html"
	b.Tab(t, first)
	d := waitDocument(t, b, w.worker, first, "whoAmI", "hostileAsync")
	w.shareFromPopup(d.TabID, "whoAmI", "hostileAsync", "hostileSync")

	t.Run("a page whose promises cannot settle is told so at once, and the call is not run", func(t *testing.T) {
		w.enter(t)
		for q, want := range map[string]string{
			"?lie=objthen":   "The page defines Object.prototype.then",
			"?lie=arraythen": "The page defines Array.prototype.then",
		} {
			w.hostileTab(q, true)
			for _, tool := range []string{"hostileAsync", "hostileSync"} {
				ch, cancel := w.callAsync(w.agent, tool, map[string]any{}, false)
				res, took := w.quick(ch)
				cancel()
				wantErrorResult(t, res, want, "The call was not run", "site's to fix")
				t.Logf("%s %s: %v: %s", q, tool, took.Round(time.Millisecond), servertest.ResultText(res))
			}
		}
		// A page that starts lying while the call runs: its async execute can never settle.
		w.hostileTab("?late", false)
		ch, cancel := w.callAsync(w.agent, "lateThen", map[string]any{}, false)
		defer cancel()
		res, took := w.quick(ch)
		wantErrorResult(t, res, "The page defines Object.prototype.then", "while the call ran", "may have run")
		t.Logf("lateThen ended after %v", took.Round(time.Millisecond))
	})

	t.Run("a page that replaces every global and prototype a script uses still answers, and sees nothing of the channel", func(t *testing.T) {
		w.enter(t)
		tab, _ := w.hostileTab("?lie=globals,promise,ctor", false, "hostileForm")
		if got := w.call(w.agent, "hostileAsync", map[string]any{"q": "tea"}, false); got != `{"ok":"async","args":{"q":"tea"}}` {
			t.Fatalf("hostileAsync = %s", got)
		}
		if got := w.callText("hostileSync"); got != `{"ok":"sync","list":[1,2]}` {
			t.Fatalf("hostileSync = %s", got)
		}
		if got := w.callText("spyEvent"); got != `{"event":null}` {
			t.Fatalf("window.event while execute ran = %s, want none (the nonce event's type is the nonce)", got)
		}
		// A form tool goes through getTools() and executeTool(), whose promises the page's then,
		// Promise.prototype.constructor and Symbol.species would capture.
		ch, cancel := w.callAsync(w.agent, "hostileForm", map[string]any{"q": "cups"}, true)
		defer cancel()
		w.answer(w.pending(1)[0].ID, "once")
		res, _ := w.quick(ch)
		if res.IsError || servertest.ResultText(res) != `{"form":"cups"}` {
			t.Fatalf("hostileForm = %q", servertest.ResultText(res))
		}
		var spied []string
		b.eval(t, tab, `window.hostile.spied`, &spied)
		if len(spied) != 0 {
			t.Fatalf("the page's hooks saw the extension at work: %q", spied)
		}
	})

	t.Run("a dialog inside a tool ends the call at once, saying so", func(t *testing.T) {
		w.enter(t)
		tab, _ := w.hostileTab("?dialogs", false)
		dialogs := make(chan string, 4)
		if err := chromedp.Listen(tab, func(ev any) {
			if e, ok := ev.(*page.EventJavascriptDialogOpening); ok {
				dialogs <- string(e.Type) + ": " + e.Message
			}
		}); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"confirm", "alert", "prompt"} {
			ch, cancel := w.callAsync(w.agent, "dialog", map[string]any{"kind": kind}, false)
			res, took := w.quick(ch)
			cancel()
			article := map[string]string{"alert": "an", "confirm": "a", "prompt": "a"}[kind]
			wantErrorResult(t, res, "The page opened "+article+" "+kind+"() dialog saying \"Delete 3 items?\"", "may have run")
			if got := testutil.RequireReceive(t, testutil.WaitShort, dialogs); got != kind+": Delete 3 items?" {
				t.Fatalf("the dialog = %q", got)
			}
			t.Logf("%s: the call ended after %v", kind, took.Round(time.Millisecond))
			// The person answers; the page goes on where it was, and tells the worker it runs again.
			answerDialog(t, tab, false)
			b.waitJS(t, w.worker, 10*time.Second, `__tabbridgeTest.pages.blocked.size === 0`, nil)
		}
		var log []string
		b.waitJS(t, tab, 10*time.Second, `window.hostile.log.length === 3 && window.hostile.log`, &log)
		if strings.Join(log, "|") != "confirm answered false|alert answered undefined|prompt answered null" {
			t.Fatalf("the page's log = %q", log)
		}
		// The page answers again once the person has.
		if got := w.callText("hostileSync"); got != `{"ok":"sync","list":[1,2]}` {
			t.Fatalf("hostileSync after the dialogs = %s", got)
		}
		// A dialog the page opened by itself, before the call: the call is not sent, since it
		// could only run once the person answers.
		b.eval(t, tab, `setTimeout(() => alert('Your session expires soon'), 0), true`, nil)
		if got := testutil.RequireReceive(t, testutil.WaitShort, dialogs); got != "alert: Your session expires soon" {
			t.Fatalf("the dialog = %q", got)
		}
		b.waitJS(t, w.worker, 10*time.Second, `__tabbridgeTest.pages.blocked.size === 1`, nil)
		ch, cancel := w.callAsync(w.agent, "hostileSync", map[string]any{}, false)
		defer cancel()
		res, _ := w.quick(ch)
		wantErrorResult(t, res, `The page shows an alert() dialog saying "Your session expires soon"`, "the call was not sent")
		answerDialog(t, tab, true)
		b.waitJS(t, w.worker, 10*time.Second, `__tabbridgeTest.pages.blocked.size === 0`, nil)
		if got := w.callText("hostileSync"); got != `{"ok":"sync","list":[1,2]}` {
			t.Fatalf("hostileSync after the page's own dialog = %s", got)
		}
	})

	t.Run("a huge result is refused at once with its size", func(t *testing.T) {
		w.enter(t)
		w.hostileTab("?huge", false, "huge", "hugeError")
		ch, cancel := w.callAsync(w.agent, "huge", map[string]any{}, false)
		defer cancel()
		res, took := w.quick(ch)
		if !res.IsError || !strings.Contains(servertest.ResultText(res), "returned 5242880 bytes") {
			t.Fatalf("huge = %q", servertest.ResultText(res))
		}
		t.Logf("after %v: %s", took.Round(time.Millisecond), servertest.ResultText(res))
		// 200 MB: counted in the page against the cap the bridge sent with the call, never sent
		// across (that took 13 s, at load average 14).
		ch, cancel = w.callAsync(w.agent, "huge", map[string]any{"mb": 200}, false)
		defer cancel()
		res, took = w.quick(ch)
		if !res.IsError || !strings.Contains(servertest.ResultText(res), "returned 209715200 bytes") || took > 5*time.Second {
			t.Fatalf("huge 200 MB after %v: %q", took, servertest.ResultText(res))
		}
		t.Logf("200 MB: after %v", took.Round(time.Millisecond))
		// An error of megabytes ends its call at once, its text cut (the bridge used to drop the
		// page's message whole, and the call waited for its deadline).
		ch, cancel = w.callAsync(w.agent, "hugeError", map[string]any{}, false)
		defer cancel()
		res, took = w.quick(ch)
		wantErrorResult(t, res, "failed in the page: out of stock. xxx")
		if n := len(servertest.ResultText(res)); n > 8192 {
			t.Fatalf("hugeError's answer is %d bytes", n)
		}
		t.Logf("hugeError: after %v, %d bytes", took.Round(time.Millisecond), len(servertest.ResultText(res)))
	})

	t.Run("tools churned in a tight loop, and a name registered twice", func(t *testing.T) {
		w.enter(t)
		tab, u := w.hostileTab("?churn&twice", false, "churned", "twice")
		var doc document
		b.waitJS(t, w.worker, 10*time.Second, `__tabbridgeTest.documents().find(d => d.url === `+jsString(u)+` && d.tools.some(t => t.name === 'churned' && t.description === 'Churn 199.'))`, &doc)
		if got := w.callText("churned"); got != `{"n":"last"}` {
			t.Fatalf("churned = %s", got)
		}
		var log []string
		b.waitJS(t, tab, 10*time.Second, `window.hostile.log.length > 0 && window.hostile.log`, &log)
		got := w.callText("twice")
		t.Logf("the browser on the second registration of one name: %q; the call ran %s", log, got)
		if strings.Contains(log[0], "accepted") != (got == `"second"`) {
			t.Fatalf("the call ran %s, but the browser said %q", got, log)
		}
	})

	t.Run("tools churned on a timer are announced at most once per gap, and no answer overtakes its page's tools", func(t *testing.T) {
		w.enter(t)
		tab, u := w.hostileTab("?tick", false, "ticked", "renew")
		d := waitDocument(t, b, w.worker, u, "ticked")
		var page struct {
			Ticks     int     `json:"ticks"`
			TickedFor float64 `json:"tickedFor"`
		}
		b.eval(t, tab, `({ticks: window.hostile.ticks, tickedFor: window.hostile.tickedFor})`, &page)
		tr := trafficOf(t, b, w.worker, d.DocumentID)
		// At once, then once per gap of 250 ms and more, the last after the churn, and room for
		// the calls whoAmI made (each flushes what is pending, which is nothing by then).
		most := int(page.TickedFor/250) + 4
		t.Logf("%d ticks (%d changes of the list) in %.0f ms; the extension carried %v", page.Ticks, 2*page.Ticks, page.TickedFor, tr)
		if page.Ticks < 100 {
			t.Fatalf("the page ticked only %d times in %.0f ms: too few to tell", page.Ticks, page.TickedFor)
		}
		if tr["announce"] > most || tr["tools.announce"] > most || tr["tools.announce"] < 1 || tr["ports"] != 1 {
			t.Fatalf("the extension carried %v for %d changes of the page's tools, want at most %d announcements on one port", tr, 2*page.Ticks, most)
		}
		if slices.Contains(d.toolNames(), "ticking") {
			t.Fatalf("the worker's last list of the page still has ticking: %v", d.toolNames())
		}
		// renew registers fresh just before it answers, while the bridge waits out the gap of
		// the change before: the agent can call fresh as soon as it has renew's answer.
		if got := w.callText("renew"); got != "renewed" {
			t.Fatalf("renew = %s", got)
		}
		if got := w.callText("fresh"); got != "fresh" {
			t.Fatalf("fresh = %s", got)
		}
	})

	t.Run("a page's own pageshow, pagehide, freeze and resume events change nothing", func(t *testing.T) {
		w.enter(t)
		tab, u := w.hostileTab("?forge", false)
		d := waitDocument(t, b, w.worker, u)
		before := trafficOf(t, b, w.worker, d.DocumentID)
		b.eval(t, tab, `(() => {
			for (let i = 0; i < 100; i++) {
				document.dispatchEvent(new Event('freeze'));
				dispatchEvent(new PageTransitionEvent('pageshow', {persisted: true}));
				dispatchEvent(new PageTransitionEvent('pagehide', {persisted: true}));
				document.dispatchEvent(new Event('resume'));
			}
			return document.modelContext.registerTool({name: 'afterForge', description: 'Registered after the forged events.', execute: () => 'after'}).then(() => true);
		})()`, nil)
		waitDocument(t, b, w.worker, u, "afterForge")
		after := trafficOf(t, b, w.worker, d.DocumentID)
		var blocked bool
		b.eval(t, w.worker, fmt.Sprintf(`__tabbridgeTest.pages.blocked.has(%q)`, d.DocumentID), &blocked)
		t.Logf("before %v, after %v", before, after)
		if after["ports"] != before["ports"] || after["frozen"] != before["frozen"] || after["announce"] != before["announce"]+1 || blocked {
			t.Fatalf("the page's forged events moved the extension: before %v, after %v, blocked %v", before, after, blocked)
		}
		if got := w.callText("whoAmI"); got != "?forge" {
			t.Fatalf("whoAmI = %s", got)
		}
	})

	t.Run("a page left mid-call fails the call at once; restored from the back/forward cache it answers again", func(t *testing.T) {
		w.enter(t)
		tab, u := w.hostileTab("?leave", false, "slowThenLeave")
		b.eval(t, tab, `addEventListener('pageshow', (e) => window.hostile.note(window.hostile.log, 'pageshow persisted ' + e.persisted)), true`, nil)
		ch, cancel := w.callAsync(w.agent, "slowThenLeave", map[string]any{}, false)
		defer cancel()
		b.waitJS(t, tab, 10*time.Second, `window.hostile.log.includes('slowThenLeave: started')`, nil)
		if err := chromedp.Do(tab, chromedp.Navigate(w.site+"/away.html")); err != nil {
			t.Fatal(err)
		}
		res, took := w.quick(ch)
		wantErrorResult(t, res, "went away")
		t.Logf("after %v: %s", took.Round(time.Millisecond), servertest.ResultText(res))
		b.eval(t, tab, `history.back(), true`, nil)
		var persisted bool
		b.waitJS(t, tab, 10*time.Second, `location.search === '?leave' && window.hostile && window.hostile.log.some(l => l.startsWith('pageshow')) && window.hostile.log.includes('pageshow persisted true')`, &persisted)
		waitDocument(t, b, w.worker, u, "slowThenLeave")
		testutil.Eventually(t, testutil.WaitShort, func() bool { return w.callText("whoAmI") == "?leave" }, "the restored page answers")
	})

	t.Run("a tab Chrome froze gets no calls, and the call in flight ends at once", func(t *testing.T) {
		w.enter(t)
		tab, _ := w.hostileTab("?frozen", false, "slowThenLeave")
		ch, cancel := w.callAsync(w.agent, "slowThenLeave", map[string]any{}, false)
		defer cancel()
		b.waitJS(t, tab, 10*time.Second, `window.hostile.log.includes('slowThenLeave: started')`, nil)
		// What Chrome does to a background tab to save power (the page hears freeze first).
		setLifecycle(t, tab, page.SetWebLifecycleStateStateFrozen)
		var frozen bool
		b.waitJS(t, w.worker, 10*time.Second, `chrome.tabs.query({}).then(ts => ts.some(t => t.url.includes('?frozen') && t.frozen))`, &frozen)
		res, took := w.quick(ch)
		wantErrorResult(t, res, "Chrome froze the tab of this page while the call was running", "may have run")
		t.Logf("the running call ended after %v", took.Round(time.Millisecond))
		ch, cancel = w.callAsync(w.agent, "hostileSync", map[string]any{}, false)
		defer cancel()
		res, _ = w.quick(ch)
		wantErrorResult(t, res, "Chrome has frozen the tab of this page", "the call was not sent")
		setLifecycle(t, tab, page.SetWebLifecycleStateStateActive)
		b.waitJS(t, w.worker, 10*time.Second, `__tabbridgeTest.pages.blocked.size === 0`, nil)
		if got := w.callText("hostileSync"); got != `{"ok":"sync","list":[1,2]}` {
			t.Fatalf("hostileSync once the tab runs again = %s", got)
		}
	})

	t.Run("a tab Chrome discards mid-call fails the call at once", func(t *testing.T) {
		w.enter(t)
		tab, u := w.hostileTab("?discard", false, "slowThenLeave")
		discarded := waitDocument(t, b, w.worker, u).TabID
		ch, cancel := w.callAsync(w.agent, "slowThenLeave", map[string]any{}, false)
		defer cancel()
		b.waitJS(t, tab, 10*time.Second, `window.hostile.log.includes('slowThenLeave: started')`, nil)
		w.activateTab(d.TabID) // Chrome discards only a tab the person is not looking at
		b.eval(t, w.worker, fmt.Sprintf(`chrome.tabs.discard(%d).then(t => t.discarded)`, discarded), nil)
		res, took := w.quick(ch)
		wantErrorResult(t, res, "went away")
		t.Logf("after %v: %s", took.Round(time.Millisecond), servertest.ResultText(res))
	})
}

// trafficOf is what the extension carried for one document (testhook.js): the ports its bridge
// opened, the messages on them by type, and the tools.announce frames sent to the server.
func trafficOf(t testing.TB, b *ExtensionBrowser, worker context.Context, documentID string) map[string]int {
	t.Helper()
	var tr map[string]int
	b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.traffic(%q)`, documentID), &tr)
	return tr
}

// answerDialog answers the dialog open in tab, as the person would.
func answerDialog(t *testing.T, tab context.Context, accept bool) {
	t.Helper()
	if err := chromedp.Do(tab, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept})
		return err
	})); err != nil {
		t.Fatal(err)
	}
}

// setLifecycle freezes a tab's page or lets it run again, as Chrome does with background tabs.
func setLifecycle(t *testing.T, tab context.Context, state page.SetWebLifecycleStateState) {
	t.Helper()
	if err := chromedp.Do(tab, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.SetWebLifecycleState, page.SetWebLifecycleStateParams{State: state})
		return err
	})); err != nil {
		t.Fatal(err)
	}
}
