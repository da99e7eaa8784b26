package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/sitetools"
)

// world is one browser with the real extension, signed in to the live server, and an agent of a
// workspace connected over MCP.
type world struct {
	t      *testing.T // the running (sub)test, for failures
	root   *testing.T // the group's test, for what outlives a subtest
	live   *liveServer
	b      *ExtensionBrowser
	worker context.Context
	site   string
	person *servertest.Client
	ws     string
	token  string
	task   string
	agent  *mcp.ClientSession
}

const password = "correct horse battery"

// newWorld starts the server, the browser and the test site; saves the server address on the
// options page; turns detection on; and signs in through the web app's first-run page in a tab of the same browser,
// so the worker's fetches carry the cookie. tweak, if given, adjusts the server's options.
func newWorld(t *testing.T, tweak ...func(*server.Options)) *world {
	return newWorldOn(t, startLive(t, tweak...))
}

// newWorldOn is newWorld on a server already running (in process, or the real binary).
func newWorldOn(t *testing.T, live *liveServer) *world {
	w := &world{t: t, root: t, live: live}
	w.b = startExtensionBrowser(t, ChromiumOptions{})
	w.site = serveTestSite(t)
	w.worker = w.b.Worker(t)
	w.b.SetServer(t, w.live.env.URL)
	w.b.EnableDetection(t)
	app := w.b.Tab(t, w.live.env.URL+"/")
	setUpOwner(t, app)
	w.person = w.signIn()
	w.ws = w.person.Workspace("Shopping")
	w.token = w.person.AgentToken(w.ws, "laptop")
	var task struct {
		Task struct{ ID string } `json:"task"`
	}
	w.person.MustJSON("POST", "/api/workspaces/"+w.ws+"/tasks", map[string]string{"title": "Buy tea"}, 201, &task)
	w.task = task.Task.ID
	w.agent = w.live.env.MCP(t, w.token, nil)
	return w
}

// enter starts a subtest: failures go to it, and the person's API client (signed in anew, as
// the server's clock may have moved past the access token) belongs to it.
func (w *world) enter(t *testing.T) {
	w.t = t
	w.person = w.signIn()
}

// signIn is another client of the same person, for the JSON API.
func (w *world) signIn() *servertest.Client {
	c := w.live.env.NewClient(w.t)
	c.MustJSON("POST", "/api/auth/signin", map[string]string{"email": "alice@example.com", "password": password}, 200, nil)
	return c
}

// linkStatus is what the worker's ServerLink reports.
type linkStatus struct {
	State  string `json:"state"`
	Shared []struct {
		Origin string `json:"origin"`
	} `json:"shared"`
	LastError string `json:"lastError"`
	Stats     struct {
		Connects  int `json:"connects"`
		Welcomes  int `json:"welcomes"`
		Refreshes int `json:"refreshes"`
		Tickets   int `json:"tickets"`
	} `json:"stats"`
	Announced []string `json:"announced"`
	Calls     []string `json:"calls"`
}

func (w *world) link() linkStatus {
	var s linkStatus
	w.b.eval(w.t, w.worker, `__tabbridgeTest.ready().then(() => __tabbridgeTest.link.status())`, &s)
	return s
}

// siteListing is one site of listSiteTools.
type siteListing struct {
	Site     string
	Online   bool
	OpenTabs int
	LastURL  string
	Tools    []struct {
		Name     string
		ReadOnly bool
	}
}

func (l siteListing) toolNames() []string {
	var names []string
	for _, t := range l.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

func (w *world) listing(agent *mcp.ClientSession) []siteListing {
	var list struct{ Sites []siteListing }
	servertest.Structured(w.t, servertest.CallTool(w.t, agent, "listSiteTools", map[string]any{}), &list)
	return list.Sites
}

// waitOnline waits until the agent sees the test site online with at least one open tab offering
// the tools named.
func (w *world) waitOnline(agent *mcp.ClientSession, tools ...string) siteListing {
	var got siteListing
	testutil.Eventually(w.t, testutil.WaitMedium, func() bool {
		for _, s := range w.listing(agent) {
			if s.Site == w.site && s.Online && s.OpenTabs > 0 {
				got = s
				names := s.toolNames()
				return !slices.ContainsFunc(tools, func(n string) bool { return !slices.Contains(names, n) })
			}
		}
		return false
	}, "the agent sees the site online")
	return got
}

type asyncCall struct {
	res *mcp.CallToolResult
	err error
}

// callAsync calls callSiteTool without waiting; cancel gives the call up (the client cancels it).
func (w *world) callAsync(agent *mcp.ClientSession, tool string, args map[string]any, task bool) (<-chan asyncCall, context.CancelFunc) {
	params := map[string]any{"site": w.site, "tool": tool, "arguments": args}
	if task {
		params["taskId"] = w.task
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	out := make(chan asyncCall, 1)
	go func() {
		res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: "callSiteTool", Arguments: params})
		out <- asyncCall{res, err}
	}()
	return out, cancel
}

func (w *world) await(ch <-chan asyncCall) *mcp.CallToolResult {
	w.t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			w.t.Fatalf("the call failed at the protocol level: %v", o.err)
		}
		return o.res
	case <-time.After(60 * time.Second):
		w.t.Fatal("the call did not return")
	}
	return nil
}

// call calls a tool and returns its text, failing on an error result.
func (w *world) call(agent *mcp.ClientSession, tool string, args map[string]any, task bool) string {
	w.t.Helper()
	ch, cancel := w.callAsync(agent, tool, args, task)
	defer cancel()
	res := w.await(ch)
	if res.IsError {
		w.t.Fatalf("%s: error result %q", tool, servertest.ResultText(res))
	}
	return servertest.ResultText(res)
}

func wantErrorResult(t *testing.T, res *mcp.CallToolResult, parts ...string) {
	t.Helper()
	text := servertest.ResultText(res)
	if !res.IsError {
		t.Fatalf("want an error result, got %q", text)
	}
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Fatalf("error %q does not mention %q", text, p)
		}
	}
}

type searchResult struct {
	Title  string  `json:"title"`
	Count  float64 `json:"count"`
	Q      string  `json:"q"`
	Secret string  `json:"secret"`
}

func (w *world) search(agent *mcp.ClientSession, q string) searchResult {
	w.t.Helper()
	var r searchResult
	text := w.call(agent, "search", map[string]any{"q": q}, false)
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		w.t.Fatalf("search result %q: %v", text, err)
	}
	return r
}

func (w *world) secretOf(tab context.Context) string {
	var s string
	w.b.eval(w.t, tab, `window.testsite.secret`, &s)
	return s
}

// activate makes a tab the most recently used one, as a person's click would. Each test tab opens
// as the active tab of its own window, and headless Chromium reports no window focus, so the tab
// is first moved into the browser's first window, then activated there.
func (w *world) activate(tab context.Context, url string) {
	w.t.Helper()
	w.activateTab(documentOf(w.t, w.b, w.worker, url).TabID)
}

func (w *world) activateTab(tabID int) {
	w.t.Helper()
	d := struct{ TabID int }{tabID}
	w.b.eval(w.t, w.worker, fmt.Sprintf(`(async () => {
		const [first] = await chrome.windows.getAll();
		const t = await chrome.tabs.get(%d);
		if (t.windowId !== first.id) await chrome.tabs.move(t.id, {windowId: first.id, index: -1});
		await chrome.tabs.update(t.id, {active: true});
		return true;
	})()`, d.TabID), nil)
	w.b.waitJS(w.t, w.worker, 5*time.Second, fmt.Sprintf(`Object.entries(__tabbridgeTest.pages.rec.tabUsed).every(([id, at]) => id == %d || at <= __tabbridgeTest.pages.rec.tabUsed[%d])`, d.TabID, d.TabID), nil)
}

type pendingRequest struct {
	ID        string `json:"id"`
	Tool      string `json:"tool"`
	TaskID    string `json:"taskId"`
	Arguments string `json:"arguments"`
}

func (w *world) pending(n int) []pendingRequest {
	w.t.Helper()
	var out struct {
		Approvals []pendingRequest `json:"approvals"`
	}
	testutil.Eventually(w.t, testutil.WaitMedium, func() bool {
		w.person.MustJSON("GET", "/api/approvals", nil, 200, &out)
		return len(out.Approvals) == n
	}, fmt.Sprintf("%d pending requests", n))
	return out.Approvals
}

func (w *world) answer(id, answer string) {
	w.person.MustJSON("POST", "/api/approvals/"+id+"/answer", map[string]string{"answer": answer}, 200, nil)
}

// allowAlways calls a write tool once and answers its request "Always allow".
func (w *world) allowAlways(tool string, args map[string]any) {
	w.t.Helper()
	ch, cancel := w.callAsync(w.agent, tool, args, true)
	defer cancel()
	w.answer(w.pending(1)[0].ID, "always")
	if res := w.await(ch); res.IsError {
		w.t.Fatalf("%s: %s", tool, servertest.ResultText(res))
	}
}

// TestExtensionThroughServer runs the scenarios in order on one browser: sharing from the
// popup, calls from an MCP agent reaching the page through the server and the worker, approvals,
// tab choice, reopening, navigation, cancellation, a server restart and an expired access token.
func TestExtensionThroughServer(t *testing.T) {
	w := newWorld(t)
	b := w.b
	index := w.site + "/"
	tab := b.Tab(t, index)
	d := waitDocument(t, b, w.worker, index, "search", "addItem", "goTo", "slow")

	t.Run("sharing from the popup brings the site online for the agent", func(t *testing.T) {
		w.enter(t)
		if s := w.link(); s.State == "open" {
			t.Fatalf("with nothing shared the socket is %s, want it closed", s.State)
		}
		popup := b.Tab(t, fmt.Sprintf("chrome-extension://%s/popup/popup.html?tab=%d", ExtensionID, d.TabID))
		run(t, popup, "share the site",
			chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="unshared"]`)),
			chromedp.Poll[chromedp.Void](`document.getElementById('tool-count').textContent === '4 tools'`),
			chromedp.Click(chromedp.ID("share")),
			chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="shared"] #unshare`)),
		)
		var site string
		b.eval(t, popup, `document.getElementById('site-name').textContent`, &site)
		if site != w.site {
			t.Fatalf("the popup's strip shows %q, want %q", site, w.site)
		}
		l := w.waitOnline(w.agent, "search", "addItem", "goTo", "slow")
		if got := l.toolNames(); !slices.Equal(got, []string{"addItem", "goTo", "search", "slow"}) || l.LastURL != index {
			t.Fatalf("listing = %+v", l)
		}
		for _, tool := range l.Tools {
			if tool.ReadOnly != (tool.Name == "search") {
				t.Fatalf("tool %s readOnly = %v", tool.Name, tool.ReadOnly)
			}
		}
		if s := w.link(); s.State != "open" || len(s.Shared) != 1 || s.Shared[0].Origin != w.site {
			t.Fatalf("after the share the link is %+v", s)
		}
		// sites.open: the person's site list shows this browser, by its default name, with the tab.
		var sites struct {
			Sites []struct {
				Origin string
				OpenIn []struct {
					Name string
					Tabs int
				}
			}
		}
		testutil.Eventually(t, testutil.WaitShort, func() bool {
			w.person.MustJSON("GET", "/api/sites", nil, 200, &sites)
			return len(sites.Sites) == 1 && len(sites.Sites[0].OpenIn) == 1
		}, "the site list shows the browser")
		if o := sites.Sites[0].OpenIn[0]; !strings.HasPrefix(o.Name, "Chrome on ") || o.Tabs != 1 {
			t.Fatalf("open in %+v", o)
		}
	})

	t.Run("a read-only call returns the page's own result", func(t *testing.T) {
		w.enter(t)
		r := w.search(w.agent, "shoes")
		if r.Secret != w.secretOf(tab) || r.Title != "Tabbridge test site" || r.Q != "shoes" {
			t.Fatalf("search = %+v, want the page's own answer", r)
		}
		var audit struct {
			Entries []struct{ Tool, Decision, Outcome string } `json:"entries"`
		}
		w.person.MustJSON("GET", "/api/audit?tool=search", nil, 200, &audit)
		if len(audit.Entries) != 1 || audit.Entries[0].Decision != "read-only" || audit.Entries[0].Outcome != "ok" {
			t.Fatalf("audit = %+v", audit.Entries)
		}
		ch, cancel := w.callAsync(w.agent, "addItem", map[string]any{"text": "fail"}, true)
		defer cancel()
		p := w.pending(1)
		w.answer(p[0].ID, "once")
		wantErrorResult(t, w.await(ch), `the page refuses to add "fail"`)
	})

	t.Run("an argument that is not UTF-8 is refused, and the next call runs on the same socket", func(t *testing.T) {
		w.enter(t)
		badUTF8ThenGood(t, w)
	})

	t.Run("a result over 256 KiB is refused with its size", func(t *testing.T) {
		w.enter(t)
		var r string
		b.eval(t, tab, `window.testsite.registerBig()`, &r)
		if r != "registered" {
			t.Fatalf("register big: %s", r)
		}
		w.waitOnline(w.agent, "big")
		ch, cancel := w.callAsync(w.agent, "big", map[string]any{}, false)
		defer cancel()
		wantErrorResult(t, w.await(ch), fmt.Sprintf("returned %d bytes", 300*1024+len(`{"text":""}`)), "never truncated")
		// A string of exactly the cap passes the extension and the server: its quotes do not count.
		b.eval(t, tab, `window.testsite.registerExact()`, &r)
		if r != "registered" {
			t.Fatalf("register exact: %s", r)
		}
		w.waitOnline(w.agent, "exact")
		if text := w.call(w.agent, "exact", map[string]any{}, false); text != strings.Repeat("y", 256<<10) {
			t.Fatalf("a result of exactly 256 KiB came back as %d bytes: %.80s", len(text), text)
		}
	})

	t.Run("arguments up to the server's 1 MiB limit reach the page", func(t *testing.T) {
		w.enter(t)
		// The largest call the server accepts: {"q":"…"} of exactly sitetools.MaxArgumentsBytes. Its
		// frame to the worker is over 1 MiB; the page answers with the text, so its result is over
		// the result cap, which says the page ran it with every byte.
		q := strings.Repeat("q", sitetools.MaxArgumentsBytes-len(`{"q":""}`))
		ch, cancel := w.callAsync(w.agent, "search", map[string]any{"q": q}, false)
		defer cancel()
		wantErrorResult(t, w.await(ch), "returned", "never truncated")
	})

	t.Run("writes ask: allow once, always allow, deny", func(t *testing.T) {
		w.enter(t)
		ch, cancel := w.callAsync(w.agent, "addItem", map[string]any{"text": "tea"}, true)
		defer cancel()
		p := w.pending(1)
		if p[0].Tool != "addItem" || !strings.Contains(p[0].Arguments, `"text": "tea"`) {
			t.Fatalf("request = %+v", p[0])
		}
		b.waitJS(t, w.worker, 5*time.Second, `chrome.action.getBadgeText({}).then(t => t === '1')`, nil)
		var notes map[string]bool
		b.waitJS(t, w.worker, 5*time.Second, fmt.Sprintf(`chrome.notifications.getAll().then(n => n[%q] && n)`, "approval-"+p[0].ID), &notes)
		if len(notes) != 1 {
			t.Fatalf("notifications = %v, want only the one for request %s", notes, p[0].ID)
		}
		// Clicking the notification opens the inbox at that request.
		b.eval(t, w.worker, fmt.Sprintf(`self.__tabbridgeTest.notificationClicked(%q).then(() => true)`, "approval-"+p[0].ID), nil)
		b.waitJS(t, w.worker, 10*time.Second, fmt.Sprintf(`chrome.tabs.query({}).then(tabs =>
			tabs.some(t => (t.pendingUrl || t.url || '').endsWith('/#req-' + %q)))`, p[0].ID), nil)
		// The person answers in the web app's inbox, in a tab of this browser.
		inbox := b.Tab(t, "http://"+w.live.addr+"/")
		run(t, inbox, "allow once in the web app's inbox",
			chromedp.WaitVisible(answerButton("once")),
			chromedp.Click(answerButton("once")),
			chromedp.WaitVisible(chromedp.ID("inbox-empty")))
		if text := servertest.ResultText(w.await(ch)); !strings.Contains(text, `"tea"`) {
			t.Fatalf("allowed once: %q", text)
		}
		b.waitJS(t, w.worker, 5*time.Second, `chrome.action.getBadgeText({}).then(t => t === '')`, nil)
		b.waitJS(t, w.worker, 5*time.Second, `chrome.notifications.getAll().then(n => Object.keys(n).length === 0)`, nil)
		pageLog(t, b, tab, "added tea")

		ch, cancel2 := w.callAsync(w.agent, "addItem", map[string]any{"text": "milk"}, true)
		defer cancel2()
		p = w.pending(1)
		w.answer(p[0].ID, "deny")
		wantErrorResult(t, w.await(ch), "denied")

		ch, cancel3 := w.callAsync(w.agent, "addItem", map[string]any{"text": "sugar"}, true)
		defer cancel3()
		p = w.pending(1)
		w.answer(p[0].ID, "always")
		w.await(ch)
		if text := w.call(w.agent, "addItem", map[string]any{"text": "salt"}, true); !strings.Contains(text, `"salt"`) || strings.Contains(text, `"milk"`) {
			t.Fatalf("after always allow: %q", text)
		}
		w.pending(0)
	})

	two := b.Tab(t, index+"?two")
	waitDocument(t, b, w.worker, index+"?two", "search")

	t.Run("two tabs: the most recently used one answers", func(t *testing.T) {
		w.enter(t)
		w.activate(two, index+"?two")
		if r := w.search(w.agent, "a"); r.Secret != w.secretOf(two) {
			t.Fatalf("answered by %s, want the second tab %s", r.Secret, w.secretOf(two))
		}
		w.activate(tab, index)
		if r := w.search(w.agent, "b"); r.Secret != w.secretOf(tab) {
			t.Fatalf("answered by %s, want the first tab %s", r.Secret, w.secretOf(tab))
		}
	})

	t.Run("a navigating tool's result arrives", func(t *testing.T) {
		w.enter(t)
		twoDoc := documentOf(t, b, w.worker, index+"?two")
		w.activate(two, index+"?two")
		ch, cancel := w.callAsync(w.agent, "goTo", map[string]any{"to": w.site + "/away.html"}, true)
		defer cancel()
		w.answer(w.pending(1)[0].ID, "always")
		res := w.await(ch)
		text := servertest.ResultText(res)
		if res.IsError {
			t.Fatalf("goTo failed: %q", text)
		}
		var r struct{ From, To string }
		json.Unmarshal([]byte(text), &r)
		if r.From != index+"?two" || r.To != w.site+"/away.html" {
			t.Fatalf("goTo = %q", text)
		}
		// Asked of the worker: an evaluation in the tab itself would race its navigation.
		b.waitJS(t, w.worker, 5*time.Second, fmt.Sprintf(`chrome.tabs.get(%d).then(t => t.url === %q)`, twoDoc.TabID, w.site+"/away.html"), nil)
	})

	t.Run("a page unloading mid-call fails only its own call; cancelling aborts the page's execute", func(t *testing.T) {
		w.enter(t)
		a := b.Tab(t, index+"?a")
		waitDocument(t, b, w.worker, index+"?a", "slow")
		w.allowAlways("slow", map[string]any{"seconds": 0})
		w.activate(a, index+"?a")
		chA, cancelA := w.callAsync(w.agent, "slow", map[string]any{"seconds": 30}, true)
		defer cancelA()
		pageLog(t, b, a, "slow started (30 s)")
		w.activate(tab, index)
		chB, cancelB := w.callAsync(w.agent, "slow", map[string]any{"seconds": 31}, true)
		defer cancelB()
		pageLog(t, b, tab, "slow started (31 s)")
		if err := chromedp.Do(a, chromedp.Navigate(w.site+"/away.html?gone")); err != nil {
			t.Fatalf("navigate away: %v", err)
		}
		wantErrorResult(t, w.await(chA), "went away")
		if s := w.link(); len(s.Calls) != 1 {
			t.Fatalf("calls still running in the worker = %v, want the other tab's one", s.Calls)
		}
		cancelB()
		pageLog(t, b, tab, "slow aborted")
		<-chB
		b.waitJS(t, w.worker, 5*time.Second, `__tabbridgeTest.link.status().calls.length === 0`, nil)
	})

	t.Run("all tabs closed, the site reopens in a background tab", func(t *testing.T) {
		w.enter(t)
		b.eval(t, w.worker, fmt.Sprintf(`chrome.tabs.query({url: %q}).then(ts => chrome.tabs.remove(ts.map(t => t.id))).then(() => true)`, w.site+"/*"), nil)
		b.waitJS(t, w.worker, 10*time.Second, fmt.Sprintf(`!__tabbridgeTest.documents().some(d => d.origin === %q)`, w.site), nil)
		testutil.Eventually(t, testutil.WaitShort, func() bool {
			for _, s := range w.listing(w.agent) {
				if s.Site == w.site {
					return s.OpenTabs == 0
				}
			}
			return false
		}, "the agent sees no open tab")
		if r := w.search(w.agent, "again"); r.Count != 1 || r.Title != "Tabbridge test site" {
			t.Fatalf("search with no tab open = %+v, want a fresh page's answer", r)
		}
		var active bool
		b.eval(t, w.worker, fmt.Sprintf(`chrome.tabs.query({url: %q}).then(ts => ts.length === 1 && ts[0].active)`, w.site+"/*"), &active)
		if active {
			t.Fatal("the site was reopened in the foreground, want a background tab")
		}
	})

	t.Run("the server restarts and the worker reconnects by itself", func(t *testing.T) {
		w.enter(t)
		before := w.link().Stats.Welcomes
		w.live.restart()
		b.waitJS(t, w.worker, 30*time.Second, fmt.Sprintf(`__tabbridgeTest.link.status().stats.welcomes > %d && __tabbridgeTest.link.status().state === 'open'`, before), nil)
		agent := w.live.env.MCP(w.root, w.token, nil) // lives for the rest of the group
		w.waitOnline(agent, "search")
		if r := w.search(agent, "after restart"); r.Q != "after restart" {
			t.Fatalf("search after the restart = %+v", r)
		}
		w.agent = agent
	})

	t.Run("an expired access token is refreshed once on the way to a ticket", func(t *testing.T) {
		w.enter(t)
		before := w.link()
		w.live.clock.Advance(20 * time.Minute) // past the 15-minute access token
		b.eval(t, w.worker, `__tabbridgeTest.link.connect().then(() => true)`, nil)
		b.waitJS(t, w.worker, 15*time.Second, fmt.Sprintf(`__tabbridgeTest.link.status().stats.welcomes > %d`, before.Stats.Welcomes), nil)
		after := w.link()
		if after.Stats.Refreshes != before.Stats.Refreshes+1 || after.State != "open" {
			t.Fatalf("link after the clock moved = %+v (before %+v), want one refresh and an open socket", after, before)
		}
		w.waitOnline(w.agent, "search")
		if r := w.search(w.agent, "refreshed"); r.Q != "refreshed" {
			t.Fatalf("search = %+v", r)
		}
	})

	t.Run("a back/forward cache restore re-announces to the server", func(t *testing.T) {
		w.enter(t)
		bf := b.Tab(t, index+"?bfcache")
		d := waitDocument(t, b, w.worker, index+"?bfcache", "search")
		w.waitOpenTabs(d.DocumentID, true)
		if err := chromedp.Do(bf, chromedp.Navigate(w.site+"/away.html")); err != nil {
			t.Fatalf("navigate away: %v", err)
		}
		w.waitOpenTabs(d.DocumentID, false)
		// A restore from the cache fires no load event, so chromedp.NavigateBack would wait forever.
		b.eval(t, bf, `history.back()`, nil)
		pageLog(t, b, bf, "pageshow persisted=true")
		w.waitOpenTabs(d.DocumentID, true)
		w.activate(bf, index+"?bfcache")
		if r := w.search(w.agent, "restored"); r.Secret != w.secretOf(bf) {
			t.Fatalf("answered by %s, want the restored page %s", r.Secret, w.secretOf(bf))
		}
	})

	t.Run("a page script neither sees the nonce nor forges a result through the server", func(t *testing.T) {
		w.enter(t)
		attacker := b.Tab(t, w.site+"/attacker.html")
		waitDocument(t, b, w.worker, w.site+"/attacker.html", "secret")
		w.waitOnline(w.agent, "secret")
		w.activate(attacker, w.site+"/attacker.html")
		ch, cancel := w.callAsync(w.agent, "secret", map[string]any{}, true)
		defer cancel()
		w.answer(w.pending(1)[0].ID, "once")
		res := w.await(ch)
		if text := servertest.ResultText(res); res.IsError || text != `{"genuine":true}` {
			t.Fatalf("the attacker's tool answered %q through the server, want only its genuine result", text)
		}
		var seen struct {
			NonceAttr  *string  `json:"nonceAttr"`
			Details    []string `json:"details"`
			ForgedSent int      `json:"forgedSent"`
		}
		b.eval(t, attacker, `window.seen`, &seen)
		if seen.NonceAttr != nil || len(seen.Details) != 0 || seen.ForgedSent == 0 {
			t.Fatalf("the attacker saw %+v", seen)
		}
	})

	t.Run("a stopped worker comes back on the next event and reconnects by itself", func(t *testing.T) {
		w.enter(t)
		if err := chromedp.Cancel(w.worker); err != nil { // closing its target stops the worker
			t.Fatalf("stop the worker: %v", err)
		}
		testutil.Eventually(t, testutil.WaitShort, func() bool {
			for _, s := range w.listing(w.agent) {
				if s.Site == w.site {
					return !s.Online
				}
			}
			return false
		}, "the site goes offline with the worker")
		// A new page's bridge connecting is an event that starts the worker again.
		b.Tab(t, index+"?wake")
		w.worker = b.Worker(w.root)
		w.waitOnline(w.agent, "search")
		// An older page, whose port died with the worker, is asked to reconnect for the call.
		var old document
		b.eval(t, w.worker, `__tabbridgeTest.documents().find(d => !d.url.endsWith('?wake') && d.tools.some(t => t.name === 'search')) ?? null`, &old)
		if old.DocumentID == "" {
			t.Fatal("the restarted worker forgot the open pages")
		}
		w.activateTab(old.TabID)
		var secret string
		b.eval(t, w.worker, fmt.Sprintf(`chrome.scripting.executeScript({target: {tabId: %d}, world: 'MAIN', func: () => window.testsite.secret}).then(r => r[0].result)`, old.TabID), &secret)
		if r := w.search(w.agent, "woken"); r.Secret != secret {
			t.Fatalf("answered by %s, want the older page %s", r.Secret, secret)
		}
	})

	t.Run("with detection off a new page announces nothing", func(t *testing.T) {
		w.enter(t)
		opts := b.Tab(t, fmt.Sprintf("chrome-extension://%s/options/options.html", ExtensionID))
		run(t, opts, "turn detection off",
			chromedp.WaitVisible(chromedp.ID("detection")),
			chromedp.Click(chromedp.ID("detection")),
			chromedp.Poll[chromedp.Void](`document.getElementById('detection').dataset.state === 'off'`),
		)
		before := w.link().Announced
		off := b.Tab(t, index+"?after-off")
		var nonce bool
		b.eval(t, off, `window.testsite.getTools().then(() => document.documentElement.hasAttribute('data-tabbridge-nonce'))`, &nonce)
		// The page has registered its tools; a page seen by the extension would have announced by now.
		if nonce || slices.ContainsFunc(documentsOf(t, b, w.worker, w.site), func(d document) bool { return strings.HasSuffix(d.URL, "after-off") }) {
			t.Fatalf("a page opened with detection off was tracked (nonce on page: %v)", nonce)
		}
		if after := w.link().Announced; !slices.Equal(after, before) {
			t.Fatalf("announced documents changed from %v to %v", before, after)
		}
		w.waitOpenTabs("", true)
	})

	t.Run("stop sharing from the popup closes the socket", func(t *testing.T) {
		w.enter(t)
		var tabID int
		b.eval(t, w.worker, fmt.Sprintf(`chrome.tabs.query({url: %q}).then(ts => ts[0].id)`, w.site+"/*"), &tabID)
		popup := b.Tab(t, fmt.Sprintf("chrome-extension://%s/popup/popup.html?tab=%d", ExtensionID, tabID))
		// Turning detection off gave back <all_urls>, and Chrome took the server's access with it:
		// the popup asks for it again in a click.
		run(t, popup, "see the access request", chromedp.WaitVisible(chromedp.ID("grant")))
		b.GrantHost(t, w.live.env.URL+"/*")
		run(t, popup, "allow access", chromedp.Click(chromedp.ID("grant")))
		run(t, popup, "stop sharing",
			chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="shared"] #unshare`)),
			chromedp.Click(chromedp.ID("unshare")),
			chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="unshared"] #share`)),
		)
		b.waitJS(t, w.worker, 10*time.Second, `__tabbridgeTest.link.status().state === 'idle'`, nil)
		if l := w.listing(w.agent); len(l) != 0 {
			t.Fatalf("after stop sharing the agent sees %+v", l)
		}
	})
}

// waitOpenTabs waits until the worker has (or has not) announced documentID on its socket and
// the agent's listing counts exactly the documents the worker announced ("" checks only the count).
func (w *world) waitOpenTabs(documentID string, announced bool) {
	w.t.Helper()
	testutil.Eventually(w.t, testutil.WaitShort, func() bool {
		l := w.link()
		if documentID != "" && slices.Contains(l.Announced, documentID) != announced {
			return false
		}
		for _, s := range w.listing(w.agent) {
			if s.Site == w.site {
				return s.OpenTabs == len(l.Announced)
			}
		}
		return false
	}, fmt.Sprintf("document %s announced=%v and counted by the server", documentID, announced))
}

// TestExtensionSignedOut checks what a person who is not signed in sees: the worker asks for a
// ticket once, is told "signed out" and stays closed; the popup offers sign-in, which opens the
// server's sign-in page in a tab.
func TestExtensionSignedOut(t *testing.T) {
	live := startLive(t)
	b := startExtensionBrowser(t, ChromiumOptions{})
	worker := b.Worker(t)
	b.SetServer(t, live.env.URL)
	var s linkStatus
	b.waitJS(t, worker, 10*time.Second, `(() => { const s = __tabbridgeTest.link.status(); return s.state === 'signed-out' && s; })()`, &s)
	if s.Stats.Connects != 0 || s.Stats.Refreshes != 0 {
		t.Fatalf("signed out, the link = %+v; want no socket and no refresh", s)
	}
	popup := b.Tab(t, fmt.Sprintf("chrome-extension://%s/popup/popup.html", ExtensionID))
	run(t, popup, "sign in from the popup",
		chromedp.WaitVisible(chromedp.ID("sign-in")),
		chromedp.Click(chromedp.ID("sign-in")),
	)
	b.waitJS(t, worker, 10*time.Second, fmt.Sprintf(`chrome.tabs.query({url: %q}).then(ts => ts.length === 1)`, live.env.URL+"/signin*"), nil)
}
