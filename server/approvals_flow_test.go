package server_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

type pendingView struct {
	ID        string `json:"id"`
	Tool      string `json:"tool"`
	TaskID    string `json:"taskId"`
	Arguments string `json:"arguments"`
}

// pending waits until the person has n pending requests and returns them.
func (w *siteWorld) pending(t *testing.T, n int) []pendingView {
	t.Helper()
	var out struct {
		Approvals []pendingView `json:"approvals"`
	}
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		w.person.MustJSON("GET", "/api/approvals", nil, 200, &out)
		return len(out.Approvals) == n
	}, "the condition never held")
	return out.Approvals
}

func (w *siteWorld) answer(t *testing.T, id, answer string) {
	t.Helper()
	w.person.MustJSON("POST", "/api/approvals/"+id+"/answer", map[string]string{"answer": answer}, 200, nil)
}

// runInBrowser answers the next call in the test browser with result.
func (w *siteWorld) runInBrowser(t *testing.T, result string) {
	t.Helper()
	m, err := w.br.Expect("call", testutil.WaitShort)
	if err != nil {
		t.Fatal(err)
	}
	w.br.Dispatched(m.ID, "d1")
	w.br.Result(m.ID, result)
}

func (w *siteWorld) buy(item string) (chan callOut, context.CancelFunc) {
	return callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "buy", "taskId": w.task, "arguments": map[string]any{"item": item, "qty": 1}})
}

func TestWritesAskThePerson(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		w.announce(t, "d1", time.Now())

		// A read-only call runs without a request.
		ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
		w.runInBrowser(t, "found")
		if res := awaitCall(t, ch); res.IsError {
			t.Fatal(servertest.ResultText(res))
		}
		cancel()
		w.pending(t, 0)

		// A write asks; allowed once, it runs; the identical next call asks again.
		ch, cancel = w.buy("tea")
		p := w.pending(t, 1)
		if p[0].Tool != "buy" || p[0].TaskID != w.task || !strings.Contains(p[0].Arguments, "\"item\": \"tea\"") {
			t.Fatalf("request: %+v", p[0])
		}
		w.answer(t, p[0].ID, "once")
		w.runInBrowser(t, "bought")
		if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "bought" {
			t.Fatalf("after allow once: %s", servertest.ResultText(res))
		}
		cancel()
		ch, cancel = w.buy("tea")
		p2 := w.pending(t, 1)
		if p2[0].ID == p[0].ID {
			t.Fatal("the answered request is still pending")
		}
		// Deny: a result the agent can read, not a protocol error.
		w.answer(t, p2[0].ID, "deny")
		wantError(t, awaitCall(t, ch), "denied", "Do not repeat")
		cancel()

		// Always allow: runs now, and the next call runs without asking.
		ch, cancel = w.buy("milk")
		p3 := w.pending(t, 1)
		w.answer(t, p3[0].ID, "always")
		w.runInBrowser(t, "bought milk")
		awaitCall(t, ch)
		cancel()
		ch, cancel = w.buy("sugar")
		w.runInBrowser(t, "bought sugar")
		if res := awaitCall(t, ch); res.IsError {
			t.Fatal(servertest.ResultText(res))
		}
		cancel()
		var grants struct {
			Grants []struct{ ID, Tool, Site string } `json:"grants"`
		}
		w.person.MustJSON("GET", "/api/grants", nil, 200, &grants)
		if len(grants.Grants) != 1 || grants.Grants[0].Tool != "buy" || grants.Grants[0].Site != shop {
			t.Fatalf("grants: %+v", grants)
		}
		// Revoked, the grant asks again.
		w.person.MustJSON("DELETE", "/api/grants/"+grants.Grants[0].ID, nil, 204, nil)
		ch, cancel = w.buy("salt")
		p4 := w.pending(t, 1)
		w.answer(t, p4[0].ID, "deny")
		awaitCall(t, ch)
		cancel()

		// Every decision is in the audit log with its source.
		var audit struct {
			Entries []struct{ Tool, Decision, DecidedBy, Outcome string } `json:"entries"`
		}
		w.person.MustJSON("GET", "/api/audit", nil, 200, &audit)
		var got []string
		for _, e := range audit.Entries {
			got = append(got, e.Tool+":"+e.Decision+":"+e.Outcome)
		}
		want := "buy:asked:denied buy:grant:ok buy:asked:ok buy:asked:denied buy:asked:ok search:read-only:ok"
		if strings.Join(got, " ") != want {
			t.Fatalf("audit:\n got %s\nwant %s", strings.Join(got, " "), want)
		}
	})
}

func TestIdenticalParallelWritesShareOneQuestion(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	var chans []chan callOut
	for i := 0; i < 3; i++ {
		ch, cancel := w.buy("tea")
		defer cancel()
		chans = append(chans, ch)
	}
	p := w.pending(t, 1)
	// All three wait on the one request (the gate counts them).
	testutil.Eventually(t, testutil.WaitShort, func() bool { return server.Waiters(w.env.Server, p[0].ID) == 3 }, "the condition never held")
	w.answer(t, p[0].ID, "once")
	for i := 0; i < 3; i++ {
		w.runInBrowser(t, "ok")
	}
	for _, ch := range chans {
		if res := awaitCall(t, ch); res.IsError {
			t.Fatal(servertest.ResultText(res))
		}
	}
}

func TestUnansweredRequestExpiresWithProgress(t *testing.T) {
	var progress atomic.Int32
	w := newSiteWorld(t, storetest.SQLite, func(o *server.Options) {
		o.ApprovalWindow = 600 * time.Millisecond
		o.ProgressInterval = 50 * time.Millisecond
	}, &servertest.MCPOptions{OnProgress: func(*mcp.ProgressNotificationClientRequest) { progress.Add(1) }})
	w.announce(t, "d1", time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := &mcp.CallToolParams{Name: "callSiteTool", Arguments: map[string]any{"site": shop, "tool": "buy", "taskId": w.task, "arguments": map[string]any{"item": "tea"}}}
	params.SetProgressToken("p-1")
	res, err := w.agent.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, res, "Nobody answered", "was not run")
	if n := progress.Load(); n < 3 {
		t.Fatalf("%d progress notifications during a 600ms wait at 50ms pace", n)
	}
	w.pending(t, 0)
}

func TestCancelledCallWithdrawsItsRequest(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	events := w.env.Server.Live().Subscribe
	ev, stop := events(w.env.Server.UserIDForTest(t, "alice@example.com"))
	defer stop()
	ch, cancel := w.buy("tea")
	w.pending(t, 1)
	cancel()
	<-ch
	w.pending(t, 0)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-ev:
			if e.Type == "approval.withdrawn" {
				return
			}
		case <-deadline:
			t.Fatal("no approval.withdrawn event")
		}
	}
}

func TestAgentTokenCannotAnswerOrGrant(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	ch, cancel := w.buy("tea")
	defer cancel()
	p := w.pending(t, 1)
	agent := w.env.Agent(t, w.token)
	agent.CSRF = w.person.CSRF
	for _, path := range []string{"/api/approvals/" + p[0].ID + "/answer", "/api/grants"} {
		status, body := agent.Do("POST", path, map[string]string{"answer": "always"})
		if status != 401 && status != 403 && status != 405 {
			t.Fatalf("agent token on %s: %d %s", path, status, body)
		}
	}
	if status, _ := agent.Do("GET", "/api/approvals", nil); status != 401 {
		t.Fatalf("agent token lists approvals: %d", status)
	}
	// Nothing the agent sent changed the request; the person still can answer.
	still := w.pending(t, 1)
	if still[0].ID != p[0].ID {
		t.Fatal("request changed")
	}
	w.answer(t, p[0].ID, "deny")
	awaitCall(t, ch)
}

func TestAskForEveryToolSetting(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	var sites struct {
		Sites []struct {
			ID     string
			AskAll bool
		} `json:"sites"`
	}
	w.person.MustJSON("GET", "/api/sites", nil, 200, &sites)
	w.person.MustJSON("PATCH", "/api/sites/"+sites.Sites[0].ID, map[string]bool{"askAll": true}, 200, nil)
	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "taskId": w.task, "arguments": map[string]any{"q": "tea"}})
	defer cancel()
	p := w.pending(t, 1)
	if p[0].Tool != "search" {
		t.Fatalf("request for %s", p[0].Tool)
	}
	w.answer(t, p[0].ID, "once")
	w.runInBrowser(t, "found")
	awaitCall(t, ch)
}

func TestRequestsFromAKilledServerAreWithdrawnAtStart(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	_, cancel := w.buy("tea")
	defer cancel()
	w.pending(t, 1)
	// A second server on the same database starts (the first one "died").
	second, err := server.New(server.Options{DB: w.env.DB, Key: w.env.Opts.Key, PublicURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Shutdown(context.Background())
	var out struct {
		Approvals []pendingView `json:"approvals"`
	}
	w.person.MustJSON("GET", "/api/approvals", nil, 200, &out)
	if len(out.Approvals) != 0 {
		t.Fatalf("stale request still pending: %+v", out.Approvals)
	}
}

func TestShutdownEndsWaitingCallsWithAClearAnswer(t *testing.T) {
	// The client retries a dropped event stream, as standard clients do: the
	// answer and the end of the session travel on different connections.
	w := newSiteWorld(t, storetest.SQLite, nil, &servertest.MCPOptions{Retries: 2})
	w.announce(t, "d1", time.Now())
	ch, cancel := w.buy("tea")
	defer cancel()
	w.pending(t, 1)
	done := make(chan error, 1)
	go func() {
		ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		done <- w.env.Server.Shutdown(ctx)
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("the waiting call got a protocol error instead of an answer: %v", o.err)
		}
		wantError(t, o.res, "shutting down")
	case <-time.After(15 * time.Second):
		t.Fatal("a waiting call hung through shutdown")
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func TestBadgeCountReachesBrowsersAsTheyConnect(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	ch, cancel := w.buy("tea")
	defer cancel()
	w.pending(t, 1)
	// The connected browser heard of the new request.
	m, err := w.br.Expect("approvals", testutil.WaitShort)
	if err != nil || m.Pending != 1 || m.Event != "approval.created" {
		t.Fatalf("badge on the open socket: %+v %v", m, err)
	}
	// A browser that connects later learns the count at once, right after
	// its welcome.
	late, _, err := bridgetest.Dial(context.Background(), w.env.URL, ticketFor(t, w.person), extOrigin)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Conn.Close()
	if _, err := late.Hello("browser-two", "Chrome two", "1.2.3", testutil.WaitShort); err != nil {
		t.Fatal(err)
	}
	m, err = late.Next(testutil.WaitShort)
	if err != nil || m.Type != "approvals" || m.Pending != 1 {
		t.Fatalf("badge for a browser that connects later: %+v %v", m, err)
	}
	p := w.pending(t, 1)
	w.answer(t, p[0].ID, "deny")
	awaitCall(t, ch)
	m, err = late.Expect("approvals", testutil.WaitShort)
	if err != nil || m.Pending != 0 || m.Event != "approval.decided" {
		t.Fatalf("badge after the answer: %+v %v", m, err)
	}
}

// TestMovingASiteWithdrawsItsRequestsAndGrants: while a call waits for the
// person, the site moves to another workspace: the first workspace's request
// is withdrawn and its grants revoked, and its agent is told why and what to
// do next.
func TestMovingASiteWithdrawsItsRequestsAndGrants(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	ch, cancel := w.buy("tea")
	defer cancel()
	w.answer(t, w.pending(t, 1)[0].ID, "always")
	w.runInBrowser(t, "bought")
	if res := awaitCall(t, ch); res.IsError {
		t.Fatal(servertest.ResultText(res))
	}

	var sites struct {
		Sites []struct{ ID string } `json:"sites"`
	}
	w.person.MustJSON("GET", "/api/sites", nil, 200, &sites)
	w.person.MustJSON("PATCH", "/api/sites/"+sites.Sites[0].ID, map[string]bool{"askAll": true}, 200, nil)
	ch, cancel = callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "taskId": w.task,
		"arguments": map[string]any{"q": "tea"}})
	defer cancel()
	w.pending(t, 1)
	other := w.person.Workspace("Elsewhere")
	w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": shop, "workspaceId": other}, 200, nil)
	wantError(t, awaitCall(t, ch), "stopped sharing https://shop.example with this workspace", "listSiteTools")
	w.pending(t, 0)
	var grants struct {
		Grants []struct{ WorkspaceID string } `json:"grants"`
	}
	w.person.MustJSON("GET", "/api/grants", nil, 200, &grants)
	if len(grants.Grants) != 0 {
		t.Fatalf("the first workspace's grants survived the move: %+v", grants.Grants)
	}
}
