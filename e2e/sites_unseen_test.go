package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// consoleTab opens a tab at url with its console recorded from before the page's first script:
// what the extension tells a site's developer (a tool not shared, and why) is written there.
// logs returns the text of every console call so far.
func consoleTab(t *testing.T, b *ExtensionBrowser, url string) (tab context.Context, logs func() []string) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	var mu sync.Mutex
	var got []string
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventConsoleAPICalled); ok {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, strings.Trim(string(a.Value), `"`))
			}
			mu.Lock()
			got = append(got, strings.ReplaceAll(strings.Join(parts, " "), `\"`, `"`))
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// waitConsole waits until the console has a line holding every part.
func (w *world) waitConsole(logs func() []string, parts ...string) string {
	w.t.Helper()
	var line string
	testutil.Eventually(w.t, testutil.WaitMedium, func() bool {
		for _, l := range logs() {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
				line = l
				return true
			}
		}
		return false
	}, fmt.Sprintf("a console line with %q", parts))
	return line
}

// callResult calls a site tool without a task and returns the whole result.
func (w *world) callResult(tool string, args map[string]any) *mcp.CallToolResult {
	w.t.Helper()
	ch, cancel := w.callAsync(w.agent, tool, args, false)
	defer cancel()
	return w.await(ch)
}

// callText calls a read-only site tool and returns its text, failing on an error result.
func (w *world) callText(tool string) string {
	w.t.Helper()
	return w.call(w.agent, tool, map[string]any{}, false)
}

// TestSitesNotSeenBefore tries the extension and the server with pages written the way sites
// Tabbridge had not met are (e2e/testsite/unseen*.html): results that are not plain JSON data,
// thrown values that are not Errors, MCP-shaped results, pages that tamper with their own
// globals, tools that cannot be shared (each must say why in the page's console), more tools
// than the cap, forms of every field kind and in a shadow root, frames, a single-page app's
// routes, and a site written for MCP-B's polyfill.
func TestSitesNotSeenBefore(t *testing.T) {
	w := newWorld(t)
	b := w.b
	page := w.site + "/unseen.html"
	tab, logs := consoleTab(t, b, page)
	d := waitDocument(t, b, w.worker, page, "retString", "retDate")
	w.shareFromPopup(d.TabID, "retString", "retDate")

	t.Run("results are JSON as JSON.stringify writes them", func(t *testing.T) {
		w.enter(t)
		for tool, want := range map[string]string{
			"retUndefinedField": `{"name":"tea","list":[1,null,3]}`,
			"retDate":           `{"at":"2026-01-02T03:04:05.000Z"}`,
			"retClass":          `{"items":[{"id":1,"price":2.5}]}`,
			"retToJSON":         `{"price":"2.50 EUR"}`,
			"retNaN":            `{"n":null,"inf":null}`,
			"retMap":            `{"m":{},"s":{}}`,
			"retSurrogate":      `{"s":"a\ud800b"}`, // a lone surrogate stays escaped, valid JSON text
		} {
			if got := w.callText(tool); got != want {
				t.Fatalf("%s = %s, want %s", tool, got, want)
			}
		}
		wantErrorResult(t, w.callResult("retBigInt", nil), "cannot be sent as JSON", "BigInt at result.total", "site's to fix")
		wantErrorResult(t, w.callResult("retCycle", nil), "refers to itself at result.self")
	})

	t.Run("what the page throws is said in words", func(t *testing.T) {
		w.enter(t)
		for tool, want := range map[string]string{
			"throwString":       "failed in the page: out of stock",
			"throwObject":       `failed in the page: The tool threw {"code":"E42","detail":"the basket is locked"}`,
			"throwNull":         "failed in the page: The tool failed without saying why (it threw null).",
			"rejectUndefined":   "failed in the page: The tool failed without saying why (it threw undefined).",
			"throwEmptyError":   "failed in the page: TypeError, with no message",
			"throwDOMException": "failed in the page: the person must sign in first",
		} {
			wantErrorResult(t, w.callResult(tool, nil), want)
		}
	})

	t.Run("a tool registered again with another schema is checked against the new one", func(t *testing.T) {
		w.enter(t)
		if got := w.call(w.agent, "versioned", map[string]any{"q": "tea"}, false); got != `{"v":1,"args":{"q":"tea"}}` {
			t.Fatalf("versioned 1 = %s", got)
		}
		b.eval(t, tab, `window.unseen.reschema().then(() => true)`, nil)
		b.waitJS(t, w.worker, 10*time.Second, fmt.Sprintf(`__tabbridgeTest.documents().find(d => d.url === %q)?.tools.some(t => t.name === 'versioned' && t.description === 'Version 2.')`, page), nil)
		testutil.Eventually(t, testutil.WaitShort, func() bool { // the server hears the new announcement a moment later
			return strings.Contains(servertest.ResultText(w.callResult("versioned", map[string]any{"q": "tea"})), `missing required property "n"`)
		}, "the old arguments refused by the new schema")
		if got := w.call(w.agent, "versioned", map[string]any{"n": 3}, false); got != `{"v":2,"args":{"n":3}}` {
			t.Fatalf("versioned 2 = %s", got)
		}
	})

	t.Run("a call that never settles ends when the agent cancels it, and the page hears why", func(t *testing.T) {
		w.enter(t)
		ch, cancel := w.callAsync(w.agent, "never", map[string]any{}, false)
		b.waitJS(t, tab, 10*time.Second, `window.unseen.log.includes('never: started')`, nil)
		cancel()
		<-ch
		b.waitJS(t, tab, 10*time.Second, `window.unseen.log.some(l => l.startsWith('never: aborted: '))`, nil)
		var log []string
		b.eval(t, tab, `window.unseen.log`, &log)
		t.Logf("the page heard: %q", log[len(log)-1])
	})

	t.Run("a page with a strict CSP and Trusted Types shares its tools", func(t *testing.T) {
		w.enter(t)
		csp := w.site + "/unseen-csp.html"
		b.Tab(t, csp)
		waitDocument(t, b, w.worker, csp, "cspTool")
		w.waitOnline(w.agent, "cspTool")
		if got := w.callText("cspTool"); got != `{"csp":true,"trustedTypesEnforced":true}` {
			t.Fatalf("cspTool = %s", got)
		}
	})

	t.Run("an MCP-shaped result reaches the agent as MCP content", func(t *testing.T) {
		w.enter(t)
		res := w.callResult("retMCPImage", nil)
		if res.IsError || len(res.Content) != 2 {
			t.Fatalf("retMCPImage = %+v", res)
		}
		text, ok1 := res.Content[0].(*mcp.TextContent)
		img, ok2 := res.Content[1].(*mcp.ImageContent)
		if !ok1 || !ok2 || text.Text != "a picture" || img.MIMEType != "image/png" || string(img.Data) != "\x89PNG\r\n\x1a\n" {
			t.Fatalf("retMCPImage content = %#v %#v", res.Content[0], res.Content[1])
		}
		wantErrorResult(t, w.callResult("retMCPError", nil), "the page says no")
	})

	t.Run("a tool that is not shared says why in the page's console", func(t *testing.T) {
		w.enter(t)
		w.waitConsole(logs, `"zodSchema" is not shared`, "inputSchema is not JSON data", "Zod")
		w.waitConsole(logs, "extension did not share", `"bellDescription"`, "control characters")
		line := w.waitConsole(logs, "server did not share", `"stringSchema"`)
		t.Logf("the console says: %s", line)
		// An agent that asks for it is told the same, not that it does not exist.
		wantErrorResult(t, w.callResult("stringSchema", nil), "The page "+page+` offers a tool named "stringSchema", but Tabbridge does not share it: `, "the site's developer must fix the tool")
		names := w.waitOnline(w.agent).toolNames()
		for _, n := range []string{"zodSchema", "bellDescription", "stringSchema"} {
			if slices.Contains(names, n) {
				t.Fatalf("%s is listed: %v", n, names)
			}
		}
	})

	t.Run("a page with more tools than the cap shares the first 128", func(t *testing.T) {
		w.enter(t)
		many := w.site + "/unseen.html?many"
		mtab, manyLogs := consoleTab(t, b, many)
		waitDocument(t, b, w.worker, many, "many0")
		line := w.waitConsole(manyLogs, "extension did not share", "WebMCP tools (", "at most 128 tools")
		var n int
		b.waitJS(t, w.worker, 10*time.Second, fmt.Sprintf(`(__tabbridgeTest.documents().find(d => d.url === %q)?.tools.length === 128) && 128`, many), &n)
		t.Logf("%d tools shared; the console says: %s", n, line)
		// The site now remembers 128 tools. Once the page closes, they make room for the next
		// pages' new tools (the forms and the single-page app below).
		if err := chromedp.Cancel(mtab); err != nil {
			t.Fatal(err)
		}
		b.waitJS(t, w.worker, 10*time.Second, fmt.Sprintf(`!__tabbridgeTest.documents().some(d => d.url === %q)`, many), nil)
	})

	t.Run("a page whose tools are over 1 MiB together shares those that fit", func(t *testing.T) {
		w.enter(t)
		heavy := w.site + "/unseen.html?heavy"
		htab, heavyLogs := consoleTab(t, b, heavy)
		waitDocument(t, b, w.worker, heavy, "heavy0", "retString")
		w.waitConsole(heavyLogs, "extension did not share", `"heavy`, "at most 1015808 bytes together")
		var n int
		b.eval(t, w.worker, fmt.Sprintf(`__tabbridgeTest.documents().find(d => d.url === %q).tools.filter(t => t.name.startsWith('heavy')).length`, heavy), &n)
		if n == 0 || n >= 25 {
			t.Fatalf("%d of 25 heavy tools shared", n)
		}
		t.Logf("%d of 25 tools of 48 KB shared", n)
		if err := chromedp.Cancel(htab); err != nil {
			t.Fatal(err)
		}
		b.waitJS(t, w.worker, 10*time.Second, fmt.Sprintf(`!__tabbridgeTest.documents().some(d => d.url === %q)`, heavy), nil)
	})

	t.Run("a page that tampers with its own globals still answers", func(t *testing.T) {
		w.enter(t)
		for _, tamper := range []string{"tojson", "json", "events", "promise"} {
			u := page + "?tamper=" + tamper
			b.Tab(t, u)
			w.activateTab(waitDocument(t, b, w.worker, u, "retDate").TabID)
			testutil.Eventually(t, testutil.WaitShort, func() bool { return w.callText("whoAmI") == "?tamper="+tamper }, "the tampering tab answers")
			if got := w.callText("retDate"); got != `{"at":"2026-01-02T03:04:05.000Z"}` {
				t.Fatalf("tamper=%s: retDate = %s", tamper, got)
			}
			wantErrorResult(t, w.callResult("throwObject", nil), `The tool threw {"code":"E42"`)
		}
	})

	t.Run("forms of every field kind, in a shadow root, and frames", func(t *testing.T) {
		w.enter(t)
		other := serveTestSite(t) // another origin, for a cross-origin frame
		forms := w.site + "/unseen-forms.html?other=" + url.QueryEscape(other)
		ftab, flogs := consoleTab(t, b, forms)
		w.activateTab(waitDocument(t, b, w.worker, forms, "orderTea", "shadowSearch", "lateForm", "frameIntoParent").TabID)
		w.waitOnline(w.agent, "orderTea", "shadowSearch", "lateForm", "frameIntoParent")
		w.waitConsole(flogs, `"frameTool" is registered in a frame`, "shares only the top frame's tools")
		w.waitConsole(flogs, `"frameForm" is registered in a frame`)
		// A cross-origin frame's tools are not even in the top frame's getTools() (measured), so there
		// is nothing to share or to say; they are checked for once the frame has loaded.
		b.waitJS(t, ftab, 10*time.Second, `document.querySelector('iframe[src*="crossOrigin"]').dataset.loaded === '1'`, nil)
		var listed []string
		b.eval(t, ftab, `document.modelContext.getTools().then(l => l.map(t => t.name))`, &listed)
		t.Logf("the top frame's getTools(): %v", listed)
		if slices.Contains(listed, "crossOriginTool") {
			w.waitConsole(flogs, `"crossOriginTool" is registered in a frame`)
		}
		if got := w.callText("frameIntoParent"); got != `{"fromFrame":"/unseen-frame.html"}` {
			t.Fatalf("frameIntoParent = %s", got)
		}
		ch, cancel := w.callAsync(w.agent, "orderTea", map[string]any{"kind": "green", "extras": []any{"milk", "lemon"}, "gift": true,
			"tags": []any{"a", "b"}, "size": "large", "cups": 3, "when": "2026-12-24", "message": "hi"}, true)
		defer cancel()
		w.answer(w.pending(1)[0].ID, "once")
		// What the form submitted, by field: Chromium filled every kind from the arguments.
		want := map[string][]string{"cups": {"3"}, "extras": {"milk", "lemon"}, "gift": {"yes"}, "kind": {"green"}, "message": {"hi"},
			"size": {"large"}, "tags": {"a", "b"}, "when": {"2026-12-24"}}
		res := w.await(ch)
		var got map[string][]string
		if err := json.Unmarshal([]byte(servertest.ResultText(res)), &got); res.IsError || err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("orderTea = %q, want %v", servertest.ResultText(res), want)
		}
		ch, cancel = w.callAsync(w.agent, "shadowSearch", map[string]any{"q": "cups"}, true)
		defer cancel()
		w.answer(w.pending(1)[0].ID, "once")
		if res := w.await(ch); res.IsError || servertest.ResultText(res) != `{"shadow":"cups"}` {
			t.Fatalf("shadowSearch = %q", servertest.ResultText(res))
		}
	})

	t.Run("a form the page's script handles without respondWith says it was submitted, not failed", func(t *testing.T) {
		w.enter(t)
		forms := w.site + "/unseen-forms.html"
		ftab := b.Tab(t, forms)
		w.activateTab(waitDocument(t, b, w.worker, forms, "subscribe").TabID)
		w.waitOnline(w.agent, "subscribe", "jumpTo")
		ch, cancel := w.callAsync(w.agent, "subscribe", map[string]any{"email": "a@example.com"}, true)
		defer cancel()
		w.answer(w.pending(1)[0].ID, "once")
		// Chromium's executeTool rejects ("the site has a programming error"), yet the page's
		// script did subscribe the address: "failed" would have the agent subscribe it twice.
		res := w.await(ch)
		var r struct {
			Submitted bool
			Answer    any
			Note      string
		}
		if err := json.Unmarshal([]byte(servertest.ResultText(res)), &r); res.IsError || err != nil || !r.Submitted || r.Answer != nil || !strings.Contains(r.Note, "Do not submit it again") {
			t.Fatalf("subscribe = %q", servertest.ResultText(res))
		}
		var subscribed []string
		b.eval(t, ftab, `window.subscribed`, &subscribed)
		if !slices.Equal(subscribed, []string{"a@example.com"}) {
			t.Fatalf("the page subscribed %v", subscribed)
		}
		// A form whose action is a fragment of its page (and a query) is followed like any other.
		ch, cancel = w.callAsync(w.agent, "jumpTo", map[string]any{"q": "x"}, true)
		defer cancel()
		w.answer(w.pending(1)[0].ID, "once")
		if res := w.await(ch); res.IsError || !strings.Contains(servertest.ResultText(res), `"url":"`+forms+`?q=x#results"`) {
			t.Fatalf("jumpTo = %q", servertest.ResultText(res))
		}
	})

	t.Run("a single-page app's routes: tools follow pushState, and an old route's tool reopens its address", func(t *testing.T) {
		w.enter(t)
		spa := page + "?spa"
		st := b.Tab(t, spa)
		w.activateTab(waitDocument(t, b, w.worker, spa, "browseCatalogue").TabID)
		w.waitOnline(w.agent, "browseCatalogue")
		if got := w.callText("browseCatalogue"); got != `{"route":"/unseen.html?spa"}` {
			t.Fatalf("browseCatalogue = %s", got)
		}
		b.eval(t, st, `window.unseen.go('unseen.html?spa&view=cart'), true`, nil)
		cart := page + "?spa&view=cart"
		waitDocument(t, b, w.worker, cart, "viewCart")
		w.waitOnline(w.agent, "viewCart")
		if got := w.callText("viewCart"); got != `{"route":"/unseen.html?spa&view=cart"}` {
			t.Fatalf("viewCart = %s", got)
		}
		// The open tab no longer offers browseCatalogue: its own address is opened beside it.
		if got := w.callText("browseCatalogue"); got != `{"route":"/unseen.html?spa"}` {
			t.Fatalf("browseCatalogue after the route changed = %s", got)
		}
	})

	t.Run("a hash-routed app: each route's tools are remembered at the route, and reopened there", func(t *testing.T) {
		w.enter(t)
		catalogue := page + "?hashspa#/catalogue"
		ht := b.Tab(t, catalogue)
		w.activateTab(waitDocument(t, b, w.worker, catalogue, "hashCatalogue").TabID)
		b.eval(t, ht, `location.hash = '#/cart', true`, nil)
		waitDocument(t, b, w.worker, page+"?hashspa#/cart", "hashCart")
		// The route #/cart announced without hashCatalogue; it is still known, at #/catalogue, and
		// calling it opens that route beside the open tab.
		testutil.Eventually(t, testutil.WaitShort, func() bool {
			_, ok := w.toolFlags(w.agent)["hashCart"]
			return ok
		}, "the agent sees the cart route's tool")
		if got := w.callText("hashCatalogue"); got != `{"hash":"#/catalogue"}` {
			t.Fatalf("hashCatalogue = %s", got)
		}
		if got := w.callText("hashCart"); got != `{"hash":"#/cart"}` {
			t.Fatalf("hashCart = %s", got)
		}
	})

	t.Run("a site written for MCP-B's polyfill is told its tools are not the browser's", func(t *testing.T) {
		w.enter(t)
		assets := serveDir(t, filepath.Join(mcpbDir(t), "node_modules"))
		u := w.site + "/unseen-mcpb.html?assets=" + url.QueryEscape(assets)
		mtab, mlogs := consoleTab(t, b, u)
		waitDocument(t, b, w.worker, u, "nativeToo")
		var state struct {
			NativeNavigator string
			Polyfilled      bool
			Registered      bool
			Error           string
		}
		b.waitJS(t, mtab, 10*time.Second, `window.mcpb.registered && window.mcpb`, &state)
		w.waitConsole(mlogs, "navigator.modelContext of its own", "@mcp-b/global", "document.modelContext.registerTool")
		if d := documentOf(t, b, w.worker, u); slices.Contains(d.toolNames(), "mcpbOnly") {
			t.Fatalf("the polyfill's tool was shared: %v", d.toolNames())
		}
		t.Logf("MCP-B on Chromium 156: %+v (navigator.modelContext before it loaded: %s)", state, state.NativeNavigator)
	})
	_ = tab
}
