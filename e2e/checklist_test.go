package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestFirstRunChecklist: a new owner's home page lists the five first-run
// steps, each not done with the one action that does it; the agent step
// reads "Waiting for the first call…" once a token exists, and turns done
// live (no reload) when the agent first uses it; the workspace page keeps the
// MCP address and the connect snippets after a reload.
func TestFirstRunChecklist(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	owner := env.Person(t, "alice@example.com")
	ctx := startBrowser(t)
	signIn(t, ctx, env, "alice@example.com")
	run(t, ctx, "the home page", viewport(440, 600, "light"), chromedp.Navigate(env.URL+"/"), chromedp.WaitVisible(chromedp.ID("checklist-head")))
	actions := get(t, ctx, "the steps' actions", chromedp.Evaluate[string](
		`[...document.querySelectorAll('#checklist .step:not(.done) a.btn')].map(a => a.id + '=' + a.getAttribute('href')).join(' ')`))
	if actions != "step-workspace-do=/workspaces step-extension-do=/browsers step-site-do=/sites step-machine-do=/machines" {
		t.Errorf("with nothing set up, the actions are %q", actions)
	}

	ws := owner.Workspace("Docs site")
	secret := owner.AgentToken(ws, "laptop")
	run(t, ctx, "the workspace step done, the agent step waits", chromedp.Navigate(env.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#step-workspace.done`)), chromedp.WaitVisible(chromedp.ID("step-agent-waiting")),
		chromedp.WaitVisible(chromedp.CSS(`a#step-agent-do[href="/workspaces/`+ws+`#connect"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)),
		chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	if left := get(t, ctx, "steps left", chromedp.Text(chromedp.ID("checklist-left"))); left != "4 of 5 steps left" {
		t.Errorf("steps left %q", left)
	}
	env.Agent(t, secret).MustJSON("GET", "/api/agent/workspace", nil, 200, nil)
	run(t, ctx, "the agent step turns done live", chromedp.WaitVisible(chromedp.CSS(`#step-agent.done`)),
		chromedp.WaitNotPresent(chromedp.ID("step-agent-waiting")), chromedp.Poll[chromedp.Void](`window.notReloaded === true`))
	layoutRules(t, ctx, "the checklist", 440)

	run(t, ctx, "the workspace page, reloaded", chromedp.Navigate(env.URL+"/workspaces/"+ws), chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("connect-url")), chromedp.WaitVisible(chromedp.ID("connect-claude")),
		chromedp.WaitVisible(chromedp.ID("connect-codex")), chromedp.Click(chromedp.ID("connect-json-summary")),
		chromedp.WaitVisible(chromedp.ID("connect-json")))
	if u := get(t, ctx, "the MCP address", chromedp.Text(chromedp.ID("connect-url"))); u != env.Opts.PublicURL+"/mcp" {
		t.Errorf("the workspace page shows the MCP address %q", u)
	}
	run(t, ctx, "copy the JSON config", chromedp.Click(chromedp.ID("connect-json-copy")),
		chromedp.Poll[chromedp.Void](`document.getElementById('connect-json-status').textContent !== ''`))
	layoutRules(t, ctx, "the workspace page", 440)
}
