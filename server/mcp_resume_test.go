package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

func sessionCount(env *servertest.Env) int { return server.MCPSessionCount(env.Server) }

// TestMCPSessionOutlivesTheServer: a client that keeps its session id
// after the server restarted (Gemini CLI does: it does not open a new
// session on the 404 the spec prescribes) is served in a session the
// server opens for it, for its own token, and every later request with
// that id goes to the same one; a client of another token presenting the
// same id gets a session of its own, and ending the first leaves the
// other's. An initialize is never resumed, nor is an id the server did not
// make.
func TestMCPSessionOutlivesTheServer(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	ws := person.Workspace("Shop")
	token, other := person.AgentToken(ws, "laptop"), person.AgentToken(ws, "desktop")
	sid := env.MCP(t, token, nil).ID()
	env.Restart(t)

	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	// Two requests at once (a client's GET stream and a call, say) share one new session.
	type answer struct {
		status int
		body   string
	}
	answers := make(chan answer, 2)
	for i := range 2 {
		go func() {
			req, _ := http.NewRequest("POST", env.URL+"/mcp", strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, 20+i)))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{0, err.Error()}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers <- answer{resp.StatusCode, string(b)}
		}()
	}
	for range 2 {
		if a := <-answers; a.status != 200 || !strings.Contains(a.body, "callSiteTool") {
			t.Fatalf("the session's id after a restart: %d %s, want the tools", a.status, a.body)
		}
	}
	if n := sessionCount(env); n != 1 {
		t.Fatalf("%d sessions after the resume, want 1", n)
	}
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"listSiteTools","arguments":{}}}`
	if status, body := sessionPost(t, env, token, sid, call); status != 200 || !strings.Contains(body, `sites`) {
		t.Fatalf("a call in the resumed session: %d %s", status, body)
	}
	if n := sessionCount(env); n != 1 {
		t.Fatalf("%d sessions after a second request with the same id, want 1 (the same)", n)
	}
	if status, body := sessionPost(t, env, other, sid, list); status != 200 || !strings.Contains(body, "callSiteTool") {
		t.Fatalf("the same id with another token: %d %s", status, body)
	}
	if n := sessionCount(env); n != 2 {
		t.Fatalf("%d sessions once another token used the id, want 2 (one each)", n)
	}
	del, _ := http.NewRequest("DELETE", env.URL+"/mcp", nil)
	del.Header.Set("Authorization", "Bearer "+token)
	del.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(del)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || sessionCount(env) != 1 {
		t.Fatalf("DELETE of the resumed id: %d, %d sessions left, want 204 and the other token's", resp.StatusCode, sessionCount(env))
	}
	if status, body := sessionPost(t, env, other, sid, list); status != 200 || !strings.Contains(body, "callSiteTool") {
		t.Fatalf("the other token's session after the first ended: %d %s", status, body)
	}

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	if status, _ := sessionPost(t, env, token, "gone."+sid, initialize); status != 404 {
		t.Errorf("an initialize with a gone session's id: %d, want the SDK's 404", status)
	}
	if status, _ := sessionPost(t, env, token, "not-ours", list); status != 404 {
		t.Errorf("an id the server did not make: %d, want 404", status)
	}
}

// deleteSession ends an MCP session as a client would (DELETE /mcp) and
// returns the status, failing if the server does not answer within
// testutil.WaitShort.
func deleteSession(t *testing.T, env *servertest.Env, token, sid string) int {
	t.Helper()
	req, _ := http.NewRequest("DELETE", env.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := (&http.Client{Timeout: testutil.WaitShort}).Do(req)
	if err != nil {
		t.Fatalf("DELETE /mcp of %s: %v", sid, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDeletingAResumedSessionEndsItsCalls: DELETE with a session id that
// outlived its session ends the session serving it in its place, and the
// calls running there first, as it does for any session. (It hung while a
// call waited for approval: the calls were looked for under the client's
// id, not the session's, and the SDK's close waits for running calls.)
func TestDeletingAResumedSessionEndsItsCalls(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	sid := w.agent.ID()
	if err := w.agent.Close(); err != nil { // the client ends its session: DELETE
		t.Fatal(err)
	}
	_, _, p := w.waitingBuy(t) // with the gone id: served in a resumed session
	if n := sessionCount(w.env); n != 1 {
		t.Fatalf("%d sessions while the resumed call waits, want 1", n)
	}
	if status := deleteSession(t, w.env, w.token, sid); status != 204 {
		t.Fatalf("DELETE of the resumed id while its call waits: %d, want 204", status)
	}
	if n := server.Waiters(w.env.Server, p.ID); n != 0 {
		t.Fatalf("%d calls still wait after their session was deleted", n)
	}
	if n := sessionCount(w.env); n != 0 {
		t.Fatalf("%d sessions after the DELETE, want 0", n)
	}
}
