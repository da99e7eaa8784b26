package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestWebAppFirstRunTokenAndLiveTask walks the web app as a person does, in
// the popup's size: first-run setup, a workspace, an agent token with its
// Claude Code command; then a task created through the JSON API by another
// client appears on the open page without a reload.
func TestWebAppFirstRunTokenAndLiveTask(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	ctx := startBrowser(t)
	run(t, ctx, "first-run setup",
		viewport(440, 600, "light"),
		chromedp.Navigate(env.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/setup"]`)),
		chromedp.SendKeys(chromedp.ID("name"), "Alice"),
		chromedp.SendKeys(chromedp.ID("email"), "alice@example.com"),
		chromedp.SendKeys(chromedp.ID("password"), "correct horse"),
		chromedp.Click(chromedp.CSS(`form[action="/setup"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("ws-name")),
	)
	noHorizontalScroll(t, ctx, "workspaces", 440)
	if empty := get(t, ctx, "read the empty state", chromedp.Text(chromedp.CSS(`#ws-list .empty`))); !strings.Contains(empty, "No workspaces yet") {
		t.Fatalf("empty state %q", empty)
	}

	run(t, ctx, "create a workspace",
		chromedp.SendKeys(chromedp.ID("ws-name"), "Docs work"),
		chromedp.Click(chromedp.CSS(`form[action="/workspaces"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("token-name")),
	)
	wsPath := get(t, ctx, "read the address", chromedp.Evaluate[string](`location.pathname`))
	if !strings.HasPrefix(wsPath, "/workspaces/") {
		t.Fatalf("after creating a workspace the page is %q", wsPath)
	}

	run(t, ctx, "create a token",
		chromedp.SendKeys(chromedp.ID("token-name"), "laptop"),
		chromedp.Submit(chromedp.ID("token-name")),
		chromedp.WaitVisible(chromedp.ID("mcp-command")),
	)
	command := get(t, ctx, "read the command", chromedp.Text(chromedp.ID("mcp-command")))
	listed := get(t, ctx, "read the tokens", chromedp.Text(chromedp.ID("tokens")))
	after := get(t, ctx, "read the address", chromedp.Evaluate[string](`location.pathname`))
	want := "claude mcp add --transport http tabbridge-laptop " + env.Opts.PublicURL + "/mcp --header 'Authorization: Bearer tba_"
	if !strings.HasPrefix(command, want) {
		t.Fatalf("command %q, want prefix %q", command, want)
	}
	if !strings.Contains(listed, "laptop") || !strings.Contains(listed, "never used") {
		t.Fatalf("token list %q", listed)
	}
	if after != wsPath {
		t.Fatalf("after the form the address is %q, want %q (a reload must not show the secret again)", after, wsPath)
	}
	noHorizontalScroll(t, ctx, "token created", 440)
	// The shown token works for an agent.
	secret := command[strings.Index(command, "tba_"):strings.LastIndex(command, "'")]
	env.Agent(t, secret).MustJSON("GET", "/api/agent/workspace", nil, 200, nil)

	run(t, ctx, "copy the command",
		chromedp.Click(chromedp.CSS(`button[data-copy="mcp-command"]`)),
		chromedp.Poll[chromedp.Void](`document.getElementById('mcp-command-status').textContent !== ''`),
	)

	// Live: another client of the same person creates a task.
	run(t, ctx, "wait for the event stream", chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)))
	other := env.NewClient(t)
	other.MustJSON("POST", "/api/auth/signin", map[string]string{"email": "alice@example.com", "password": "correct horse"}, 200, nil)
	other.MustJSON("POST", "/api"+wsPath+"/tasks", map[string]string{"title": "Made elsewhere"}, 201, nil)
	run(t, ctx, "see the task appear without a reload",
		chromedp.WaitVisible(chromedp.Search(`//div[@id="tasks"]//a[contains(., "Made elsewhere")]`)),
	)
	// The token panel shown once is still there: only the live regions changed.
	run(t, ctx, "the page was not reloaded", chromedp.WaitVisible(chromedp.ID("mcp-command")))

	// And revoking from another client takes the token off the list.
	var toks struct {
		Tokens []struct{ ID string } `json:"tokens"`
	}
	other.MustJSON("GET", "/api"+wsPath+"/tokens", nil, 200, &toks)
	other.MustJSON("DELETE", "/api"+wsPath+"/tokens/"+toks.Tokens[0].ID, nil, 204, nil)
	run(t, ctx, "see the token go", chromedp.WaitVisible(chromedp.CSS(`#tokens .empty`)))
}
