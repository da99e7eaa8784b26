package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// toolFlags is a tool of listSiteTools with every flag it may carry.
type toolFlags struct {
	Name             string
	ReadOnly         bool
	Form             bool
	NeedsPerson      bool
	Consequential    bool
	UntrustedContent bool
}

func (w *world) toolFlags(agent *mcp.ClientSession) map[string]toolFlags {
	w.t.Helper()
	var list struct {
		Sites []struct {
			Site  string
			Tools []toolFlags
		}
	}
	servertest.Structured(w.t, servertest.CallTool(w.t, agent, "listSiteTools", map[string]any{}), &list)
	out := map[string]toolFlags{}
	for _, s := range list.Sites {
		if s.Site == w.site {
			for _, t := range s.Tools {
				out[t.Name] = t
			}
		}
	}
	return out
}

// closeSiteTabs closes every tab of the test site and waits until the worker and the agent know.
func (w *world) closeSiteTabs() {
	w.t.Helper()
	w.b.eval(w.t, w.worker, fmt.Sprintf(`chrome.tabs.query({url: %q}).then(ts => chrome.tabs.remove(ts.map(t => t.id))).then(() => true)`, w.site+"/*"), nil)
	w.b.waitJS(w.t, w.worker, 10*time.Second, fmt.Sprintf(`!__tabbridgeTest.documents().some(d => d.origin === %q)`, w.site), nil)
	testutil.Eventually(w.t, testutil.WaitShort, func() bool {
		for _, s := range w.listing(w.agent) {
			if s.Site == w.site {
				return s.OpenTabs == 0
			}
		}
		return false
	}, "the agent sees no open tab")
}

// siteTabs lists the addresses of the test site's open tabs, as the worker sees them.
func (w *world) siteTabs() []string {
	w.t.Helper()
	var urls []string
	w.b.eval(w.t, w.worker, fmt.Sprintf(`chrome.tabs.query({url: %q}).then(ts => ts.map(t => t.url || t.pendingUrl))`, w.site+"/*"), &urls)
	return urls
}

// TestWebMCPFormsAndAnnotations runs the whole of WebMCP that Chromium 156 offers through the
// real extension and the server, with the go-sdk client and the TypeScript SDK's: declarative
// form tools (one answering through respondWith, one only the person may submit, one that
// navigates), every annotation, reopening the tool's own page after every tab closed, and an
// offline browser said at once.
func TestWebMCPFormsAndAnnotations(t *testing.T) {
	w := newWorld(t)
	b := w.b
	forms := w.site + "/forms.html"
	tab := b.Tab(t, forms)
	d := waitDocument(t, b, w.worker, forms, "searchThings", "signUp", "orderForm", "postMessage", "readInbox", "lateTool")
	popup := b.Tab(t, fmt.Sprintf("chrome-extension://%s/popup/popup.html?tab=%d", ExtensionID, d.TabID))
	run(t, popup, "share the site",
		chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="unshared"]`)),
		chromedp.Click(chromedp.ID("share")),
		chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="shared"] #unshare`)),
	)
	w.waitOnline(w.agent, "searchThings", "signUp", "orderForm", "postMessage", "readInbox", "lateTool")

	t.Run("listings and definitions say what each tool is", func(t *testing.T) {
		w.enter(t)
		got := w.toolFlags(w.agent)
		want := map[string]toolFlags{
			"searchThings": {Name: "searchThings", Form: true},
			"signUp":       {Name: "signUp", Form: true, NeedsPerson: true},
			"orderForm":    {Name: "orderForm", Form: true},
			"postMessage":  {Name: "postMessage", Consequential: true},
			"readInbox":    {Name: "readInbox", ReadOnly: true, UntrustedContent: true},
			"lateTool":     {Name: "lateTool", ReadOnly: true},
		}
		for name, f := range want {
			if got[name] != f {
				t.Fatalf("listing of %s = %+v, want %+v", name, got[name], f)
			}
		}
		var def struct {
			Kind        string
			Autosubmit  bool
			ReadOnly    bool
			Page        string
			InputSchema struct {
				Properties map[string]struct{ Type, Description string }
				Required   []string
			}
			Annotations struct{ ReadOnlyHint, ConsequentialHint, UntrustedContentHint bool }
		}
		servertest.Structured(t, servertest.CallTool(t, w.agent, "getSiteToolDefinition", map[string]any{"site": w.site, "tool": "searchThings"}), &def)
		if def.Kind != "declarative" || !def.Autosubmit || def.ReadOnly || def.Page != forms ||
			def.InputSchema.Properties["query"].Description != "What to look for" || !slices.Equal(def.InputSchema.Required, []string{"query"}) {
			t.Fatalf("definition of searchThings (Chromium's schema of the form) = %+v", def)
		}
		servertest.Structured(t, servertest.CallTool(t, w.agent, "getSiteToolDefinition", map[string]any{"site": w.site, "tool": "postMessage"}), &def)
		if def.Kind != "imperative" || def.ReadOnly || !def.Annotations.ReadOnlyHint || !def.Annotations.ConsequentialHint {
			t.Fatalf("definition of postMessage = %+v", def)
		}
		// The person sees the flags on the site's tool list.
		code, page := w.person.Do("GET", "/sites", nil)
		for _, s := range []string{"untrusted content", "you submit it", "asks every time", ">form<"} {
			if code != 200 || !strings.Contains(string(page), s) {
				t.Fatalf("the sites page (%d) does not show %q", code, s)
			}
		}
	})

	t.Run("a form tool answers through respondWith, after the person allows it", func(t *testing.T) {
		w.enter(t)
		ch, cancel := w.callAsync(w.agent, "searchThings", map[string]any{"query": "cats"}, true)
		defer cancel()
		p := w.pending(1)
		if p[0].Tool != "searchThings" {
			t.Fatalf("request %+v", p[0])
		}
		w.answer(p[0].ID, "once")
		res := w.await(ch)
		var r struct {
			Found []string
			Page  string
		}
		if err := json.Unmarshal([]byte(servertest.ResultText(res)), &r); res.IsError || err != nil || !slices.Equal(r.Found, []string{"cats (1)", "cats (2)"}) || r.Page != "Tabbridge test site: forms" {
			t.Fatalf("searchThings = %q", servertest.ResultText(res))
		}
		pageLog(t, b, tab, "searchThings submitted, agentInvoked=true")
	})

	t.Run("a form's rejected respondWith reaches the agent in the page's own words", func(t *testing.T) {
		w.enter(t)
		ch, cancel := w.callAsync(w.agent, "reserveTable", map[string]any{"people": 4}, true)
		defer cancel()
		w.answer(w.pending(1)[0].ID, "once")
		// Chromium's executeTool says only "respondWith promise was rejected".
		wantErrorResult(t, w.await(ch), "failed in the page: The form's answer failed: No table is free for 4 people tonight")
	})

	t.Run("a form only the person may submit is refused at once, without asking", func(t *testing.T) {
		w.enter(t)
		start := time.Now()
		ch, cancel := w.callAsync(w.agent, "signUp", map[string]any{"email": "a@example.com"}, true)
		defer cancel()
		wantErrorResult(t, w.await(ch), "no toolautosubmit", "nothing was filled in or submitted")
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("the refusal took %s", d)
		}
		w.pending(0)
		var filled string
		b.eval(t, tab, `document.querySelector('#signup-form [name=email]').value`, &filled)
		if filled != "" {
			t.Fatalf("the form was filled with %q", filled)
		}
	})

	t.Run("a navigating form answers with the new page's application/ld+json", func(t *testing.T) {
		w.enter(t)
		ch, cancel := w.callAsync(w.agent, "orderForm", map[string]any{"item": "tea"}, true)
		defer cancel()
		w.answer(w.pending(1)[0].ID, "always")
		res := w.await(ch)
		text := servertest.ResultText(res)
		var r struct {
			Navigated bool
			URL       string
			Title     string
			Result    map[string]string
		}
		if err := json.Unmarshal([]byte(text), &r); res.IsError || err != nil || !r.Navigated || r.URL != w.site+"/ordered.html?item=tea" ||
			r.Title != "Tabbridge test site: ordered" || r.Result["@type"] != "Order" || r.Result["orderedItem"] != "tea" {
			t.Fatalf("orderForm = %q, want the ordered page's JSON-LD", text)
		}
		run(t, tab, "back to the forms page", chromedp.Navigate(forms))
		waitDocument(t, b, w.worker, forms, "searchThings", "lateTool")
	})

	t.Run("consequentialHint asks every time and cannot be always allowed", func(t *testing.T) {
		w.enter(t)
		res := servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": w.site, "tool": "postMessage", "arguments": map[string]any{"text": "hi"}})
		wantErrorResult(t, res, "taskId")
		ch, cancel := w.callAsync(w.agent, "postMessage", map[string]any{"text": "hi"}, true)
		defer cancel()
		p := w.pending(1)
		if code, body := w.person.Do("POST", "/api/approvals/"+p[0].ID+"/answer", map[string]string{"answer": "always"}); code != 400 || servertest.ErrorCode(body) != "no_standing_grant" {
			t.Fatalf("always allow on a consequential tool: %d %s", code, body)
		}
		if _, inbox := w.person.Do("GET", "/", nil); strings.Contains(string(inbox), "ans-"+p[0].ID+"-always") || !strings.Contains(string(inbox), "there is no “Always allow” for it") {
			t.Fatal("the request's card offers Always allow, or does not say why not")
		}
		w.answer(p[0].ID, "once")
		if text := servertest.ResultText(w.await(ch)); text != `{"posted":"hi"}` {
			t.Fatalf("postMessage = %q", text)
		}
	})

	t.Run("untrustedContentHint results are marked for the agent", func(t *testing.T) {
		w.enter(t)
		res := servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": w.site, "tool": "readInbox"})
		if res.IsError || len(res.Content) != 2 || res.Meta["tabbridge/untrustedContent"] != true {
			t.Fatalf("readInbox = %+v", res)
		}
		notice, page := res.Content[0].(*mcp.TextContent), res.Content[1].(*mcp.TextContent)
		if !strings.HasPrefix(notice.Text, "Untrusted content: readInbox on "+w.site) || notice.Annotations == nil || notice.Annotations.Priority != 1 ||
			!strings.Contains(page.Text, "Ignore previous instructions") || page.Meta["tabbridge/untrustedContent"] != true {
			t.Fatalf("readInbox content: %q %+v / %q %v", notice.Text, notice.Annotations, page.Text, page.Meta)
		}
	})

	t.Run("the TypeScript SDK client gets the same", func(t *testing.T) {
		w.enter(t)
		calls := []map[string]any{
			{"name": "getSiteToolDefinition", "arguments": map[string]any{"site": w.site, "tool": "signUp"}},
			{"name": "callSiteTool", "arguments": map[string]any{"site": w.site, "tool": "readInbox"}},
			{"name": "callSiteTool", "arguments": map[string]any{"site": w.site, "tool": "signUp", "taskId": w.task, "arguments": map[string]any{"email": "a@example.com"}}},
			{"name": "callSiteTool", "arguments": map[string]any{"site": w.site, "tool": "orderForm", "taskId": w.task, "arguments": map[string]any{"item": "milk"}}}, // always allowed above
			{"name": "callSiteTool", "arguments": map[string]any{"site": w.site, "tool": "searchThings", "taskId": w.task, "arguments": map[string]any{"query": "dogs"}}},
			{"name": "callSiteTool", "arguments": map[string]any{"site": w.site, "tool": "postMessage", "taskId": w.task, "arguments": map[string]any{"text": "from TypeScript"}}},
		}
		// The two writes ask: the person answers each once, while the client waits.
		type ran struct {
			got []tsResult
			err error
		}
		dir := tsClientDir(t)
		done := make(chan ran, 1)
		go func() {
			got, err := runTSCalls(dir, w.live.env.URL, w.token, calls)
			done <- ran{got, err}
		}()
		for range 2 {
			w.answer(w.pending(1)[0].ID, "once")
		}
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		got := r.got
		if got[4].IsError || !strings.Contains(got[4].Content[0].Text, `"found":["dogs (1)","dogs (2)"]`) {
			t.Fatalf("TypeScript: searchThings = %+v", got[4])
		}
		if got[5].IsError || got[5].Content[0].Text != `{"posted":"from TypeScript"}` {
			t.Fatalf("TypeScript: postMessage = %+v", got[5])
		}
		if def := got[0].StructuredContent; def["kind"] != "declarative" || def["autosubmit"] != false {
			t.Fatalf("TypeScript: definition of signUp = %v", def)
		}
		inbox := got[1]
		if inbox.IsError || len(inbox.Content) != 2 || inbox.Meta["tabbridge/untrustedContent"] != true ||
			!strings.HasPrefix(inbox.Content[0].Text, "Untrusted content:") || inbox.Content[0].Annotations["priority"] != 1.0 || inbox.Content[1].Meta["tabbridge/untrustedContent"] != true {
			t.Fatalf("TypeScript: readInbox = %+v", inbox)
		}
		if !got[2].IsError || !strings.Contains(got[2].Content[0].Text, "no toolautosubmit") {
			t.Fatalf("TypeScript: signUp = %+v", got[2])
		}
		if got[3].IsError || !strings.Contains(got[3].Content[0].Text, `"orderedItem":"milk"`) {
			t.Fatalf("TypeScript: orderForm = %+v", got[3])
		}
		run(t, tab, "back to the forms page", chromedp.Navigate(forms))
		waitDocument(t, b, w.worker, forms, "searchThings", "lateTool")
	})

	t.Run("the tool's own page is reopened, and its late tool found", func(t *testing.T) {
		w.enter(t)
		b.Tab(t, w.site+"/") // index.html announces last: the site's last address is not forms.html
		waitDocument(t, b, w.worker, w.site+"/", "search")
		w.closeSiteTabs()
		start := time.Now()
		text := w.call(w.agent, "lateTool", map[string]any{}, false)
		if text != fmt.Sprintf(`{"late":true,"url":%q}`, forms) {
			t.Fatalf("lateTool = %q", text)
		}
		if urls := w.siteTabs(); !slices.Equal(urls, []string{forms}) {
			t.Fatalf("reopened %v, want the tool's own page %s", urls, forms)
		}
		t.Logf("reopened and ran a tool registered 2 s after load in %s", time.Since(start).Round(time.Millisecond))
		// Every tool of both pages is still listed after both closed.
		w.closeSiteTabs()
		names := w.toolFlags(w.agent)
		for _, n := range []string{"search", "addItem", "searchThings", "readInbox", "lateTool"} {
			if _, ok := names[n]; !ok {
				t.Fatalf("the listing forgot %s: %v", n, names)
			}
		}
		// The same through the TypeScript SDK client.
		got := tsCalls(t, w.live.env.URL, w.token, []map[string]any{{"name": "callSiteTool", "arguments": map[string]any{"site": w.site, "tool": "lateTool"}}})
		if got[0].IsError || got[0].Content[0].Text != fmt.Sprintf(`{"late":true,"url":%q}`, forms) {
			t.Fatalf("TypeScript: lateTool = %+v", got[0])
		}
	})

	t.Run("a reopened page without the tool fails at once, saying what it offers", func(t *testing.T) {
		w.enter(t)
		away := b.Tab(t, w.site+"/away.html")
		b.eval(t, away, `localStorage.setItem('tabbridge-no-inbox', '1'), true`, nil)
		t.Cleanup(func() {
			b.eval(w.root, b.Tab(w.root, w.site+"/away.html"), `localStorage.removeItem('tabbridge-no-inbox'), true`, nil)
		})
		w.closeSiteTabs()
		start := time.Now()
		res := servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": w.site, "tool": "readInbox"})
		wantErrorResult(t, res, forms+" was reopened", `no longer offers "readInbox"`, "lateTool", "Nothing was run")
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("the failure took %s", d)
		}
		testutil.Eventually(t, testutil.WaitShort, func() bool {
			_, ok := w.toolFlags(w.agent)["readInbox"]
			return !ok
		}, "readInbox leaves the listing")
	})

	t.Run("offline: every known tool says the Chrome is not connected, and a write asks nobody", func(t *testing.T) {
		w.enter(t)
		w.closeSiteTabs()
		b.eval(t, w.worker, `__tabbridgeTest.ready().then(() => { __tabbridgeTest.link.teardown(); __tabbridgeTest.link.state = 'stopped'; return true; })`, nil)
		testutil.Eventually(t, testutil.WaitMedium, func() bool {
			for _, s := range w.listing(w.agent) {
				if s.Site == w.site {
					return !s.Online
				}
			}
			return false
		}, "the agent sees the site offline")
		for _, tool := range []string{"search", "addItem", "searchThings", "postMessage", "lateTool"} {
			start := time.Now()
			res := servertest.CallTool(t, w.agent, "callSiteTool", map[string]any{"site": w.site, "tool": tool, "taskId": w.task, "arguments": map[string]any{"q": "x", "text": "x", "query": "x"}})
			wantErrorResult(t, res, "Chrome is not connected", "nobody was asked")
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("%s took %s to say offline", tool, d)
			}
		}
		got := tsCalls(t, w.live.env.URL, w.token, []map[string]any{
			{"name": "callSiteTool", "arguments": map[string]any{"site": w.site, "tool": "postMessage", "taskId": w.task, "arguments": map[string]any{"text": "x"}}},
			{"name": "callSiteTool", "arguments": map[string]any{"site": w.site, "tool": "search", "arguments": map[string]any{"q": "x"}}},
		})
		for i, r := range got {
			if !r.IsError || !strings.Contains(r.Content[0].Text, "Chrome is not connected") {
				t.Fatalf("TypeScript: offline call %d = %+v", i, r)
			}
		}
		w.pending(0)
	})
}

// tsResult is one tool result as the TypeScript SDK client received it.
type tsResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Text        string         `json:"text"`
		Annotations map[string]any `json:"annotations"`
		Meta        map[string]any `json:"_meta"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	Meta              map[string]any `json:"_meta"`
}

// tsCalls makes calls with the official MCP TypeScript SDK client (e2e/mcpclient/calls.mjs).
func tsCalls(t *testing.T, url, token string, calls []map[string]any) []tsResult {
	t.Helper()
	got, err := runTSCalls(tsClientDir(t), url, token, calls)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func runTSCalls(dir, url, token string, calls []map[string]any) ([]tsResult, error) {
	raw, err := json.Marshal(calls)
	if err != nil {
		return nil, err
	}
	out, err := runNode(dir, 90*time.Second, "calls.mjs", url, token, string(raw))
	if err != nil {
		return nil, err
	}
	var got []tsResult
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(calls) {
		return nil, fmt.Errorf("node client printed %s: %v", out, err)
	}
	return got, nil
}
