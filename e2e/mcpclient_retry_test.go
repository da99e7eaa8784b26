package e2e

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
)

// TestTypeScriptClientThatTimesOutRejoinsItsRequest: the official MCP TypeScript SDK gives a
// waiting write up after its request timeout (sending notifications/cancelled, "Request timed
// out") and, once the server has taken that in, calls again the same way. The retry finds the person's one card, marked meanwhile as
// "the agent stopped waiting", and Allow once runs the write once, for the retry.
func TestTypeScriptClientThatTimesOutRejoinsItsRequest(t *testing.T) {
	dir := tsClientDir(t)
	w := newTSClientWorld(t, "ts-retry-browser",
		`[{"name":"buy","description":"Buy","inputSchema":{"type":"object","properties":{"item":{"type":"string"}},"required":["item"]}}]`,
		"bought ")
	env, person, token, site, runs := w.env, w.person, w.token, tsSite, w.calls
	var task struct {
		Task struct{ ID string } `json:"task"`
	}
	person.MustJSON("POST", "/api/workspaces/"+w.ws+"/tasks", map[string]string{"title": "Buy tea"}, 201, &task)

	alice, err := env.DB.UserByEmail(context.Background(), "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	events, stop := env.Server.Live().Subscribe(alice.ID)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "retry.mjs", env.URL, token, site, "buy", `{"item":"tea"}`, task.Task.ID, "1500")
	cmd.Dir = dir
	var stdout, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &errOut
	retry, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The card: opened by the first call, left by it (marked), rejoined by the retry.
	next := func() (string, approvals.Request) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case e := <-events:
				if r, ok := e.Data.(approvals.Request); ok {
					return e.Type, r
				}
			case <-deadline:
				t.Fatal("no more approval events")
			}
		}
	}
	typ, created := next()
	id := created.ID
	if typ != "approval.created" {
		t.Fatalf("first event %s", typ)
	}
	if typ, r := next(); typ != "approval.updated" || r.ID != id || r.Waiters != 0 || r.AgentGoneAt == nil {
		t.Fatalf("after the client timed out: %s %+v; want the card marked, nobody waiting", typ, r)
	}
	io.WriteString(retry, "retry\n")
	if typ, r := next(); typ != "approval.updated" || r.ID != id || r.Waiters != 1 || r.AgentGoneAt != nil {
		t.Fatalf("after the retry: %s %+v; want the same card, waited on again", typ, r)
	}
	person.MustJSON("POST", "/api/approvals/"+id+"/answer", map[string]string{"answer": "once"}, 200, nil)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node client: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "first call: McpError: MCP error -32001: Request timed out") {
		t.Fatalf("the client's first call did not time out: %s", errOut.String())
	}
	var got struct {
		Result  string `json:"result"`
		IsError bool   `json:"isError"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &got); err != nil {
		t.Fatalf("client printed %q: %v", stdout.String(), err)
	}
	if got.IsError || !strings.Contains(got.Result, "bought") || runs.Load() != 1 {
		t.Fatalf("the retry got %+v; the page ran %d times, want once", got, runs.Load())
	}
}
