package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// detectionStatus is what detection.status() reports.
type detectionStatus struct {
	Wanted     bool     `json:"wanted"`
	Permitted  bool     `json:"permitted"`
	Registered []string `json:"registered"`
	On         bool     `json:"on"`
}

// outcome is what the worker's call resolves with.
type outcome struct {
	OK     bool           `json:"ok"`
	Code   string         `json:"code"`
	Error  string         `json:"error"`
	Result map[string]any `json:"result"`
}

type document struct {
	DocumentID string `json:"documentId"`
	TabID      int    `json:"tabId"`
	Origin     string `json:"origin"`
	URL        string `json:"url"`
	Tools      []struct {
		Name        string `json:"name"`
		Annotations struct {
			ReadOnlyHint bool `json:"readOnlyHint"`
		} `json:"annotations"`
	} `json:"tools"`
}

func (d document) toolNames() []string {
	var names []string
	for _, t := range d.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

// documentsOf lists the documents the worker tracks for an origin.
func documentsOf(t testing.TB, b *ExtensionBrowser, worker context.Context, origin string) []document {
	t.Helper()
	var docs []document
	b.eval(t, worker, `__tabbridgeTest.ready().then(() => __tabbridgeTest.documents())`, &docs)
	var out []document
	for _, d := range docs {
		if d.Origin == origin {
			out = append(out, d)
		}
	}
	return out
}

// waitDocument waits until the worker tracks a document at url offering every tool named.
func waitDocument(t testing.TB, b *ExtensionBrowser, worker context.Context, url string, tools ...string) document {
	t.Helper()
	cond := fmt.Sprintf(`__tabbridgeTest.documents().find(d => d.url === %q && %s.every(n => d.tools.some(t => t.name === n)))`, url, jsArray(tools))
	var d document
	b.waitJS(t, worker, 10*time.Second, cond, &d)
	return d
}

func jsArray(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(quoted, ",") + "]"
}

// callTool runs a call through the worker and waits for its outcome.
func callTool(t testing.TB, b *ExtensionBrowser, worker context.Context, origin, tool, args string) outcome {
	t.Helper()
	var o outcome
	b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.call(%q, %q, %s, 15000)`, origin, tool, args), &o)
	return o
}

// startCall starts a call and returns its id without waiting.
func startCall(t testing.TB, b *ExtensionBrowser, worker context.Context, origin, tool, args string) string {
	t.Helper()
	var id string
	b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.start(%q, %q, %s, 15000)`, origin, tool, args), &id)
	return id
}

func outcomeOf(t testing.TB, b *ExtensionBrowser, worker context.Context, callID string) outcome {
	t.Helper()
	var o outcome
	b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.outcome(%q)`, callID), &o)
	return o
}

// pageLog waits until the test site's log has a line containing want.
func pageLog(t testing.TB, b *ExtensionBrowser, tab context.Context, want string) {
	t.Helper()
	b.waitJS(t, tab, 10*time.Second, fmt.Sprintf(`window.testsite && window.testsite.log.some(l => l.includes(%q))`, want), nil)
}

// TestExtensionDetection runs the scenarios of one browser in order: detection is off by default,
// turning it on registers the scripts, and then the observer, bridge and worker carry calls.
func TestExtensionDetection(t *testing.T) {
	b := startExtensionBrowser(t, ChromiumOptions{})
	site := serveTestSite(t)
	worker := b.Worker(t)

	t.Run("off by default", func(t *testing.T) {
		var s detectionStatus
		b.eval(t, worker, `__tabbridgeTest.ready().then(() => __tabbridgeTest.detection())`, &s)
		if s.On || s.Wanted || s.Permitted || len(s.Registered) != 0 {
			t.Fatalf("detection on a fresh profile = %+v, want all off", s)
		}
		var all []string
		b.eval(t, worker, `chrome.scripting.getRegisteredContentScripts().then(l => l.map(s => s.id))`, &all)
		if len(all) != 0 {
			t.Fatalf("registered content scripts = %v, want none", all)
		}
		tab := b.Tab(t, site+"/index.html")
		var names []string
		b.waitJS(t, tab, 5*time.Second, `window.testsite.getTools()`, &names)
		if !slices.Equal(names, []string{"addItem", "goTo", "search", "slow"}) {
			t.Fatalf("the page's own getTools() = %v, want its 4 tools", names)
		}
		var nonce bool
		b.eval(t, tab, `document.documentElement.hasAttribute('data-tabbridge-nonce')`, &nonce)
		if docs := documentsOf(t, b, worker, site); len(docs) != 0 || nonce {
			t.Fatalf("with detection off the worker tracks %v (nonce on page: %v), want nothing", docs, nonce)
		}
	})

	t.Run("turning it on registers both scripts bridge first", func(t *testing.T) {
		b.GrantAllURLs(t)
		var s detectionStatus
		b.eval(t, worker, `__tabbridgeTest.detection()`, &s)
		if s.On || len(s.Registered) != 0 {
			t.Fatalf("after a grant alone detection = %+v; it must wait for the person's switch", s)
		}
		b.EnableDetection(t)
		b.eval(t, worker, `__tabbridgeTest.detection()`, &s)
		if !s.On || !s.Permitted {
			t.Fatalf("after the switch detection = %+v, want on", s)
		}
		type script struct {
			ID        string   `json:"id"`
			JS        []string `json:"js"`
			World     string   `json:"world"`
			RunAt     string   `json:"runAt"`
			AllFrames bool     `json:"allFrames"`
			Matches   []string `json:"matches"`
		}
		var scripts []script
		b.eval(t, worker, `chrome.scripting.getRegisteredContentScripts()`, &scripts)
		if len(scripts) != 2 || scripts[0].ID >= scripts[1].ID || scripts[0].World == "MAIN" || scripts[1].World != "MAIN" {
			t.Fatalf("registered scripts = %+v, want the isolated bridge sorting before the main-world observer", scripts)
		}
		for _, s := range scripts {
			if s.RunAt != "document_start" || s.AllFrames || !slices.Equal(s.Matches, []string{"<all_urls>"}) {
				t.Fatalf("script %+v: want document_start, top frame only, <all_urls>", s)
			}
		}
	})

	index := site + "/"    // FileServer answers /index.html with a redirect to /
	tab := b.Tab(t, index) // lives for the rest of the group

	t.Run("the observer sees the tools without changing the page's modelContext", func(t *testing.T) {
		d := waitDocument(t, b, worker, index, "search", "addItem", "goTo", "slow")
		if got := d.toolNames(); !slices.Equal(got, []string{"addItem", "goTo", "search", "slow"}) {
			t.Fatalf("tracked tools = %v", got)
		}
		for _, tool := range d.Tools {
			if tool.Annotations.ReadOnlyHint != (tool.Name == "search") {
				t.Fatalf("tool %s readOnlyHint = %v", tool.Name, tool.Annotations.ReadOnlyHint)
			}
		}
		var page struct {
			Registered map[string]bool   `json:"registered"`
			Errors     map[string]string `json:"errors"`
			Tools      []string          `json:"tools"`
			Nonce      bool              `json:"nonce"`
			Native     bool              `json:"native"`
		}
		b.eval(t, tab, `window.testsite.getTools().then(tools => ({registered: window.testsite.registered, errors: window.testsite.errors, tools,
			nonce: document.documentElement.hasAttribute('data-tabbridge-nonce'), native: 'registerTool' in document.modelContext}))`, &page)
		if len(page.Registered) != 4 || len(page.Errors) != 0 || len(page.Tools) != 4 || page.Nonce || !page.Native {
			t.Fatalf("the page's own view = %+v, want its 4 registrations resolved, getTools() listing them, no nonce left", page)
		}
		var dup string
		b.eval(t, tab, `document.modelContext.registerTool({name: 'search', description: 'again', execute() {}}).then(() => 'resolved', e => e.name)`, &dup)
		if dup != "InvalidStateError" {
			t.Fatalf("a duplicate registration through the wrapper = %q, want Chromium's own InvalidStateError", dup)
		}
	})

	t.Run("a call runs the page's own execute and returns its result", func(t *testing.T) {
		o := callTool(t, b, worker, site, "search", `{"q": "shoes"}`)
		var secret string
		b.eval(t, tab, `window.testsite.secret`, &secret)
		if !o.OK || o.Result["title"] != "Tabbridge test site" || o.Result["secret"] != secret || o.Result["q"] != "shoes" || o.Result["count"] != 1.0 {
			t.Fatalf("search = %+v, want the page's own answer with secret %q", o, secret)
		}
		o = callTool(t, b, worker, site, "addItem", `{"text": "fail"}`)
		if o.OK || o.Code != "tool_error" || o.Error != `the page refuses to add "fail"` {
			t.Fatalf("a failing tool = %+v, want the page's own error message", o)
		}
		o = callTool(t, b, worker, site, "nosuch", `{}`)
		if o.OK || o.Code != "tool_not_registered" || !strings.Contains(o.Error, "addItem, goTo, search, slow") {
			t.Fatalf("an unknown tool = %+v", o)
		}
	})

	t.Run("cancelling aborts the page's signal", func(t *testing.T) {
		id := startCall(t, b, worker, site, "slow", `{"seconds": 30}`)
		pageLog(t, b, tab, "slow started")
		var cancelled bool
		b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.cancel(%q)`, id), &cancelled)
		if o := outcomeOf(t, b, worker, id); !cancelled || o.OK || o.Code != "cancelled" {
			t.Fatalf("cancelled call = %+v", o)
		}
		pageLog(t, b, tab, "slow aborted: The call was cancelled.")
	})

	t.Run("a withdrawn tool fails its running call and re-registration wins", func(t *testing.T) {
		var r string
		b.eval(t, tab, `window.testsite.registerWithdrawable(1)`, &r)
		waitDocument(t, b, worker, index, "withdrawable")
		id := startCall(t, b, worker, site, "withdrawable", `{"hold": true}`)
		pageLog(t, b, tab, "withdrawable v1 called")
		b.eval(t, tab, `window.testsite.withdraw()`, nil)
		if o := outcomeOf(t, b, worker, id); o.OK || !strings.Contains(o.Error, `withdrew the tool "withdrawable"`) {
			t.Fatalf("call on a withdrawn tool = %+v", o)
		}
		b.waitJS(t, worker, 5*time.Second, fmt.Sprintf(`!__tabbridgeTest.documents().find(d => d.url === %q).tools.some(t => t.name === 'withdrawable')`, index), nil)
		b.eval(t, tab, `window.testsite.registerWithdrawable(2)`, &r)
		if r != "registered" {
			t.Fatalf("registering again = %q", r)
		}
		waitDocument(t, b, worker, index, "withdrawable")
		if o := callTool(t, b, worker, site, "withdrawable", `{}`); !o.OK || o.Result["version"] != 2.0 {
			t.Fatalf("call after re-registration = %+v, want version 2", o)
		}
	})

	t.Run("the attacker page sees no nonce and cannot forge a result", func(t *testing.T) {
		attacker := b.Tab(t, site+"/attacker.html")
		waitDocument(t, b, worker, site+"/attacker.html", "secret")
		o := callTool(t, b, worker, site, "secret", `{}`)
		if !o.OK || o.Result["genuine"] != true || o.Result["forged"] != nil {
			t.Fatalf("attacker's tool = %+v, want its genuine answer", o)
		}
		var seen struct {
			NonceAttr   *string  `json:"nonceAttr"`
			HTMLAttrs   []string `json:"htmlAttrs"`
			Mutations   []string `json:"mutations"`
			Events      []string `json:"events"`
			Stringified []string `json:"stringified"`
			Parsed      []string `json:"parsed"`
			Details     []string `json:"details"`
			ForgedSent  int      `json:"forgedSent"`
			ClientKeys  []string `json:"clientKeys"`
		}
		b.eval(t, attacker, `window.seen`, &seen)
		if seen.NonceAttr != nil || len(seen.HTMLAttrs) != 1 || len(seen.Mutations) != 0 {
			t.Fatalf("the attacker saw the nonce: %+v", seen)
		}
		for _, e := range seen.Events {
			if !strings.HasPrefix(e, "new tabbridge") && !slices.Contains([]string{"tabbridge", "tabbridge-result", "result", "message", "heard tabbridge", "heard result", "heard message"}, e) {
				t.Fatalf("the attacker saw an event of the extension: %q (all: %v)", e, seen.Events)
			}
		}
		if len(seen.Stringified) != 0 || len(seen.Parsed) != 0 || len(seen.Details) != 0 || seen.ForgedSent == 0 {
			t.Fatalf("the attacker overheard the extension: %+v", seen)
		}
		if !slices.Equal(seen.ClientKeys, []string{"signal"}) {
			t.Fatalf("execute's second argument has %v, want only signal", seen.ClientKeys)
		}

		// Cancelling runs the page's abort listeners; the page's getters on Object.prototype
		// must not run while the extension's own event (typed by the nonce) is window.event.
		waitDocument(t, b, worker, site+"/attacker.html", "slowSecret")
		id := startCall(t, b, worker, site, "slowSecret", `{}`)
		b.waitJS(t, attacker, 10*time.Second, `window.seen.slowStarted`, nil)
		var cancelled bool
		b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.cancel(%q)`, id), &cancelled)
		if o := outcomeOf(t, b, worker, id); !cancelled || o.OK || o.Code != "cancelled" {
			t.Fatalf("cancelled call = %+v", o)
		}
		var reason string
		b.waitJS(t, attacker, 10*time.Second, `window.seen.slowAborted`, &reason)
		if reason != "The call was cancelled." {
			t.Fatalf("the page's execute saw the abort reason %q", reason)
		}
		var hooks struct {
			Leaked     []string `json:"leaked"`
			HookEvents []string `json:"hookEvents"`
		}
		b.eval(t, attacker, `({leaked: window.seen.leaked, hookEvents: window.seen.hookEvents})`, &hooks)
		if len(hooks.Leaked) != 0 {
			t.Fatalf("the attacker's Object.prototype hooks saw the nonce: %v (events seen in hooks: %v)", hooks.Leaked, hooks.HookEvents)
		}
	})

	t.Run("a navigating tool's result arrives before page gone", func(t *testing.T) {
		nav := b.Tab(t, index+"?nav")
		d := waitDocument(t, b, worker, index+"?nav", "goTo")
		b.eval(t, worker, fmt.Sprintf(`chrome.tabs.update(%d, {active: true})`, d.TabID), nil)
		b.waitJS(t, worker, 5*time.Second, fmt.Sprintf(`__tabbridgeTest.pages.rec.tabUsed[%d] > __tabbridgeTest.pages.rec.tabUsed[%d]`, d.TabID, documentOf(t, b, worker, index).TabID), nil)
		o := callTool(t, b, worker, site, "goTo", fmt.Sprintf(`{"to": %q}`, site+"/away.html"))
		if !o.OK || o.Result["to"] != site+"/away.html" || o.Result["from"] != index+"?nav" {
			t.Fatalf("navigating tool = %+v, want its result", o)
		}
		b.waitJS(t, worker, 5*time.Second, fmt.Sprintf(`!__tabbridgeTest.documents().some(d => d.documentId === %q)`, d.DocumentID), nil)
		b.waitJS(t, nav, 5*time.Second, `location.pathname === '/away.html'`, nil)
	})

	t.Run("a back/forward cache restore re-announces", func(t *testing.T) {
		bf := b.Tab(t, index+"?bfcache")
		d := waitDocument(t, b, worker, index+"?bfcache", "search")
		if err := chromedp.Do(bf, chromedp.Navigate(site+"/away.html")); err != nil {
			t.Fatalf("navigate away: %v", err)
		}
		b.waitJS(t, worker, 5*time.Second, fmt.Sprintf(`!__tabbridgeTest.documents().some(d => d.documentId === %q)`, d.DocumentID), nil)
		// A restore from the cache fires no load event, so chromedp.NavigateBack would wait forever.
		b.eval(t, bf, `history.back()`, nil)
		pageLog(t, b, bf, "pageshow persisted=true")
		back := waitDocument(t, b, worker, index+"?bfcache", "search")
		if back.DocumentID != d.DocumentID {
			t.Fatalf("restored document %s, want the cached %s", back.DocumentID, d.DocumentID)
		}
	})

	t.Run("a page unloading mid-call fails only its own call", func(t *testing.T) {
		a := b.Tab(t, index+"?a")
		da := waitDocument(t, b, worker, index+"?a", "slow")
		idA := startCall(t, b, worker, site, "slow", `{"seconds": 30}`)
		pageLog(t, b, a, "slow started")
		bTab := b.Tab(t, index+"?b")
		db := waitDocument(t, b, worker, index+"?b", "slow")
		b.eval(t, worker, fmt.Sprintf(`chrome.tabs.update(%d, {active: true})`, db.TabID), nil)
		b.waitJS(t, worker, 5*time.Second, fmt.Sprintf(`__tabbridgeTest.pages.rec.tabUsed[%d] > __tabbridgeTest.pages.rec.tabUsed[%d]`, db.TabID, da.TabID), nil)
		idB := startCall(t, b, worker, site, "slow", `{"seconds": 30}`)
		pageLog(t, b, bTab, "slow started")
		if err := chromedp.Do(a, chromedp.Navigate(site+"/away.html?gone")); err != nil {
			t.Fatalf("navigate away: %v", err)
		}
		if o := outcomeOf(t, b, worker, idA); o.OK || o.Code != "page_gone" {
			t.Fatalf("call on the unloaded page = %+v, want page_gone", o)
		}
		var running bool
		b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.pages.calls.has(%q)`, idB), &running)
		if !running {
			t.Fatal("the other tab's call ended with the first page")
		}
		b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.cancel(%q)`, idB), nil)
	})
}

// documentOf returns the document the worker tracks at url.
func documentOf(t testing.TB, b *ExtensionBrowser, worker context.Context, url string) document {
	t.Helper()
	var d document
	b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.documents().find(d => d.url === %q) ?? null`, url), &d)
	return d
}

// TestExtensionReopenAndOff covers what needs a site with no tab open and detection turned off:
// a call reopens the site's last address in a background tab, and turning detection off
// unregisters the scripts and gives the permission back.
func TestExtensionReopenAndOff(t *testing.T) {
	b := startExtensionBrowser(t, ChromiumOptions{})
	site := serveTestSite(t)
	worker := b.Worker(t)
	b.EnableDetection(t)

	t.Run("all tabs closed, the site reopens in a background tab", func(t *testing.T) {
		tab, closeTab := chromedp.NewContext(b.ctx)
		if err := chromedp.Do(tab, chromedp.Navigate(site+"/?first")); err != nil {
			t.Fatalf("open: %v", err)
		}
		d := waitDocument(t, b, worker, site+"/?first", "search")
		closeTab()
		b.waitJS(t, worker, 5*time.Second, fmt.Sprintf(`!__tabbridgeTest.documents().some(d => d.documentId === %q)`, d.DocumentID), nil)
		o := callTool(t, b, worker, site, "search", `{"q": "again"}`)
		if !o.OK || o.Result["count"] != 1.0 {
			t.Fatalf("call with no tab open = %+v, want a fresh page's answer", o)
		}
		var active bool
		b.eval(t, worker, fmt.Sprintf(`chrome.tabs.query({url: %q}).then(ts => ts.some(t => t.active))`, site+"/*"), &active)
		if active {
			t.Fatal("the site was reopened in the foreground, want a background tab")
		}
	})

	t.Run("turning detection off unregisters and gives the permission back", func(t *testing.T) {
		opts := b.Tab(t, fmt.Sprintf("chrome-extension://%s/options/options.html", ExtensionID))
		if err := chromedp.Do(opts, chromedp.WaitVisible(chromedp.ID("detection")), chromedp.Click(chromedp.ID("detection"))); err != nil {
			t.Fatalf("click the switch: %v", err)
		}
		b.waitJS(t, opts, 10*time.Second, `document.getElementById('detection').dataset.state === 'off'`, nil)
		var s detectionStatus
		b.eval(t, worker, `__tabbridgeTest.detection()`, &s)
		if s.On || s.Wanted || s.Permitted || len(s.Registered) != 0 {
			t.Fatalf("after turning off = %+v", s)
		}
		tab := b.Tab(t, site+"/?after-off")
		var nonce bool
		b.eval(t, tab, `window.testsite.getTools().then(() => document.documentElement.hasAttribute('data-tabbridge-nonce'))`, &nonce)
		if docs := documentsOf(t, b, worker, site); nonce || slices.ContainsFunc(docs, func(d document) bool { return strings.HasSuffix(d.URL, "after-off") }) {
			t.Fatalf("a page opened with detection off was tracked: %+v (nonce on page: %v)", docs, nonce)
		}
	})
}

// TestExtensionWithoutWebMCP checks that the observer never adds a modelContext where the
// browser has none.
func TestExtensionWithoutWebMCP(t *testing.T) {
	b := startExtensionBrowser(t, ChromiumOptions{NoWebMCP: true})
	site := serveTestSite(t)
	worker := b.Worker(t)
	b.EnableDetection(t)
	tab := b.Tab(t, site+"/")
	var got struct {
		Doc, Nav string
		Log      []string
		Nonce    bool
	}
	b.eval(t, tab, `({doc: typeof document.modelContext, nav: typeof navigator.modelContext, log: window.testsite.log,
		nonce: document.documentElement.hasAttribute('data-tabbridge-nonce')})`, &got)
	if got.Doc != "undefined" || got.Nav != "undefined" || !slices.Equal(got.Log, []string{"no modelContext"}) || got.Nonce {
		t.Fatalf("without WebMCP the page sees %+v, want no modelContext and no nonce", got)
	}
	if docs := documentsOf(t, b, worker, site); len(docs) != 0 {
		t.Fatalf("the worker tracks %+v", docs)
	}
}

// TestOptionsMoveTheServerPermission: saving a server address asks for its
// host permission; saving another gives the previous one's back.
func TestOptionsMoveTheServerPermission(t *testing.T) {
	b := startExtensionBrowser(t, ChromiumOptions{})
	worker := b.Worker(t)
	first, second := "http://127.0.0.1:41111", "http://127.0.0.1:41112"
	has := func(origin string) bool {
		var ok bool
		b.eval(t, worker, fmt.Sprintf(`chrome.permissions.contains({origins: [%q]})`, origin+"/*"), &ok)
		return ok
	}
	b.SetServer(t, first)
	if !has(first) {
		t.Fatal("saving the server did not grant its host permission")
	}
	b.SetServer(t, second)
	if !has(second) || has(first) {
		t.Fatalf("after switching servers: second %v, first %v; want the first given back", has(second), has(first))
	}

	// The shortcuts: Alt+Shift+A opens the popup, Alt+Shift+F the app full-size.
	var keys map[string]string
	b.eval(t, worker, `chrome.commands.getAll().then(cs => Object.fromEntries(cs.map(c => [c.name, c.shortcut])))`, &keys)
	// Chromium 156 here leaves Alt+Shift+A unassigned (it keeps that key for
	// itself), so the popup's shortcut is checked as suggested by the
	// manifest; the person can confirm it in chrome://extensions/shortcuts.
	var suggested string
	b.eval(t, worker, `chrome.runtime.getManifest().commands._execute_action.suggested_key.default`, &suggested)
	if suggested != "Alt+Shift+A" || keys["open-full"] != "Alt+Shift+F" {
		t.Fatalf("shortcuts %v, popup suggested %q", keys, suggested)
	}
	b.eval(t, worker, `self.__tabbridgeTest.command('open-full').then(() => true)`, nil)
	b.waitJS(t, worker, 10*time.Second, fmt.Sprintf(`chrome.tabs.query({}).then(tabs =>
		tabs.some(t => (t.pendingUrl || t.url || '') === %q))`, second+"/"), nil)
}
