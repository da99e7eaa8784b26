package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// caller raises requests on the server's real gate, as an agent's call
// does, and hands back each decision.
type caller struct {
	t    *testing.T
	env  *servertest.Env
	base approvals.Call
	ctx  context.Context
	wg   sync.WaitGroup
}

func newCaller(t *testing.T, env *servertest.Env, base approvals.Call) *caller {
	ctx, cancel := context.WithCancel(context.Background())
	c := &caller{t: t, env: env, base: base, ctx: ctx}
	t.Cleanup(func() { cancel(); c.wg.Wait() })
	return c
}

// ask starts a call of tool and returns where its decision arrives, and a
// function that gives the call up (withdrawing its request).
func (c *caller) ask(tool string, args any) (<-chan approvals.Decision, context.CancelFunc) {
	call := c.base
	call.Tool = tool
	call.Arguments, _ = json.Marshal(args)
	ctx, cancel := context.WithCancel(c.ctx)
	got := make(chan approvals.Decision, 1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		d, err := c.env.Server.ApprovalGate().Decide(ctx, call)
		if err != nil && !errors.Is(err, context.Canceled) {
			c.t.Errorf("decide %s: %v", tool, err)
		}
		got <- d
	}()
	return got, cancel
}

func released(t *testing.T, got <-chan approvals.Decision) approvals.Decision {
	t.Helper()
	select {
	case d := <-got:
		return d
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting call was not released within 15s")
	}
	return approvals.Decision{}
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

// TestInboxLiveAnswers opens the inbox in the popup's size while an agent's
// calls ask: each request appears without a reload with the count in the
// title and the nav; Allow once, Always allow and Deny release the waiting
// call with that answer; requests answered elsewhere or withdrawn leave the
// open page by themselves.
func TestInboxLiveAnswers(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	owner := env.NewClient(t)
	owner.MustJSON("POST", "/api/setup", map[string]string{"email": "alice@example.com", "name": "Alice", "password": "correct horse"}, 201, nil)
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	owner.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	ws := owner.Workspace("Docs site")
	var task struct {
		Task struct{ ID string } `json:"task"`
	}
	owner.MustJSON("POST", "/api/workspaces/"+ws+"/tasks", map[string]string{"title": "Update the pricing page"}, 201, &task)
	agent := newCaller(t, env, approvals.Call{OwnerID: me.User.ID, WorkspaceID: ws, TaskID: task.Task.ID, Site: "https://docs.example"})

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
	args := get(t, ctx, "read the arguments", chromedp.Text(chromedp.CSS(`#inbox pre.args`)))
	if !strings.Contains(args, "\"title\": \"Pricing\"") {
		t.Fatalf("arguments shown as %q", args)
	}
	noHorizontalScroll(t, ctx, "inbox with a long argument", 440)
	run(t, ctx, "allow once", chromedp.Click(answerButton("once")), chromedp.WaitVisible(chromedp.ID("inbox-empty")))
	if d := released(t, once); !d.Allowed || d.Answer != approvals.AllowOnce {
		t.Fatalf("allow once released %+v", d)
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
	if label != "Always allow publish on this site" {
		t.Fatalf("always button says %q", label)
	}
	run(t, ctx, "always allow", chromedp.Click(answerButton("always")), chromedp.WaitVisible(chromedp.ID("inbox-empty")))
	if d := released(t, always); !d.Allowed || d.Answer != approvals.AlwaysAllow {
		t.Fatalf("always allow released %+v", d)
	}
	run(t, ctx, "see the grant",
		chromedp.Click(chromedp.ID("nav-grants")),
		chromedp.WaitVisible(chromedp.Search(`//section[@id="grants"]//li[contains(., "publish") and contains(., "docs.example")]`)),
	)
	noHorizontalScroll(t, ctx, "grants", 440)

	// Deny.
	run(t, ctx, "back to the inbox", chromedp.Click(chromedp.ID("nav-inbox")), chromedp.WaitVisible(chromedp.ID("inbox-empty")),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)))
	deny, _ := agent.ask("delete_page", map[string]any{"page": "/old"})
	run(t, ctx, "see the third request", chromedp.WaitVisible(chromedp.Search(`//article//code[.="delete_page"]`)))
	run(t, ctx, "deny", chromedp.Click(answerButton("deny")), chromedp.WaitVisible(chromedp.ID("inbox-empty")))
	if d := released(t, deny); d.Allowed || d.Answer != approvals.Deny {
		t.Fatalf("deny released %+v", d)
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
		chromedp.WaitNotPresent(chromedp.Search(`//article//code[.="rename"]`)))
	giveUp()
	run(t, ctx, "the withdrawn one leaves", waitTitle("Inbox · Tabbridge"), chromedp.WaitVisible(chromedp.ID("inbox-empty")),
		chromedp.Poll[chromedp.Void](`window.notReloaded === true`))
}
