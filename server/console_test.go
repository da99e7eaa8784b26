package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// lockedBuffer collects the server's log lines for a test to read.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(l.b.String(), "\n")
}

// TestConsoleSaysWhatAnOperatorWants: at info level the log names accounts
// created, agent tokens created and first used, refusals with their reason,
// and no per-session chatter from the MCP library (that is at debug).
func TestConsoleSaysWhatAnOperatorWants(t *testing.T) {
	var logs lockedBuffer
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	ada := env.Person(t, "ada@example.com")
	ws := ada.Workspace("Docs")
	secret := ada.AgentToken(ws, "laptop")
	session := env.MCP(t, secret, nil)
	if _, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "listSiteTools", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	session.Close()
	if status, _ := env.Agent(t, "tb_not-a-token").Do("GET", "/api/agent/workspace", nil); status != 401 {
		t.Fatalf("a bad token: %d", status)
	}
	want := map[string]bool{
		`msg="account created"`:                     false,
		`msg="agent token created"`:                 false,
		`msg="agent token used for the first time"`: false,
		`code=agent_token_invalid`:                  false,
	}
	for _, line := range logs.lines() {
		for w := range want {
			if strings.Contains(line, w) && strings.Contains(line, "level=INFO") {
				want[w] = true
			}
		}
		if strings.Contains(line, "component=mcp") && strings.Contains(line, "level=INFO") {
			t.Errorf("the MCP library's chatter at info: %s", line)
		}
	}
	for w, seen := range want {
		if !seen {
			t.Errorf("no info line with %s in:\n%s", w, strings.Join(logs.lines(), "\n"))
		}
	}
	if n := strings.Count(strings.Join(logs.lines(), "\n"), "agent token used for the first time"); n != 1 {
		t.Errorf("first use logged %d times, want once", n)
	}
}
