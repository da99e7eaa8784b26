package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// retrying makes the test agent retry a dropped event stream, as real
// clients do: the revoked session's streams end once its calls answered.
var retrying = &servertest.MCPOptions{Retries: 3}

// revokedText is what a call of an agent whose access was taken away reads.
const revokedText = "the person took away this agent's access"

// agentWork is what an agent has going when the person takes its access
// away: a read-only call running in the page, and a write waiting for the
// person.
type agentWork struct {
	search, buy chan callOut
	inPage      string // the browser's id of the search
}

// startWork starts an agentWork through cs, in the world's page d1 (its
// write buys item), and returns once the search runs in the page and the
// write waits in the inbox with pending others.
func (w *siteWorld) startWork(t *testing.T, cs *mcp.ClientSession, item string, pending int) agentWork {
	t.Helper()
	var a agentWork
	a.search, _ = callAsync(cs, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
	m, err := w.br.Expect("call", testutil.WaitShort)
	if err != nil || m.Tool != "search" {
		t.Fatalf("the search did not reach the page: %+v %v", m, err)
	}
	w.br.Dispatched(m.ID, "d1")
	a.inPage = m.ID
	a.buy, _ = callAsync(cs, "callSiteTool", map[string]any{"site": shop, "tool": "buy", "taskId": w.task, "arguments": map[string]any{"item": item, "qty": 1}})
	w.pending(t, pending+1)
	return a
}

// endedByRevocation checks that the work ended as it must once the agent's
// access was taken away: the page was told to cancel the search, both calls
// answered the agent with the revocation's words (not with the end of a
// stream the session's close cut: see ownStrings and answerLinger), the
// inbox is empty, and no MCP session is left open on env.
func (w *siteWorld) endedByRevocation(t *testing.T, env *servertest.Env, a agentWork) {
	t.Helper()
	c, err := w.br.Expect("call.cancel", testutil.WaitShort)
	if err != nil || c.CallID != a.inPage {
		t.Fatalf("the search running in the page was not cancelled: %+v %v", c, err)
	}
	for _, ch := range []chan callOut{a.search, a.buy} {
		wantError(t, awaitCall(t, ch), revokedText, "tell the person")
	}
	w.pending(t, 0)
	testutil.Eventually(t, testutil.WaitShort, func() bool { return sessionCount(env) == 0 }, "the agent's MCP sessions stay open")
}

// tokenID is the id of the world's only agent token.
func (w *siteWorld) tokenID(t *testing.T) string {
	t.Helper()
	var out struct {
		Tokens []struct{ ID string } `json:"tokens"`
	}
	w.person.MustJSON("GET", "/api/workspaces/"+w.ws+"/tokens", nil, 200, &out)
	if len(out.Tokens) != 1 {
		t.Fatalf("tokens: %+v", out.Tokens)
	}
	return out.Tokens[0].ID
}

// TestRevokingAnAgentEndsWhatItStarted: revoking an agent token ends the
// agent's calls — one running in the page is cancelled there, a write
// waiting for the person is withdrawn, and both tell the agent why and what
// to do — withdraws the write it had left waiting for the grace, and closes
// its MCP session, which is refused afterwards. Before, all of it went on:
// the write stayed in the inbox for the person to allow.
func TestRevokingAnAgentEndsWhatItStarted(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, retrying)
		w.hungUpBuy(t) // a write of tea its agent left for the grace
		work := w.startWork(t, w.agent, "coffee", 1)
		w.person.MustJSON("DELETE", "/api/workspaces/"+w.ws+"/tokens/"+w.tokenID(t), nil, 204, nil)
		w.endedByRevocation(t, w.env, work)
		for _, r := range w.taskRequests(t) {
			if r.Status != "withdrawn" || r.WithdrawnReason != "revoked" {
				t.Fatalf("a request of the revoked agent: %+v, want withdrawn as revoked", r)
			}
		}
		if e := w.auditOf(t, "search"); len(e) != 1 || e[0].Outcome != "revoked" {
			t.Fatalf("the search's audit entry: %+v, want the outcome revoked", e)
		}
		ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitShort)
		defer cancel()
		if _, err := w.agent.CallTool(ctx, &mcp.CallToolParams{Name: "listTasks", Arguments: map[string]any{}}); err == nil {
			t.Fatal("the revoked agent's session still answers")
		}
	})
}

// TestRevokingAConnectedAppEndsWhatItStarted: revoking an OAuth client's
// grant does the same, and the revoking request does not wait for the
// session to close (it waited for every running call, a write pending
// approval among them, which kept the person's click hanging for minutes).
func TestRevokingAConnectedAppEndsWhatItStarted(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	cs, _, err := w.env.OAuthMCP(t, "", w.person.Allow(w.ws))
	if err != nil {
		t.Fatal(err)
	}
	w.agent.Close() // the world's token agent: only the app's session stays open
	work := w.startWork(t, cs, "coffee", 0)
	var list struct {
		Clients []struct{ ID string } `json:"clients"`
	}
	w.person.MustJSON("GET", "/api/workspaces/"+w.ws+"/clients", nil, 200, &list)
	w.person.MustJSON("DELETE", "/api/workspaces/"+w.ws+"/clients/"+list.Clients[0].ID, nil, 204, nil)
	w.endedByRevocation(t, w.env, work) // OAuthMCP's client does not retry its stream
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	testutil.RequireReceive(t, testutil.WaitShort, ended)
}

// TestDeletingAWorkspaceEndsItsAgentsWork: deleting a workspace ends what
// its agents started, as revoking them does; their sessions stayed open
// until their idle timeout, and a write waited the whole approval window.
func TestDeletingAWorkspaceEndsItsAgentsWork(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, retrying)
	w.announce(t, "d1", time.Now())
	work := w.startWork(t, w.agent, "coffee", 0)
	w.person.MustJSON("DELETE", "/api/workspaces/"+w.ws, nil, 204, nil)
	w.endedByRevocation(t, w.env, work)
}
