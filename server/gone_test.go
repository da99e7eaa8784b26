package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/live"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// rawPost sends one MCP POST over a TCP connection of its own, as an agent
// whose process may die at any moment would, and returns the connection
// without reading the answer. It carries no progress token.
func rawPost(t *testing.T, w *siteWorld, sessionID, body string) net.Conn {
	t.Helper()
	host := strings.TrimPrefix(w.env.URL, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s",
		host, w.token, sessionID, len(body), body)
	return conn
}

// rawBuy is a callSiteTool of the write "buy" sent with rawPost.
func rawBuy(t *testing.T, w *siteWorld, item string) net.Conn {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"site": shop, "tool": "buy", "taskId": w.task, "arguments": map[string]any{"item": item, "qty": 1}})
	return rawPost(t, w, w.agent.ID(), `{"jsonrpc":"2.0","id":"raw-1","method":"tools/call","params":{"name":"callSiteTool","arguments":`+string(args)+`}}`)
}

// waitingBuy opens the shop's page d1, sends a raw "buy" of tea and waits
// for its request: it returns the person's live events (subscribed before
// the call), the call's connection (still open) and the request.
func (w *siteWorld) waitingBuy(t *testing.T) (<-chan live.Event, net.Conn, pendingView) {
	t.Helper()
	w.announce(t, "d1", time.Now())
	ev := w.events(t)
	conn := rawBuy(t, w, "tea")
	return ev, conn, w.pending(t, 1)[0]
}

// hungUpBuy is a waitingBuy whose agent then hung up without a word: it
// returns once the server has dropped the call's waiter.
func (w *siteWorld) hungUpBuy(t *testing.T) (<-chan live.Event, pendingView) {
	t.Helper()
	ev, conn, p := w.waitingBuy(t)
	conn.Close()
	nextEvent(t, ev, "approval.updated")
	return ev, p
}

// nextCallIsSearch calls the read-only search and checks it is the next
// call the browser gets: the write before it was never sent. why says what
// was done to the write.
func (w *siteWorld) nextCallIsSearch(t *testing.T, why string) {
	t.Helper()
	ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
	defer cancel()
	m, err := w.br.Expect("call", testutil.WaitShort)
	if err != nil || m.Tool != "search" {
		t.Fatalf("the browser got %+v (%v) after %s; want the search, never the buy", m, err, why)
	}
	w.br.Dispatched(m.ID, "d1")
	w.br.Result(m.ID, `"found"`)
	awaitCall(t, ch)
}

type requestView struct {
	ID              string     `json:"id"`
	Status          string     `json:"status"`
	Waiters         int        `json:"waiters"`
	AgentGoneAt     *time.Time `json:"agentGoneAt"`
	WithdrawnReason string     `json:"withdrawnReason"`
}

// taskRequests reads every request of the world's task.
func (w *siteWorld) taskRequests(t *testing.T) []requestView {
	t.Helper()
	var out struct {
		Approvals []requestView `json:"approvals"`
	}
	w.person.MustJSON("GET", "/api/tasks/"+w.task+"/approvals", nil, 200, &out)
	return out.Approvals
}

// events subscribes to the person's live events.
func (w *siteWorld) events(t *testing.T) <-chan live.Event {
	t.Helper()
	ev, stop := w.env.Server.Live().Subscribe(w.env.Server.UserIDForTest(t, "alice@example.com"))
	t.Cleanup(stop)
	return ev
}

// nextEvent waits for an event of type typ and returns when it came.
func nextEvent(t *testing.T, ev <-chan live.Event, typ string) time.Time {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-ev:
			if e.Type == typ {
				return time.Now()
			}
		case <-deadline:
			t.Fatalf("no %s event", typ)
		}
	}
}

// auditOf returns the person's audit entries of one tool, newest first.
func (w *siteWorld) auditOf(t *testing.T, tool string) []auditView {
	t.Helper()
	var out struct {
		Entries []auditView `json:"entries"`
	}
	w.person.MustJSON("GET", "/api/audit?tool="+tool, nil, 200, &out)
	return out.Entries
}

type auditView struct {
	ID        string `json:"id"`
	Outcome   string `json:"outcome"`
	Error     string `json:"error"`
	RequestID string `json:"requestId"`
	Result    string `json:"result"`
}

// TestAgentThatHangsUpNeverHasItsWriteRun: an agent that closes its TCP
// connection without notifications/cancelled is dropped within a second,
// with the shipped defaults and no progress token; the request shows that
// the agent stopped waiting, and Allow once then runs nothing and says so.
func TestAgentThatHangsUpNeverHasItsWriteRun(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		ev, conn, p := w.waitingBuy(t)
		if rs := w.taskRequests(t); rs[0].Waiters != 1 || rs[0].AgentGoneAt != nil {
			t.Fatalf("a waited-on request: %+v", rs[0])
		}
		closed := time.Now()
		conn.Close()
		at := nextEvent(t, ev, "approval.updated")
		if took := at.Sub(closed); took > time.Second {
			t.Fatalf("the waiter was dropped %v after the agent hung up; want within 1s", took)
		} else {
			t.Logf("dropped %v after the agent hung up", took)
		}
		if n := server.Waiters(w.env.Server, p.ID); n != 0 {
			t.Fatalf("%d calls still wait on the request", n)
		}
		rs := w.taskRequests(t)
		if rs[0].Status != "pending" || rs[0].Waiters != 0 || rs[0].AgentGoneAt == nil {
			t.Fatalf("request after the agent went: %+v; want pending, no waiters, marked gone", rs[0])
		}
		status, body := w.person.Do("POST", "/api/approvals/"+p.ID+"/answer", map[string]string{"answer": "once"})
		if code, msg := servertest.ErrorOf(body); status != http.StatusConflict || code != "agent_gone" || !strings.Contains(msg, "nothing was run") {
			t.Fatalf("answering a request nobody waits on: %d %s", status, body)
		}
		if rs := w.taskRequests(t); rs[0].Status != "withdrawn" || rs[0].WithdrawnReason != "gone" {
			t.Fatalf("request after the late answer: %+v", rs[0])
		}
		w.nextCallIsSearch(t, "the agent hung up")
		if a := w.auditOf(t, "buy"); len(a) != 1 || a[0].Outcome != "gone" {
			t.Fatalf("audit of the abandoned buy: %+v", a)
		}
	})
}

// TestRetryWithinTheGraceRejoinsTheRequest: a client that timed out and
// calls again the same way finds the request it left, not a second card;
// Allow once then runs the call once, and the person sees its result.
func TestRetryWithinTheGraceRejoinsTheRequest(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		ev, p := w.hungUpBuy(t)
		ch, cancel := w.buy("tea")
		defer cancel()
		nextEvent(t, ev, "approval.updated")
		rs := w.taskRequests(t)
		if len(rs) != 1 || rs[0].ID != p.ID || rs[0].Waiters != 1 || rs[0].AgentGoneAt != nil {
			t.Fatalf("requests after the retry: %+v; want the first one, waited on again", rs)
		}
		w.answer(t, p.ID, "once")
		w.runInBrowser(t, `"bought 1 tea"`)
		if res := awaitCall(t, ch); res.IsError {
			t.Fatal(servertest.ResultText(res))
		}
		nextEvent(t, ev, "call.finished")
		a := w.auditOf(t, "buy")
		if len(a) != 2 || a[0].Outcome != "ok" || a[0].RequestID != p.ID || a[0].Result != `"bought 1 tea"` || a[1].Outcome != "gone" {
			t.Fatalf("audit: %+v; want the run with its request and result, and the call that went away", a)
		}
	})
}

// TestRequestNobodyCameBackToIsWithdrawnAfterTheGrace: after the grace the
// request is withdrawn, with the reason the person reads.
func TestRequestNobodyCameBackToIsWithdrawnAfterTheGrace(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, func(o *server.Options) { o.ApprovalGrace = 300 * time.Millisecond }, nil)
	ev, conn, _ := w.waitingBuy(t)
	conn.Close()
	nextEvent(t, ev, "approval.withdrawn")
	if rs := w.taskRequests(t); rs[0].Status != "withdrawn" || rs[0].WithdrawnReason != "gone" {
		t.Fatalf("request after the grace: %+v", rs[0])
	}
	_, body := w.person.Do("GET", "/tasks/"+w.task, nil)
	if !strings.Contains(string(body), "Withdrawn: the agent stopped waiting") {
		t.Fatalf("the task page does not say why the request was withdrawn:\n%s", body)
	}
}

// TestDeletedSessionDropsItsWaiter: ending the MCP session (DELETE) drops
// the calls waiting in it, though their connections stay open.
func TestDeletedSessionDropsItsWaiter(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	ev, _, p := w.waitingBuy(t)
	req, _ := http.NewRequest("DELETE", w.env.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Mcp-Session-Id", w.agent.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	deleted := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	at := nextEvent(t, ev, "approval.updated")
	if took := at.Sub(deleted); took > time.Second {
		t.Fatalf("dropped %v after the session ended", took)
	}
	if n := server.Waiters(w.env.Server, p.ID); n != 0 {
		t.Fatalf("%d calls still wait after the session ended", n)
	}
}

// TestWatchedConnectionServesTheNextRequest: watching an MCP POST's
// connection takes no byte from it and leaves it no read deadline, so the
// next request on the kept-alive connection is answered.
func TestWatchedConnectionServesTheNextRequest(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	conn := rawPost(t, w, w.agent.ID(), `{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{"name":"listTasks","arguments":{}}}`)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the next request on the connection: %v %v", resp, err)
	}
}

// TestAnswerJustAfterTheHangUpRunsNothing: an answer that lands while the
// server still waits to learn whether the agent cancelled or left (the
// moment after its connection closed) does not dispatch the call either.
func TestAnswerJustAfterTheHangUpRunsNothing(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		ev, conn, p := w.waitingBuy(t)
		conn.Close()
		// At once: in the common case the waiter still counts, so the answer is taken.
		status, body := w.person.Do("POST", "/api/approvals/"+p.ID+"/answer", map[string]string{"answer": "once"})
		if status != http.StatusOK && status != http.StatusConflict {
			t.Fatalf("answer: %d %s", status, body)
		}
		nextEvent(t, ev, "call.finished")
		if a := w.auditOf(t, "buy"); len(a) != 1 || a[0].Outcome != "gone" {
			t.Fatalf("audit: %+v (answer %d)", a, status)
		}
		w.nextCallIsSearch(t, fmt.Sprintf("an answer to a gone agent (answer %d)", status))
		t.Logf("answer status %d", status)
	})
}

// TestAllowedCallLooksAtTheConnectionItself: the agent hung up and the
// person allowed its call before the connection's watch (its own goroutine,
// here held as a loaded machine can delay it) reported the hang-up. The
// answer is taken, but before dispatching the call looks at the connection
// itself: the write is never sent, and the call is recorded as gone.
func TestAllowedCallLooksAtTheConnectionItself(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	defer server.SetHoldGoneWatch(func() { <-release })()
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the world's own clean-up
	ev, conn, p := w.waitingBuy(t)
	conn.Close()
	status, body := w.person.Do("POST", "/api/approvals/"+p.ID+"/answer", map[string]string{"answer": "once"})
	if status != http.StatusOK {
		t.Fatalf("answer: %d %s; want it taken, the watch has not reported the hang-up", status, body)
	}
	nextEvent(t, ev, "call.finished")
	if a := w.auditOf(t, "buy"); len(a) != 1 || a[0].Outcome != "gone" {
		t.Fatalf("audit: %+v", a)
	}
	w.nextCallIsSearch(t, "an answer that came before the watch reported the hang-up")
	once.Do(func() { close(release) })
}

// TestLateCancelStillWithdraws: a client's cancel that arrives after its
// connection closed and the call counted as gone still withdraws the
// request at once, as a cancel does.
func TestLateCancelStillWithdraws(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	ev, p := w.hungUpBuy(t)
	late := rawPost(t, w, w.agent.ID(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"raw-1","reason":"the person pressed stop"}}`)
	resp, err := http.ReadResponse(bufio.NewReader(late), nil)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the cancel: %v %v", resp, err)
	}
	nextEvent(t, ev, "approval.withdrawn")
	if rs := w.taskRequests(t); rs[0].ID != p.ID || rs[0].Status != "withdrawn" || rs[0].WithdrawnReason != "cancelled" {
		t.Fatalf("request after the late cancel: %+v", rs[0])
	}
}

// TestAnotherTokensCancelDoesNotTouchTheCall: a cancel naming the call's
// session and id but sent with another agent token withdraws nothing.
func TestAnotherTokensCancelDoesNotTouchTheCall(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	_, p := w.hungUpBuy(t)
	other := *w
	other.token = w.person.AgentToken(w.ws, "another agent")
	late := rawPost(t, &other, w.agent.ID(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"raw-1","reason":"stop"}}`)
	resp, err := http.ReadResponse(bufio.NewReader(late), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if rs := w.taskRequests(t); rs[0].ID != p.ID || rs[0].Status != "pending" {
		t.Fatalf("another token's cancel changed the request: %+v (HTTP %d)", rs[0], resp.StatusCode)
	}
}

// TestCancelAfterATimeoutKeepsTheRequest: a client whose call timed out
// (its cancel says so) and which then cancels the same call again as it
// cleans up (OpenCode aborts the turn's signal, and the TypeScript SDK
// sends a second cancel, "AbortError") still has its request kept for the
// grace: a retry rejoins it, as after any timeout.
func TestCancelAfterATimeoutKeepsTheRequest(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	ev, conn, p := w.waitingBuy(t)
	cancelled := func(reason string) {
		t.Helper()
		c := rawPost(t, w, w.agent.ID(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"raw-1","reason":`+strconv.Quote(reason)+`}}`)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("the cancel %q: %v %v", reason, resp, err)
		}
	}
	cancelled("McpError: MCP error -32001: Request timed out")
	nextEvent(t, ev, "approval.updated")
	conn.Close()
	cancelled("AbortError: The operation was aborted.")
	if rs := w.taskRequests(t); len(rs) != 1 || rs[0].ID != p.ID || rs[0].Status != "pending" || rs[0].AgentGoneAt == nil {
		t.Fatalf("request after the timeout and the clean-up's cancel: %+v; want it kept for a retry", rs)
	}
	ch, cancel := w.buy("tea")
	defer cancel()
	nextEvent(t, ev, "approval.updated")
	if rs := w.taskRequests(t); len(rs) != 1 || rs[0].ID != p.ID || rs[0].Waiters != 1 {
		t.Fatalf("requests after the retry: %+v; want the first one, waited on again", rs)
	}
	w.answer(t, p.ID, "once")
	w.runInBrowser(t, `"bought 1 tea"`)
	if res := awaitCall(t, ch); res.IsError {
		t.Fatal(servertest.ResultText(res))
	}
}
