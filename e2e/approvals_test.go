package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// agentCaller is a real agent: the go-sdk MCP client calling callSiteTool
// on a site shared with its workspace, whose tab is a test browser on the
// extension socket that runs every call it is sent. Each call's outcome is
// what the agent reads back.
type agentCaller struct {
	t     *testing.T
	agent *mcp.ClientSession
	site  string
	ws    string // the workspace's id
	task  string // the task's id, in that workspace
	ctx   context.Context
	wg    sync.WaitGroup
}

// callOutcome is what an agent's call came back with.
type callOutcome struct {
	Allowed bool   // the tool ran in the page
	Text    string // the result, or the sentence explaining why not
}

// newAgentCaller creates person's workspace and a task titled title in it, shares site with the
// workspace, connects a test browser offering tools (write tools: each asks), and an MCP agent
// with a token.
func newAgentCaller(t *testing.T, env *servertest.Env, person *servertest.Client, workspace, title, site string, tools ...string) *agentCaller {
	ws := person.Workspace(workspace)
	var created struct {
		Task struct{ ID string } `json:"task"`
	}
	person.MustJSON("POST", "/api/workspaces/"+ws+"/tasks", map[string]string{"title": title}, 201, &created)
	task := created.Task.ID
	person.MustJSON("POST", "/api/sites", map[string]string{"origin": site, "workspaceId": ws}, 201, nil)
	var tk struct {
		Ticket string `json:"ticket"`
	}
	person.MustJSON("POST", "/api/tickets", nil, 201, &tk)
	br, _, err := bridgetest.Dial(context.Background(), env.URL, tk.Ticket, bridgetest.Origin(servertest.ExtensionID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Conn.Close() })
	if _, err := br.Hello("inbox-test-browser", "Chrome", "1.0.0", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var descs []string
	for _, name := range tools {
		descs = append(descs, `{"name":"`+name+`","description":"`+name+` on the site","inputSchema":{"type":"object"}}`)
	}
	if m, err := br.Announce(bridgetest.Doc{ID: "inbox-doc", Origin: site, URL: site + "/", Tools: "[" + strings.Join(descs, ",") + "]"}, 10*time.Second); err != nil || len(m.Accepted) != len(tools) {
		t.Fatalf("announce: %+v %v", m, err)
	}
	go func() { // the tab: runs every call it is sent
		for {
			m, err := br.Next(time.Hour)
			if err != nil {
				return
			}
			if m.Type == "call" {
				br.Result(m.ID, "done: "+m.Tool)
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	c := &agentCaller{t: t, agent: env.MCP(t, person.AgentToken(ws, "inbox test agent"), nil), site: site, ws: ws, task: task, ctx: ctx}
	t.Cleanup(func() { cancel(); c.wg.Wait() })
	return c
}

// ask calls tool with args as the agent and returns where its outcome
// arrives, and a function that cancels the call (withdrawing its request).
func (c *agentCaller) ask(tool string, args any) (<-chan callOutcome, context.CancelFunc) {
	ctx, cancel := context.WithCancel(c.ctx)
	got := make(chan callOutcome, 1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		res, err := c.agent.CallTool(ctx, &mcp.CallToolParams{Name: "callSiteTool",
			Arguments: map[string]any{"site": c.site, "tool": tool, "taskId": c.task, "arguments": args}})
		if err != nil {
			if ctx.Err() == nil {
				c.t.Errorf("call %s: %v", tool, err)
			}
			got <- callOutcome{}
			return
		}
		got <- callOutcome{Allowed: !res.IsError, Text: servertest.ResultText(res)}
	}()
	return got, cancel
}

func released(t *testing.T, got <-chan callOutcome) callOutcome {
	t.Helper()
	select {
	case o := <-got:
		return o
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting call was not released within 15s")
	}
	return callOutcome{}
}

// waitTitle waits until the tab's title is want.
func waitTitle(want string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`document.title === ` + jsString(want))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// answerButton is the inbox's button for answer a on its only (or first) request.
func answerButton(a string) chromedp.CSS {
	return chromedp.CSS(`#inbox .request form:has(input[name=answer][value=` + a + `]) button`)
}

// clickWhere clicks, with the mouse, where the first element matching css is
// now, as a person's click lands on a point: chromedp.Click finds the node
// first and then asks for its box, and the inbox's live update can replace
// the card in between ("Could not find node with given id"), while the
// same button stands at the same place.
func clickWhere(t *testing.T, ctx context.Context, what string, css chromedp.CSS) {
	t.Helper()
	run(t, ctx, what+": find it", chromedp.WaitVisible(css))
	at := get(t, ctx, what+": where it is", chromedp.Evaluate[[]float64](fmt.Sprintf(`(() => {
		const b = document.querySelector(%q);
		b.scrollIntoView({block: 'nearest'});
		const r = b.getBoundingClientRect();
		return [r.left + r.width / 2, r.top + r.height / 2];
	})()`, string(css))))
	run(t, ctx, what, chromedp.MouseClickXY(at[0], at[1]))
}

// answersCount waits until the inbox's first request takes a click on its answers: a card that
// arrived by a live update, or moved, holds clicks for a moment (lib/settle.js).
func answersCount() chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(`#inbox .request[data-clicks="ready"]`))
}

// TestInboxLiveAnswers opens the inbox in the popup's size while a real
// agent's calls (the go-sdk MCP client; a test browser runs them) ask: each request appears without a reload with the count in the
// title and the nav; Allow once, Always allow and Deny release the waiting
// call with that answer; requests answered elsewhere or withdrawn leave the
// open page by themselves.
func TestInboxLiveAnswers(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	owner := env.NewClient(t)
	owner.MustJSON("POST", "/api/setup", map[string]string{"email": "alice@example.com", "name": "Alice", "password": "correct horse"}, 201, nil)
	agent := newAgentCaller(t, env, owner, "Docs site", "Update the pricing page", "https://docs.example", "fill_form", "publish", "delete_page", "rename", "archive")

	ctx := startBrowser(t)
	run(t, ctx, "sign in and open the inbox",
		viewport(440, 600, "light"),
		chromedp.Navigate(env.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("password")),
		chromedp.SendKeys(chromedp.ID("email"), "alice@example.com"),
		chromedp.SendKeys(chromedp.ID("password"), "correct horse"),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.ID("inbox-empty")),
		waitTitle("Inbox · Tabbridge"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)),
		chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`),
	)

	// Allow once.
	long := strings.Repeat("a-very-long-unbroken-value-", 20)
	once, _ := agent.ask("fill_form", map[string]any{"title": "Pricing", "body": long})
	run(t, ctx, "see the request arrive live",
		chromedp.WaitVisible(chromedp.Search(`//article[contains(@class,"request")]//code[.="fill_form"]`)),
		waitTitle("(1) Inbox · Tabbridge"),
		chromedp.Poll[chromedp.Void](`document.getElementById('inbox-count').textContent.trim().startsWith('1')`),
		chromedp.Poll[chromedp.Void](`window.notReloaded === true`),
	)
	// The arguments read as labelled fields; the exact JSON is one click away.
	fields := get(t, ctx, "read the arguments", chromedp.Text(chromedp.CSS(`#inbox dl.arg-fields`)))
	if !strings.Contains(fields, "title\nPricing") {
		t.Fatalf("arguments shown as %q", fields)
	}
	run(t, ctx, "open the raw JSON", chromedp.Click(chromedp.CSS(`#inbox details.raw > summary`)))
	args := get(t, ctx, "read the raw arguments", chromedp.Text(chromedp.CSS(`#inbox pre.args`)))
	if !strings.Contains(args, "\"title\": \"Pricing\"") {
		t.Fatalf("raw arguments shown as %q", args)
	}
	noHorizontalScroll(t, ctx, "inbox with a long argument", 440)
	run(t, ctx, "allow once", answersCount(), chromedp.Click(answerButton("once")), chromedp.WaitVisible(chromedp.ID("inbox-empty")))
	if o := released(t, once); !o.Allowed || o.Text != "done: fill_form" {
		t.Fatalf("allow once released %+v", o)
	}
	run(t, ctx, "the count goes", waitTitle("Inbox · Tabbridge"), chromedp.WaitNotPresent(chromedp.ID("inbox-count")),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)))

	// Always allow, then the grant is listed.
	always, _ := agent.ask("publish", map[string]any{"page": "/pricing"})
	run(t, ctx, "see the second request",
		chromedp.WaitVisible(chromedp.Search(`//article//code[.="publish"]`)),
		waitTitle("(1) Inbox · Tabbridge"),
	)
	label := get(t, ctx, "read the always button", chromedp.Text(answerButton("always")))
	if label = strings.Join(strings.Fields(label), " "); label != "Always allow publish on this site A" { // its key, A, on the button
		t.Fatalf("always button says %q", label)
	}
	run(t, ctx, "always allow", answersCount(), chromedp.Click(answerButton("always")), chromedp.WaitVisible(chromedp.ID("inbox-empty")))
	if o := released(t, always); !o.Allowed || o.Text != "done: publish" {
		t.Fatalf("always allow released %+v", o)
	}
	// The grant lets the next publish run without asking.
	next, _ := agent.ask("publish", map[string]any{"page": "/about"})
	if o := released(t, next); !o.Allowed {
		t.Fatalf("publish after always allow: %+v", o)
	}
	run(t, ctx, "see the grant",
		chromedp.Click(chromedp.ID("nav-more")),
		chromedp.Click(chromedp.ID("nav-grants")),
		chromedp.WaitVisible(chromedp.Search(`//section[@id="grants"]//li[contains(., "publish") and contains(., "docs.example")]`)),
	)
	noHorizontalScroll(t, ctx, "grants", 440)

	// Deny.
	run(t, ctx, "back to the inbox", chromedp.Click(chromedp.ID("nav-inbox")), chromedp.WaitVisible(chromedp.ID("inbox-empty")),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)))
	deny, _ := agent.ask("delete_page", map[string]any{"page": "/old"})
	run(t, ctx, "see the third request", chromedp.WaitVisible(chromedp.Search(`//article//code[.="delete_page"]`)))
	run(t, ctx, "deny", answersCount(), chromedp.Click(answerButton("deny")), chromedp.WaitVisible(chromedp.ID("inbox-empty")))
	if o := released(t, deny); o.Allowed || !strings.Contains(o.Text, "denied") {
		t.Fatalf("deny released %+v", o)
	}

	// Answered elsewhere, and withdrawn by its caller: gone without a reload.
	run(t, ctx, "stream open", chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)),
		chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	elsewhere, _ := agent.ask("rename", map[string]any{"to": "x"})
	_, giveUp := agent.ask("archive", map[string]any{"id": 7})
	run(t, ctx, "see two requests", waitTitle("(2) Inbox · Tabbridge"))
	var pending struct {
		Approvals []struct{ ID, Tool string } `json:"approvals"`
	}
	owner.MustJSON("GET", "/api/approvals", nil, 200, &pending)
	for _, p := range pending.Approvals {
		if p.Tool == "rename" {
			owner.MustJSON("POST", "/api/approvals/"+p.ID+"/answer", map[string]string{"answer": "deny"}, 200, nil)
		}
	}
	released(t, elsewhere)
	run(t, ctx, "the answered one leaves", waitTitle("(1) Inbox · Tabbridge"),
		chromedp.WaitNotPresent(chromedp.Search(`//article[contains(@class,"request")]//code[.="rename"]`)))
	giveUp()
	run(t, ctx, "the withdrawn one leaves", waitTitle("Inbox · Tabbridge"), chromedp.WaitVisible(chromedp.ID("inbox-empty")),
		chromedp.Poll[chromedp.Void](`window.notReloaded === true`))
}
