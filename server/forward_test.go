package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testbin"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// spread is three instances on one database: the agent on A, the person's
// browser on B, and the person's pages on C.
type spread struct {
	envs             []*servertest.Env
	a, b, c          *servertest.Env
	person, onB, onC *servertest.Client
	ws, token, task  string
	agent            *mcp.ClientSession
	brB              *bridgetest.Browser
}

func newSpread(t *testing.T, tweak func(i int, o *server.Options)) *spread {
	t.Helper()
	envs := instances(t, 3, tweak)
	w := &spread{envs: envs, a: envs[0], b: envs[1], c: envs[2]}
	w.person = w.a.Person(t, "alice@example.com")
	w.ws = w.person.Workspace("Shopping")
	w.token = w.person.AgentToken(w.ws, "laptop")
	w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": shop, "workspaceId": w.ws}, 201, nil)
	var task struct {
		Task struct{ ID string } `json:"task"`
	}
	w.person.MustJSON("POST", "/api/workspaces/"+w.ws+"/tasks", map[string]string{"title": "Buy tea"}, 201, &task)
	w.task = task.Task.ID
	w.onB, w.onC = asOn(t, w.b, w.person), asOn(t, w.c, w.person)
	w.brB, _ = extBrowser(t, w.b, w.onB, "browser-b")
	w.agent = w.a.MCP(t, w.token, nil)
	return w
}

func announceOn(t testing.TB, br *bridgetest.Browser, doc string, used time.Time) {
	t.Helper()
	m, err := br.Announce(bridgetest.Doc{ID: doc, Origin: shop, URL: shop + "/" + doc, Title: "Shop " + doc, TabID: 7, LastUsed: used, Tools: shopTools}, testutil.WaitShort)
	if err != nil || m.Type != "tools.accepted" {
		t.Fatalf("announce %s: %+v %v", doc, m, err)
	}
}

// listing returns the shop's entry as the agent on A lists it.
func (w *spread) listing(t *testing.T) sitetools.SiteListing {
	t.Helper()
	var out struct{ Sites []sitetools.SiteListing }
	servertest.Structured(t, servertest.CallTool(t, w.agent, "listSiteTools", map[string]any{}), &out)
	for _, s := range out.Sites {
		if s.Site == shop {
			return s
		}
	}
	t.Fatalf("listing has no %s: %+v", shop, out)
	return sitetools.SiteListing{}
}

// waitOpen waits until the agent on A sees n open tabs of the shop.
func (w *spread) waitOpen(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, testutil.WaitShort, func() bool { return w.listing(t).OpenTabs == n }, "A never saw the tabs open on the other instances")
}

func search(q string) map[string]any {
	return map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": q}}
}

// TestCallForwardedToTheInstanceHoldingTheBrowser: an agent on A lists and
// describes the tools of a tab open in a browser on B and calls them there;
// the result comes back, the audit log records the call once, and the
// request id follows it.
func TestCallForwardedToTheInstanceHoldingTheBrowser(t *testing.T) {
	w := newSpread(t, nil)
	announceOn(t, w.brB, "d1", time.Now())
	w.waitOpen(t, 1)
	l := w.listing(t)
	if !l.Online || len(l.Tools) != 2 || l.Title != "Shop d1" {
		t.Fatalf("listing on A of the tab on B: %+v", l)
	}
	def := servertest.CallTool(t, w.agent, "getSiteToolDefinition", map[string]any{"site": shop, "tool": "buy"})
	if def.IsError || !strings.Contains(servertest.ResultText(def), `"item"`) {
		t.Fatalf("definition on A: %s", servertest.ResultText(def))
	}
	ch, cancel := callAsync(w.agent, "callSiteTool", search("tea"))
	defer cancel()
	m, err := w.brB.Expect("call", testutil.WaitShort)
	if err != nil || m.DocumentID != "d1" || m.Gate != "read-only" { // the gate decided on A reaches B's browser
		t.Fatalf("call on B: %+v %v", m, err)
	}
	w.brB.Dispatched(m.ID, "d1")
	w.brB.Result(m.ID, "green tea")
	if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "green tea" {
		t.Fatalf("result on A: %q", servertest.ResultText(res))
	}
	// The page's own error comes back in its words.
	ch, cancel = callAsync(w.agent, "callSiteTool", search("bad"))
	defer cancel()
	m, _ = w.brB.Expect("call", testutil.WaitShort)
	w.brB.Fail(m.ID, "tool_error", "no such aisle")
	wantError(t, awaitCall(t, ch), "no such aisle")
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		var audit struct {
			Entries []struct{ Outcome string } `json:"entries"`
		}
		w.onC.MustJSON("GET", "/api/audit", nil, 200, &audit)
		return len(audit.Entries) == 2
	}, "the audit log never held the two calls once each")
	_, body := w.a.NewClient(t).Do("GET", "/metrics", nil)
	if !strings.Contains(string(body), `tabbridge_forwarded_calls_total{result="ok"} 2`) {
		t.Errorf("metrics on A lack the two forwarded calls")
	}
}

// TestForwardedWriteWaitsForApprovalOnAnotherInstance: a write from the
// agent on A waits for the person, who allows it on C; it then runs in the
// browser on B.
func TestForwardedWriteWaitsForApprovalOnAnotherInstance(t *testing.T) {
	w := newSpread(t, nil)
	announceOn(t, w.brB, "d1", time.Now())
	w.waitOpen(t, 1)
	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "buy", "taskId": w.task, "arguments": map[string]any{"item": "tea"}})
	defer cancel()
	var pending struct {
		Approvals []pendingView `json:"approvals"`
	}
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		w.onC.MustJSON("GET", "/api/approvals", nil, 200, &pending)
		return len(pending.Approvals) == 1
	}, "no request on C")
	w.onC.MustJSON("POST", "/api/approvals/"+pending.Approvals[0].ID+"/answer", map[string]string{"answer": "once"}, 200, nil)
	m, err := w.brB.Expect("call", testutil.WaitShort)
	if err != nil || m.Tool != "buy" {
		t.Fatalf("call on B after the answer on C: %+v %v", m, err)
	}
	w.brB.Result(m.ID, "bought")
	if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "bought" {
		t.Fatalf("result on A: %q", servertest.ResultText(res))
	}
}

// TestForwardedCallLimits: cancel reaches the page on B, the call deadline
// cancels it there as a timeout, and a result over the cap is refused.
func TestForwardedCallLimits(t *testing.T) {
	w := newSpread(t, func(_ int, o *server.Options) { o.CallTimeout = 1500 * time.Millisecond })
	announceOn(t, w.brB, "d1", time.Now())
	w.waitOpen(t, 1)

	ch, cancel := callAsync(w.agent, "callSiteTool", search("slow"))
	m, _ := w.brB.Expect("call", testutil.WaitShort)
	cancel()
	c, err := w.brB.Expect("call.cancel", testutil.WaitShort)
	if err != nil || c.CallID != m.ID || c.Reason != "cancelled" {
		t.Fatalf("cancel on B: %+v %v", c, err)
	}
	<-ch

	ch, cancel = callAsync(w.agent, "callSiteTool", search("slower"))
	defer cancel()
	m, _ = w.brB.Expect("call", testutil.WaitShort)
	c, err = w.brB.Expect("call.cancel", testutil.WaitShort)
	if err != nil || c.CallID != m.ID || c.Reason != "timeout" {
		t.Fatalf("deadline on B: %+v %v", c, err)
	}
	wantError(t, awaitCall(t, ch), "did not finish within")

	ch, cancel = callAsync(w.agent, "callSiteTool", search("big"))
	defer cancel()
	m, _ = w.brB.Expect("call", testutil.WaitShort)
	w.brB.Result(m.ID, strings.Repeat("x", sitetools.MaxResultBytes+1))
	wantError(t, awaitCall(t, ch), "result", "262145")
}

// TestMostRecentTabWinsAcrossInstances: of two browsers, one on A and one
// on B, the call goes to the one whose tab was used last, whichever
// instance holds it, and follows the person's focus.
func TestMostRecentTabWinsAcrossInstances(t *testing.T) {
	w := newSpread(t, nil)
	brA, _ := extBrowser(t, w.a, w.person, "browser-a")
	now := time.Now()
	announceOn(t, brA, "da", now.Add(-time.Minute))
	announceOn(t, w.brB, "db", now)
	w.waitOpen(t, 2)
	run := func(want *bridgetest.Browser, doc string) {
		t.Helper()
		ch, cancel := callAsync(w.agent, "callSiteTool", search("x"))
		defer cancel()
		m, err := want.Expect("call", testutil.WaitShort)
		if err != nil || m.DocumentID != doc {
			t.Fatalf("call went elsewhere than %s: %+v %v", doc, m, err)
		}
		want.Result(m.ID, doc)
		if res := awaitCall(t, ch); servertest.ResultText(res) != doc {
			t.Fatalf("result %q, want %q", servertest.ResultText(res), doc)
		}
	}
	run(w.brB, "db")
	brA.Used("da", now.Add(time.Second))
	run(brA, "da")
	w.brB.Used("db", now.Add(2*time.Second))
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		l := w.listing(t)
		return l.Title == "Shop db"
	}, "A never saw the focus move to B")
	run(w.brB, "db")
}

// callRunningOnB opens a tab in the browser on B and has the agent (on A)
// call it: it returns once the call is in that browser, unanswered.
func (w *spread) callRunningOnB(t *testing.T) chan callOut {
	t.Helper()
	announceOn(t, w.brB, "d1", time.Now())
	w.waitOpen(t, 1)
	ch, cancel := callAsync(w.agent, "callSiteTool", search("slow"))
	t.Cleanup(cancel)
	if _, err := w.brB.Expect("call", testutil.WaitShort); err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestForwardedCallToAKilledInstanceFailsAtOnce: the instance holding the
// browser dies mid-call; the agent's call ends at once with a clear error.
func TestForwardedCallToAKilledInstanceFailsAtOnce(t *testing.T) {
	w := newSpread(t, nil)
	ch := w.callRunningOnB(t)
	killed := time.Now()
	w.b.Server.KillInternal()
	res := awaitCall(t, ch)
	wantError(t, res, "instance", "reconnects")
	if d := time.Since(killed); d > 2*time.Second {
		t.Fatalf("the call ended %v after the kill", d)
	}
}

// TestNewInstanceLearnsWhereTabsAre: a tab announced while its instance
// was alone (no signal sent) is known to an instance started later, which
// pulled the directory before serving: its agent lists and calls it.
func TestNewInstanceLearnsWhereTabsAre(t *testing.T) {
	url := storetest.FreshPostgres(t)
	a := instanceOn(t, url, nil)
	person := a.Person(t, "alice@example.com")
	ws := person.Workspace("Shopping")
	token := person.AgentToken(ws, "laptop")
	person.MustJSON("POST", "/api/sites", map[string]string{"origin": shop, "workspaceId": ws}, 201, nil)
	br, _ := extBrowser(t, a, person, "browser-a")
	announceOn(t, br, "d1", time.Now())
	b := instanceOn(t, url, nil)
	agent := b.MCP(t, token, nil)
	var out struct{ Sites []sitetools.SiteListing }
	servertest.Structured(t, servertest.CallTool(t, agent, "listSiteTools", map[string]any{}), &out)
	if len(out.Sites) != 1 || out.Sites[0].OpenTabs != 1 || !out.Sites[0].Online {
		t.Fatalf("listing on B, started after the tab opened on A: %+v", out.Sites)
	}
	searchAnsweredBy(t, agent, br, "a call from B")
}

// searchAnsweredBy has agent search, br get the call and answer it, and
// the agent read the answer; what names the call in a failure.
func searchAnsweredBy(t *testing.T, agent *mcp.ClientSession, br *bridgetest.Browser, what string) {
	t.Helper()
	ch, cancel := callAsync(agent, "callSiteTool", search("tea"))
	defer cancel()
	m, err := br.Expect("call", testutil.WaitShort)
	if err != nil {
		t.Fatalf("%s never reached the browser: %v", what, err)
	}
	br.Result(m.ID, "tea")
	if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "tea" {
		t.Fatalf("%s: %q", what, servertest.ResultText(res))
	}
}

// TestBrowsersInstanceStopsGracefully: the instance holding the browser
// shuts down mid-call (a rolling restart): the call fails at once with a
// clear error, the others stop routing there, and once the browser has
// reconnected to another instance the agent's next call runs there.
func TestBrowsersInstanceStopsGracefully(t *testing.T) {
	w := newSpread(t, nil)
	ch := w.callRunningOnB(t)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitShort)
		defer cancel()
		w.b.Server.Shutdown(ctx)
	}()
	wantError(t, awaitCall(t, ch), "instance", "reconnects")
	w.waitOpen(t, 0)
	brC, _ := extBrowser(t, w.c, w.onC, "browser-b") // the extension redials through the balancer
	announceOn(t, brC, "d1", time.Now())
	w.waitOpen(t, 1)
	searchAnsweredBy(t, w.agent, brC, "the call after the browser moved to C")
}

// TestSharingReachesBrowsersOnOtherInstances: a site shared through C
// reaches the person's browser held by B (which announces only shared
// sites); unsharing it through C removes its tab from the agent's view.
func TestSharingReachesBrowsersOnOtherInstances(t *testing.T) {
	w := newSpread(t, nil)
	const other = "https://books.example"
	var site struct {
		Site struct{ ID string } `json:"site"`
	}
	w.onC.MustJSON("POST", "/api/sites", map[string]string{"origin": other, "workspaceId": w.ws}, 201, &site)
	for {
		m, err := w.brB.Expect("sites", testutil.WaitShort)
		if err != nil {
			t.Fatalf("the browser on B never heard of the site shared on C: %v", err)
		}
		if len(m.SharedSites) == 2 {
			break
		}
	}
	m, err := w.brB.Announce(bridgetest.Doc{ID: "b1", Origin: other, URL: other + "/", Title: "Books", Tools: shopTools}, testutil.WaitShort)
	if err != nil || m.Type != "tools.accepted" {
		t.Fatalf("announce the newly shared site on B: %+v %v", m, err)
	}
	w.onC.MustJSON("DELETE", "/api/sites/"+site.Site.ID, nil, 204, nil)
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		return w.b.Server.Hub() != nil && len(w.b.Server.Catalog().Candidates(userID(t, w.a, "alice@example.com"), other, "search")) == 0
	}, "B kept the tab of a site unshared on C")
}

// TestPagesSeeBrowsersOnOtherInstances: the person's pages served by C show
// the browser B holds as connected, with its open site.
func TestPagesSeeBrowsersOnOtherInstances(t *testing.T) {
	w := newSpread(t, nil)
	announceOn(t, w.brB, "d1", time.Now())
	w.waitOpen(t, 1)
	var browsers struct {
		Browsers []struct {
			ID        string `json:"id"`
			Connected bool   `json:"connected"`
		} `json:"browsers"`
	}
	w.onC.MustJSON("GET", "/api/browsers", nil, 200, &browsers)
	if len(browsers.Browsers) != 1 || !browsers.Browsers[0].Connected {
		t.Fatalf("browsers as C shows them: %+v", browsers)
	}
	var sites struct {
		Sites []struct {
			OpenIn []struct {
				BrowserID string `json:"browserId"`
				Tabs      int    `json:"tabs"`
			} `json:"openIn"`
		} `json:"sites"`
	}
	w.onC.MustJSON("GET", "/api/sites", nil, 200, &sites)
	if len(sites.Sites) != 1 || len(sites.Sites[0].OpenIn) != 1 || sites.Sites[0].OpenIn[0].BrowserID != "browser-b" {
		t.Fatalf("sites as C shows them: %+v", sites)
	}
}

// TestForwardedCallLogsOneRequestID: the log lines of a forwarded call on
// the instance it arrived at and on the one that ran it share its request id.
func TestForwardedCallLogsOneRequestID(t *testing.T) {
	logs := []*testbin.Log{testbin.NewLog(), testbin.NewLog(), testbin.NewLog()}
	w := newSpread(t, func(i int, o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	announceOn(t, w.brB, "d1", time.Now())
	w.waitOpen(t, 1)
	ch, cancel := callAsync(w.agent, "callSiteTool", search("tea"))
	defer cancel()
	m, _ := w.brB.Expect("call", testutil.WaitShort)
	w.brB.Result(m.ID, "tea")
	awaitCall(t, ch)
	id := regexp.MustCompile(`msg="call forwarded" .*request_id=(\S+)`).FindStringSubmatch(logs[0].String())
	if id == nil || id[1] == "" {
		t.Fatalf("A logged no forwarded call with a request id:\n%s", logs[0].String())
	}
	if !strings.Contains(logs[1].String(), "request_id="+id[1]) || !strings.Contains(logs[1].String(), `msg="forwarded call"`) {
		t.Fatalf("B's log lacks request id %s:\n%s", id[1], logs[1].String())
	}
}

// TestCallRoutedPastAnUnreachableInstance: the instance holding the most
// recently used tab cannot be reached (it died; the directory has not
// heard yet): a new call, which reached nobody, goes to the next tab.
func TestCallRoutedPastAnUnreachableInstance(t *testing.T) {
	w := newSpread(t, nil)
	brA, _ := extBrowser(t, w.a, w.person, "browser-a")
	now := time.Now()
	announceOn(t, brA, "da", now.Add(-time.Minute))
	announceOn(t, w.brB, "db", now)
	w.waitOpen(t, 2)
	ch, cancel := callAsync(w.agent, "callSiteTool", search("x")) // A now has B's targets cached
	defer cancel()
	m, err := w.brB.Expect("call", testutil.WaitShort)
	if err != nil {
		t.Fatal(err)
	}
	w.brB.Result(m.ID, "db")
	awaitCall(t, ch)
	w.b.Server.KillInternal()
	ch, cancel = callAsync(w.agent, "callSiteTool", search("x"))
	defer cancel()
	m, err = brA.Expect("call", testutil.WaitShort)
	if err != nil || m.DocumentID != "da" {
		t.Fatalf("call past the unreachable B: %+v %v", m, err)
	}
	brA.Result(m.ID, "da")
	if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "da" {
		t.Fatalf("result %q", servertest.ResultText(res))
	}
}

// TestCallWaitsForABrowserMovingInstances: in a rolling restart the
// instance holding the browser stops; a call that arrives before the
// browser has reconnected elsewhere waits for it instead of failing, and
// runs once it is back (here on C).
func TestCallWaitsForABrowserMovingInstances(t *testing.T) {
	w := newSpread(t, nil)
	announceOn(t, w.brB, "d1", time.Now())
	w.waitOpen(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitShort)
	defer cancel()
	w.b.Server.Shutdown(ctx)
	w.waitOpen(t, 0)
	ch, stop := callAsync(w.agent, "callSiteTool", search("tea"))
	defer stop()
	brC, _ := extBrowser(t, w.c, w.onC, "browser-b")
	// The call may reach the browser as soon as it is connected, before or
	// after its page has announced again: the announcement is sent without
	// waiting for its answer.
	brC.Send(map[string]any{"type": "tools.announce", "id": "a-d1", "documentId": "d1", "origin": shop, "url": shop + "/d1",
		"title": "Shop d1", "tabId": 7, "lastUsed": time.Now().UnixMilli(), "tools": json.RawMessage(shopTools)})
	m, err := brC.Expect("call", testutil.WaitShort)
	if err != nil {
		t.Fatalf("the waiting call never reached the browser back on C: %v", err)
	}
	brC.Result(m.ID, "tea")
	if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "tea" {
		t.Fatalf("result %q", servertest.ResultText(res))
	}
}
