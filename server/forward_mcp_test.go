package server_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// roundRobin is a load balancer in a RoundTripper: each request goes to
// the next instance, whatever session it carries.
type roundRobin struct {
	hosts []string
	next  atomic.Int64
	token string
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	u, _ := url.Parse(rr.hosts[int(rr.next.Add(1))%len(rr.hosts)])
	r.URL.Host, r.Host = u.Host, u.Host
	r.Header.Set("Authorization", "Bearer "+rr.token)
	return http.DefaultTransport.RoundTrip(r)
}

// sessionPost posts one JSON-RPC message to env's /mcp with a session id.
func sessionPost(t *testing.T, env *servertest.Env, token, session, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", env.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMCPBehindRoundRobin: a real MCP client behind a round-robin balancer
// over three instances — every request, the GET stream among them, lands
// on the next instance — lists and calls, with progress, and cancels.
func TestMCPBehindRoundRobin(t *testing.T) {
	w := newSpread(t, nil)
	announceOn(t, w.brB, "d1", time.Now())
	w.waitOpen(t, 1)
	rr := &roundRobin{hosts: []string{w.a.URL, w.b.URL, w.c.URL}, token: w.token}
	client := mcp.NewClient(&mcp.Implementation{Name: "rr", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitMedium)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.a.URL + "/mcp", HTTPClient: &http.Client{Transport: rr}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 6 {
		ch, cancel := callAsync(cs, "callSiteTool", search("tea"))
		m, err := w.brB.Expect("call", testutil.WaitShort)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if i == 5 {
			cancel() // a cancel notification, through whichever instance, reaches the page
			if c, err := w.brB.Expect("call.cancel", testutil.WaitShort); err != nil || c.CallID != m.ID {
				t.Fatalf("cancel: %+v %v", c, err)
			}
			<-ch
			break
		}
		w.brB.Result(m.ID, "tea")
		if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "tea" {
			t.Fatalf("call %d: %q", i, servertest.ResultText(res))
		}
		cancel()
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("list tools: %v", err)
	}
}

// TestMCPSessionOfAnotherInstance: a request carrying B's session id sent
// to A is served (by B); once B is gone, the same is served by A in a
// session A opens for it (a client need not start anew); so is an id of an
// instance never seen.
func TestMCPSessionOfAnotherInstance(t *testing.T) {
	w := newSpread(t, nil)
	onB := w.b.MCP(t, w.token, nil)
	sid := onB.ID()
	if !strings.HasPrefix(sid, w.b.Server.Instance()+".") {
		t.Fatalf("session id %q does not name its instance %s", sid, w.b.Server.Instance())
	}
	status, body := sessionPost(t, w.a, w.token, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	if status != 200 || !strings.Contains(body, "callSiteTool") {
		t.Fatalf("B's session through A: %d %s", status, body)
	}
	if status, body := sessionPost(t, w.a, "tb_wrong", sid, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`); status != 401 {
		t.Fatalf("B's session through A with a bad token: %d %s", status, body)
	}
	if status, body := sessionPost(t, w.a, w.token, "ghost."+sid, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); status != 200 || !strings.Contains(body, "callSiteTool") {
		t.Fatalf("a session of an instance never seen: %d %s, want it resumed on A", status, body)
	}
	sctx, cancel := context.WithTimeout(context.Background(), testutil.WaitShort)
	defer cancel()
	w.b.Server.Shutdown(sctx)
	if status, body := sessionPost(t, w.a, w.token, sid, `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`); status != 200 || !strings.Contains(body, "callSiteTool") {
		t.Fatalf("B's session once B stopped: %d %s, want it resumed on A", status, body)
	}
}

// TestAgentGoneThroughAnotherInstance: an agent whose request for B's
// session went through A, and who goes away without cancelling (closes
// its connection, as real clients do on their own timeout), withdraws its
// approval request as on one instance.
func TestAgentGoneThroughAnotherInstance(t *testing.T) {
	w := newSpread(t, func(_ int, o *server.Options) { o.ApprovalGrace = 100 * time.Millisecond })
	announceOn(t, w.brB, "d1", time.Now())
	sid := w.b.MCP(t, w.token, nil).ID()
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"callSiteTool","arguments":{"site":"` + shop +
		`","tool":"buy","taskId":"` + w.task + `","arguments":{"item":"tea"}}}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", w.a.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	var pending struct {
		Approvals []pendingView `json:"approvals"`
	}
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		w.onC.MustJSON("GET", "/api/approvals", nil, 200, &pending)
		return len(pending.Approvals) == 1
	}, "the write never asked the person")
	hangUp()
	<-done
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		w.onC.MustJSON("GET", "/api/approvals", nil, 200, &pending)
		return len(pending.Approvals) == 0
	}, "the request of an agent gone through A still waits for the person")
}

// TestProgressThroughAnotherInstance: a call on B's session whose request
// went through A gets B's progress notifications as they are sent (the
// proxied answer streams), not all at the end.
func TestProgressThroughAnotherInstance(t *testing.T) {
	w := newSpread(t, func(_ int, o *server.Options) { o.ProgressInterval = 50 * time.Millisecond })
	announceOn(t, w.brB, "d1", time.Now())
	w.waitOpen(t, 1)
	progress := make(chan struct{}, 100)
	client := mcp.NewClient(&mcp.Implementation{Name: "moved", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress <- struct{}{} }})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitMedium)
	defer cancel()
	moved := &moveAfterFirst{rr: &roundRobin{hosts: []string{w.b.URL}, token: w.token}, to: w.a.URL}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.b.URL + "/mcp", HTTPClient: &http.Client{Transport: moved}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "callSiteTool", Arguments: search("slow")}
	params.SetProgressToken("p-1")
	out := make(chan callOut, 1)
	go func() { res, err := cs.CallTool(ctx, params); out <- callOut{res, err} }()
	m, err := w.brB.Expect("call", testutil.WaitShort)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // while the page still works
		testutil.RequireReceive(t, testutil.WaitShort, progress)
	}
	w.brB.Result(m.ID, "done")
	if res := awaitCall(t, out); servertest.ResultText(res) != "done" {
		t.Fatalf("result %q", servertest.ResultText(res))
	}
}
