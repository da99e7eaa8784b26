package server_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// An agent token given an expiry works until then and is refused after it,
// with an error that tells the agent what happened and what to ask for, on
// the agent API and on /mcp alike; the workspace page shows when each token
// expires and offers the choices.
func TestAgentTokenExpiry(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, _ := aliceWithInvitation(t, env)
	b := newBrowser(t, env, alice)
	ws := "/workspaces/" + id.workspace

	page := b.post(ws+"/tokens", url.Values{"tokenName": {"week"}, "expiresIn": {"7"}})
	page.want(t, 201, "Token “week” created", `<select id="token-expires" name="expiresIn">`, "expires <span")
	secret := regexp.MustCompile(`id="token-secret"[^>]*>(tba_[^<]+)<`).FindStringSubmatch(page.body)
	if secret == nil {
		t.Fatalf("no secret shown: %s", page.body)
	}
	env.Agent(t, secret[1]).MustJSON("GET", "/api/agent/workspace", nil, 200, nil)
	b.get(ws).want(t, 200, "in 7 days</span>", "never expires")
	b.post(ws+"/tokens", url.Values{"tokenName": {"odd"}, "expiresIn": {"3"}}).want(t, 400, "Choose when the token expires")
	var made struct {
		Token struct{ ExpiresAt *time.Time } `json:"token"`
	}
	alice.MustJSON("POST", "/api/workspaces/"+id.workspace+"/tokens", map[string]any{"name": "api", "expiresInDays": 30}, 201, &made)
	if made.Token.ExpiresAt == nil || made.Token.ExpiresAt.Sub(store.Now()) < 29*24*time.Hour {
		t.Fatalf("a token made through the API for 30 days expires at %v", made.Token.ExpiresAt)
	}
	if status, body := alice.Do("POST", "/api/workspaces/"+id.workspace+"/tokens", map[string]any{"name": "api", "expiresInDays": 2}); status != 400 || servertest.ErrorCode(body) != "invalid_expiry" {
		t.Fatalf("an expiry off the list: %d %s", status, body)
	}

	var me struct {
		User struct{ ID string } `json:"user"`
	}
	alice.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	past := store.Now().Add(-time.Minute)
	_, plain, err := env.DB.CreateAgentTokenUntil(context.Background(), me.User.ID, id.workspace, "old", &past)
	if err != nil {
		t.Fatal(err)
	}
	agent := env.Agent(t, plain)
	status, body := agent.Do("GET", "/api/agent/workspace", nil)
	if status != 401 || servertest.ErrorCode(body) != "agent_token_expired" || !strings.Contains(string(body), "create a new one") {
		t.Fatalf("expired token on the agent API: %d %s", status, body)
	}
	init := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}}
	if status, body := agent.Do("POST", "/mcp", init); status != 401 || servertest.ErrorCode(body) != "agent_token_expired" {
		t.Fatalf("expired token on /mcp: %d %s", status, body)
	}
	b.get(ws).want(t, 200, `id="token-expired"`, "expired ")
}
