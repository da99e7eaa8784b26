package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
)

// approvalShots fills the task with a history (an answered request, calls
// that ran, failed and were refused) and two waiting requests, then captures
// the inbox, grants and audit log.
func approvalShots(t *testing.T, ctx context.Context, env *servertest.Env, owner *servertest.Client, ws, taskID string, capture func(shot)) {
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	owner.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	uid := me.User.ID
	// The agent's calls reach the gate only for a site its workspace shares,
	// and the "Always allow" below grants only while it does.
	owner.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://docs.example.com", "workspaceId": ws}, 201, nil)
	agent := newGateCaller(t, env, approvals.Call{OwnerID: uid, WorkspaceID: ws, TaskID: taskID, Site: "https://docs.example.com"})
	answered := ""
	answerAll := func(a string) {
		var pending struct {
			Approvals []struct{ ID string } `json:"approvals"`
		}
		owner.MustJSON("GET", "/api/approvals", nil, 200, &pending)
		for _, p := range pending.Approvals {
			owner.MustJSON("POST", "/api/approvals/"+p.ID+"/answer", map[string]string{"answer": a}, 200, nil)
			answered = p.ID
		}
	}
	// appendCall records a call as the call path would; one that waited on
	// the request just answered carries its id and result, so the inbox's
	// "Just answered" cards say what it did.
	appendCall := func(tool, decision, outcome, errText string, ms, in, out int64) {
		e := &store.AuditEntry{UserID: uid, WorkspaceID: ws, TokenID: "t", TaskID: taskID,
			Site: "https://docs.example.com", Tool: tool, ArgsBytes: in, ResultBytes: out, Decision: decision, DecidedBy: uid,
			Outcome: outcome, Error: errText, DurationMS: ms}
		if decision == "asked" && answered != "" {
			e.RequestID, answered = answered, ""
			if outcome == sitetools.OutcomeOK {
				e.Result = `{"saved":true,"revision":"r41"}`
			}
		}
		err := env.DB.AppendAudit(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
	}
	// The gate opens requests in the background: the open inbox shows them
	// live, so wait there for as many as expected.
	waitPending := func(n int) {
		t.Helper()
		run(t, ctx, "wait for the requests", chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelectorAll('#inbox .request').length === %d`, n)))
	}
	run(t, ctx, "open the inbox", chromedp.Navigate(env.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)))

	appendCall("search_docs", "read-only", sitetools.OutcomeOK, "", 212, 48, 5300)
	done, _ := agent.ask("edit_section", map[string]any{"section": "pricing-table", "html": "<table>…</table>"})
	waitPending(1)
	answerAll("once")
	decided(t, done)
	waitPending(0)
	appendCall("edit_section", "asked", sitetools.OutcomeOK, "", 1840, 2210, 96)
	done, _ = agent.ask("publish_page", map[string]any{"path": "/pricing"})
	waitPending(1)
	answerAll("always")
	decided(t, done)
	waitPending(0)
	appendCall("publish_page", "asked", sitetools.OutcomeFailed, "Publishing failed: the page has unsaved changes.", 640, 24, 0)
	appendCall("publish_page", "grant", sitetools.OutcomeOK, "", 910, 24, 120)
	appendCall("delete_page", "expired", sitetools.OutcomeExpired, "Nobody answered the approval request within 5 minutes.", 300000, 30, 0)
	appendCall("rename_page", "none", sitetools.OutcomeRefused, "The tool rename_page does not exist on https://docs.example.com.", 3, 40, 0)

	agent.ask("update_price", map[string]any{"plan": "team", "price": map[string]any{"amount": 1200, "currency": "EUR", "interval": "month"}, "note": "Raise the Team plan to €12 per seat from 1 March, as agreed in the pricing review."})
	agent.ask("delete_page", map[string]any{"path": "/pricing/2023"})
	waitPending(2)

	capture(shot{"inbox", "The inbox: two requests waiting, with their arguments and the three answers", visit(env.URL+"/", `#inbox .request`)})
	capture(shot{"grants", "Grants, with Revoke", visit(env.URL+"/grants", `#grants .list`)})
	capture(shot{"audit", "The audit log, filterable, newest first", visit(env.URL+"/audit", `#audit-list .list`)})
	capture(shot{"audit-filtered", "The audit log filtered to one tool", visit(env.URL+"/audit?tool=publish_page", `#audit-list .list`)})
}

// gateCaller raises requests straight on the server's gate, to fill the
// screenshots with a history quickly; the inbox test uses a real agent.
type gateCaller struct {
	t    *testing.T
	env  *servertest.Env
	base approvals.Call
	ctx  context.Context
	wg   sync.WaitGroup
}

func newGateCaller(t *testing.T, env *servertest.Env, base approvals.Call) *gateCaller {
	ctx, cancel := context.WithCancel(context.Background())
	c := &gateCaller{t: t, env: env, base: base, ctx: ctx}
	t.Cleanup(func() { cancel(); c.wg.Wait() })
	return c
}

// ask starts a call of tool and returns where its decision arrives, and a
// function that gives the call up (withdrawing its request).
func (c *gateCaller) ask(tool string, args any) (<-chan approvals.Decision, context.CancelFunc) {
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

func decided(t *testing.T, got <-chan approvals.Decision) approvals.Decision {
	t.Helper()
	select {
	case d := <-got:
		return d
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting call was not released within 15s")
	}
	return approvals.Decision{}
}
