package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// tsClientDir returns e2e/mcpclient, where the official MCP TypeScript SDK
// client is installed; without it the test fails in CI (scripts/test runs
// 'npm ci' there) and is skipped elsewhere.
func tsClientDir(t *testing.T) string {
	t.Helper()
	dir := repoPath(t, "e2e/mcpclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the TypeScript SDK is not installed: scripts/test runs 'npm ci' in e2e/mcpclient")
		}
		t.Skip("run 'npm ci' in e2e/mcpclient (scripts/test does) to include this test")
	}
	return dir
}

// runNode runs node with args in dir, for at most timeout, and returns what it printed; an
// error carries what it wrote to its standard error.
func runNode(dir string, timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return nil, fmt.Errorf("node client: %v\n%s", err, stderr)
	}
	return out, nil
}

// tsSite is the site the TypeScript client tests share and call.
const tsSite = "https://shop.example"

// tsClientWorld is what a TypeScript client test calls into: a server; the
// person alice with the workspace "Work", an agent token for it and tsSite
// shared there; and a Go test browser on tsSite whose one document answers
// every call with a prefix and the call's arguments, counting the calls.
type tsClientWorld struct {
	env    *servertest.Env
	person *servertest.Client
	ws     string
	token  string
	calls  *atomic.Int32
}

func newTSClientWorld(t *testing.T, browserID, tools, answer string) *tsClientWorld {
	t.Helper()
	w := &tsClientWorld{env: servertest.Start(t, storetest.SQLite, nil)}
	w.person = w.env.Person(t, "alice@example.com")
	w.ws = w.person.Workspace("Work")
	w.token = w.person.AgentToken(w.ws, "ts client")
	w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": tsSite, "workspaceId": w.ws}, 201, nil)
	w.calls = answeringBrowser(t, w.person, w.env.URL, browserID, tsSite, tools, answer)
	return w
}

// answeringBrowser connects a Go test browser of person to the server at url
// and opens one document of site with tools, which answers every call with
// answer and the call's arguments, until the test ends. It returns the
// number of calls the browser got so far.
func answeringBrowser(t *testing.T, person *servertest.Client, url, browserID, site, tools, answer string) *atomic.Int32 {
	t.Helper()
	var tk struct {
		Ticket string `json:"ticket"`
	}
	person.MustJSON("POST", "/api/tickets", nil, 201, &tk)
	br, _, err := bridgetest.Dial(context.Background(), url, tk.Ticket, bridgetest.Origin(servertest.ExtensionID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Conn.Close() })
	if _, err := br.Hello(browserID, "Chrome", "1.0.0", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if m, err := br.Announce(bridgetest.Doc{ID: "d1", Origin: site, URL: site + "/", Tools: tools}, 10*time.Second); err != nil || len(m.Accepted) != 1 {
		t.Fatalf("announce: %+v %v", m, err)
	}
	calls := new(atomic.Int32)
	go func() {
		for {
			m, err := br.Next(time.Minute)
			if err != nil {
				return
			}
			if m.Type == "call" {
				calls.Add(1)
				br.Result(m.ID, answer+string(m.Arguments))
			}
		}
	}()
	return calls
}

// TestTypeScriptSDKClient drives /mcp with the official MCP TypeScript SDK's
// client — what Claude Code and most standard clients are built on — to show
// a standard client works unmodified: it lists tools, lists a shared site,
// runs a read-only tool in a (Go test) browser and reads an error.
func TestTypeScriptSDKClient(t *testing.T) {
	dir := tsClientDir(t)
	w := newTSClientWorld(t, "ts-client-browser",
		`[{"name":"search","description":"Search","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}]`,
		"results for ")
	env, token, site := w.env, w.token, tsSite
	out, err := runNode(dir, 60*time.Second, "check.mjs", env.URL, token, site, "search", `{"q":"tea"}`)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		SessionID string   `json:"sessionId"`
		Tools     []string `json:"tools"`
		Listing   struct {
			Sites []struct {
				Site   string `json:"site"`
				Online bool   `json:"online"`
			} `json:"sites"`
		} `json:"listing"`
		Result     string `json:"result"`
		IsError    bool   `json:"isError"`
		BadError   string `json:"badError"`
		BadIsError bool   `json:"badIsError"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client printed %s: %v", out, err)
	}
	if got.SessionID == "" {
		t.Error("no stateful session")
	}
	if strings.Join(got.Tools, ",") != "callSiteTool,createTask,getSiteToolDefinition,listSiteTools,listTasks,updateTask" {
		t.Errorf("tools %v", got.Tools)
	}
	if len(got.Listing.Sites) != 1 || got.Listing.Sites[0].Site != site || !got.Listing.Sites[0].Online {
		t.Errorf("listing %+v", got.Listing)
	}
	if got.IsError || got.Result != `results for {"q":"tea"}` {
		t.Errorf("call: %v %q", got.IsError, got.Result)
	}
	if !got.BadIsError || !strings.Contains(got.BadError, "no tool named") {
		t.Errorf("error for the agent: %v %q", got.BadIsError, got.BadError)
	}
}
