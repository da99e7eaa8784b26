package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/google/uuid"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

const site = "https://docs.example"

// asker raises approval requests on the test server's real gate, as the
// call path does, and learns each request from the person's event stream.
type asker struct {
	t      *testing.T
	env    *servertest.Env
	uid    string
	id     ids
	events *stream
	ctx    context.Context
	wg     sync.WaitGroup
}

func newAsker(t *testing.T, env *servertest.Env, c *servertest.Client, id ids) *asker {
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	c.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	// A call reaches the gate only for a site its workspace shares, and an
	// "Always allow" grants only while it does.
	var sites struct {
		Sites []struct{ Origin string } `json:"sites"`
	}
	c.MustJSON("GET", "/api/sites", nil, 200, &sites)
	if !slices.ContainsFunc(sites.Sites, func(s struct{ Origin string }) bool { return s.Origin == site }) {
		c.MustJSON("POST", "/api/sites", map[string]string{"origin": site, "workspaceId": id.workspace}, 201, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &asker{t: t, env: env, uid: me.User.ID, id: id, events: openStream(t, env, c, nil), ctx: ctx}
	if e := a.events.next(t, true); e.comment != "connected" {
		t.Fatalf("first frame %+v", e)
	}
	t.Cleanup(func() { cancel(); a.wg.Wait() })
	return a
}

func (a *asker) call(tool, args string) approvals.Call {
	return approvals.Call{OwnerID: a.uid, WorkspaceID: a.id.workspace, TaskID: a.id.task, Site: site, Tool: tool, Arguments: json.RawMessage(args)}
}

// raise starts a call of tool that needs an answer and returns its request
// and where its decision will arrive.
func (a *asker) raise(tool, args string) (approvals.Request, <-chan approvals.Decision) {
	a.t.Helper()
	got := a.decide(tool, args)
	for {
		e := a.events.next(a.t, false)
		if e.typ != "approval.created" {
			continue
		}
		var r approvals.Request
		if err := json.Unmarshal([]byte(e.data), &r); err != nil {
			a.t.Fatal(err)
		}
		if r.Tool == tool {
			return r, got
		}
	}
}

// decide runs gate.Decide for tool in the background.
func (a *asker) decide(tool, args string) <-chan approvals.Decision {
	got := make(chan approvals.Decision, 1)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		d, err := a.env.Server.ApprovalGate().Decide(a.ctx, a.call(tool, args))
		if err != nil && !errors.Is(err, context.Canceled) {
			a.t.Errorf("decide %s: %v", tool, err)
		}
		got <- d
	}()
	return got
}

func decision(t *testing.T, got <-chan approvals.Decision) approvals.Decision {
	t.Helper()
	select {
	case d := <-got:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call was not released within 10s")
	}
	return approvals.Decision{}
}

func answer(b *browser, id, a string, back string) page {
	b.t.Helper()
	vals := url.Values{"answer": {a}}
	if back != "" {
		vals.Set("back", back)
	}
	return b.post("/approvals/"+id+"/answer", vals)
}

func pendingIDs(t *testing.T, env *servertest.Env, uid string) string {
	t.Helper()
	reqs, err := env.Server.ApprovalGate().Pending(context.Background(), uid, "")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString(r.ID + " ")
	}
	return b.String()
}

func TestInboxShowsRequestsAndTheAnswersReleaseTheCalls(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		alice, id, _ := aliceWorld(t, env)
		b := newBrowser(t, env, alice)
		b.get("/").want(t, 200, "<title>Inbox · Tabbridge</title>", "No requests waiting.",
			"When an agent asks to change something on a site you shared, it appears here.", `data-src="/"`)

		a := newAsker(t, env, alice, id)
		fill, fillDone := a.raise("fill_form", `{"title":"Pricing","fields":{"price":12.5}}`)
		del, delDone := a.raise("delete_page", `{"page":"/old"}`)
		inbox := b.get("/")
		inbox.want(t, 200, "<title>(2) Inbox · Tabbridge</title>", `id="inbox-count">2`,
			"fill_form", "delete_page", site, `href="/tasks/`+id.task+`">Ship it</a>`, "Alice&#39;s",
			"{\n  &#34;fields&#34;: {\n    &#34;price&#34;: 12.5\n  },\n  &#34;title&#34;: &#34;Pricing&#34;\n}",
			"Allow once", "Always allow fill_form on this site", "Deny", `name="_csrf"`)
		// The countdown as the page's script writes it each second (its first tick keeps the length).
		if !regexp.MustCompile(`>expires in (5:00|4:[0-5][0-9])</span>`).MatchString(inbox.body) {
			t.Error("the inbox does not write the countdown as m:ss")
		}
		if strings.Index(inbox.body, "fill_form") > strings.Index(inbox.body, "delete_page") {
			t.Error("the inbox is not oldest first")
		}
		// Every signed-in page carries the badge.
		b.get("/workspaces").want(t, 200, `id="inbox-count">2`)

		answer(b, fill.ID, "once", "").redirect(t, "/")
		if d := decision(t, fillDone); !d.Allowed || d.Source != approvals.SourceAsked || d.Answer != approvals.AllowOnce {
			t.Fatalf("allow once released %+v", d)
		}
		answer(b, del.ID, "deny", "/tasks/"+id.task).redirect(t, "/tasks/"+id.task)
		if d := decision(t, delDone); d.Allowed || d.Answer != approvals.Deny {
			t.Fatalf("deny released %+v", d)
		}
		p := b.get("/")
		p.want(t, 200, "<title>Inbox · Tabbridge</title>", "No requests waiting.")
		if strings.Contains(p.body, "inbox-count") {
			t.Error("the badge stays with nothing waiting")
		}

		// Answering again is calm: the inbox, with a notice.
		again := answer(b, fill.ID, "deny", "")
		again.want(t, 409, "That request already ended (Allowed once); nothing waits on it now.", "No requests waiting.", `data-src="/"`)
		if strings.Contains(again.body, `role="alert"`) {
			t.Error("an already answered request shows as an error")
		}
		answer(b, del.ID, "once", "/tasks/"+id.task).want(t, 409, "already ended (Denied)", `data-src="/tasks/`+id.task+`"`)
		answer(b, "nope", "once", "").want(t, 404)
		bad, _ := a.raise("click", `{}`)
		answer(b, bad.ID, "maybe", "").want(t, 400, "once")
		answer(b, bad.ID, "once", "//evil.example").redirect(t, "/")
	})
}

func TestAlwaysAllowCreatesAGrantThatRevokeEnds(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, _ := aliceWorld(t, env)
	b := newBrowser(t, env, alice)
	b.get("/grants").want(t, 200, "No grants.", "Always allow")
	a := newAsker(t, env, alice, id)
	r, done := a.raise("fill_form", `{"x":1}`)
	answer(b, r.ID, "always", "").redirect(t, "/")
	if d := decision(t, done); !d.Allowed || d.Answer != approvals.AlwaysAllow {
		t.Fatalf("always allow released %+v", d)
	}
	// The next such call runs on the grant, without asking.
	if d := decision(t, a.decide("fill_form", `{"x":2}`)); !d.Allowed || d.Source != approvals.SourceGrant {
		t.Fatalf("after always allow: %+v", d)
	}
	grants := b.get("/grants")
	grants.want(t, 200, "Always allow <code class=\"tool\">fill_form</code> on <span class=\"site\">"+site,
		`href="/workspaces/`+id.workspace+`">Alice&#39;s</a>`, `href="/tasks/`+id.task+`">Ship it</a>`, "Revoke grant")
	gs, _ := env.Server.ApprovalGate().Grants(context.Background(), a.uid)
	if len(gs) != 1 {
		t.Fatalf("%d grants", len(gs))
	}
	b.post("/grants/"+gs[0].ID+"/revoke", nil).redirect(t, "/grants?revoked=1")
	b.get("/grants?revoked=1").want(t, 200, "No grants.", "Grant revoked: the next such call asks you again.")
	b.post("/grants/"+gs[0].ID+"/revoke", nil).want(t, 404)
	// And the next call asks again.
	r2, _ := a.raise("fill_form", `{"x":3}`)
	if r2.Status != approvals.StatusPending {
		t.Fatalf("after revoking: %+v", r2)
	}
}

func TestApprovalFormsRefuseMissingOrWrongCSRF(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, _ := aliceWorld(t, env)
	b := newBrowser(t, env, alice)
	a := newAsker(t, env, alice, id)
	g, gDone := a.raise("grant_me", `{}`)
	answer(b, g.ID, "always", "").redirect(t, "/")
	decision(t, gDone)
	gs, _ := env.Server.ApprovalGate().Grants(context.Background(), a.uid)
	r, done := a.raise("fill_form", `{}`)
	before := pendingIDs(t, env, a.uid)
	for _, f := range []struct {
		path string
		vals url.Values
	}{
		{"/approvals/" + r.ID + "/answer", url.Values{"answer": {"once"}}},
		{"/approvals/" + r.ID + "/answer", url.Values{"answer": {"deny"}}},
		{"/grants/" + gs[0].ID + "/revoke", nil},
	} {
		for _, token := range []string{"", "forged-forged-forged-forged-forged-forged"} {
			vals := url.Values{"_csrf": {token}}
			for k, v := range f.vals {
				vals[k] = v
			}
			if p := b.post(f.path, vals); p.status != 403 || !strings.Contains(p.body, "CSRF") {
				t.Errorf("POST %s with _csrf=%q: %d, want 403", f.path, token, p.status)
			}
		}
	}
	if after := pendingIDs(t, env, a.uid); after != before || !strings.Contains(after, r.ID) {
		t.Fatalf("a refused form answered a request: before %q after %q", before, after)
	}
	select {
	case d := <-done:
		t.Fatalf("a refused form released the call: %+v", d)
	default:
	}
	if gs2, _ := env.Server.ApprovalGate().Grants(context.Background(), a.uid); len(gs2) != 1 {
		t.Fatal("a refused form revoked the grant")
	}
}

func TestOtherPeoplesRequestsGrantsAndCallsAreNotFound(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
		alice, id, _ := aliceWorld(t, env)
		ab := newBrowser(t, env, alice)
		a := newAsker(t, env, alice, id)
		g, gDone := a.raise("grant_me", `{}`)
		answer(ab, g.ID, "always", "").redirect(t, "/")
		decision(t, gDone)
		gs, _ := env.Server.ApprovalGate().Grants(context.Background(), a.uid)
		r, done := a.raise("fill_form", `{"secret":"alice's"}`)
		if err := env.DB.AppendAudit(context.Background(), &store.AuditEntry{UserID: a.uid, WorkspaceID: id.workspace,
			TokenID: id.token, TaskID: id.task, Site: site, Tool: "alice_tool", Decision: "read-only", Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}

		bob := newBrowser(t, env, env.Person(t, "bob@example.com"))
		for _, ans := range []string{"once", "always", "deny"} {
			answer(bob, r.ID, ans, "").want(t, 404, "No approval request")
		}
		bob.post("/grants/"+gs[0].ID+"/revoke", nil).want(t, 404, "No grant")
		bob.get("/audit?tool=alice_tool").want(t, 200, "No calls match these filters.")
		for _, p := range []string{"/", "/grants", "/audit"} {
			body := bob.get(p).body
			for _, leak := range []string{"fill_form", "grant_me", "alice_tool", "Ship it"} {
				if strings.Contains(body, leak) {
					t.Errorf("bob's %s shows alice's %s", p, leak)
				}
			}
		}
		if !strings.Contains(pendingIDs(t, env, a.uid), r.ID) {
			t.Fatal("bob's answer ended alice's request")
		}
		select {
		case d := <-done:
			t.Fatalf("bob released alice's call: %+v", d)
		default:
		}
		if gs2, _ := env.Server.ApprovalGate().Grants(context.Background(), a.uid); len(gs2) != 1 {
			t.Fatal("bob revoked alice's grant")
		}
	})
}

func TestApprovalPagesRefuseAgentTokens(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, secret := aliceWorld(t, env)
	a := newAsker(t, env, alice, id)
	r, _ := a.raise("fill_form", `{}`)
	b := newBrowser(t, env, alice)
	for _, p := range []string{"/", "/grants", "/audit"} {
		req, _ := http.NewRequest("GET", env.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		b.do(req).want(t, 401, "Agent tokens do not open the web app")
	}
	vals := url.Values{"_csrf": {alice.CSRF}, "answer": {"once"}}
	req, _ := http.NewRequest("POST", env.URL+"/approvals/"+r.ID+"/answer", strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+secret)
	b.do(req).want(t, 401)
	if !strings.Contains(pendingIDs(t, env, a.uid), r.ID) {
		t.Fatal("an agent token answered a request")
	}
}

// A hostile agent or page cannot make a card read differently from the call
// it approves: characters that are invisible or reorder text are shown by
// their code points, in the fields, the raw JSON and the task's title.
func TestCardsShowCharactersThatHideOrReorderText(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, _ := aliceWorld(t, env)
	alice.MustJSON("PATCH", "/api/tasks/"+id.task, map[string]string{"title": "Pay \u202erennid"}, 200, nil)
	b := newBrowser(t, env, alice)
	a := newAsker(t, env, alice, id)
	r, _ := a.raise("send_money", "{\"to\":\"alice@example.com\u202egnp.exe\",\"note\":\"hi\u200bthere\U000E0041\"}")
	// (html/template writes + as &#43;)
	for path, fields := range map[string][]string{"/": {"alice@example.com⟨U&#43;202E⟩gnp.exe", "hi⟨U&#43;200B⟩there⟨U&#43;E0041⟩"}, "/tasks/" + id.task: nil} {
		p := b.get(path)
		p.want(t, 200, append(fields, `alice@example.com\u202egnp.exe`, `hi\u200bthere\udb40\udc41`, "Pay ⟨U&#43;202E⟩rennid")...)
		// (the title's own edit field holds it as it is, to be edited)
		shownPart, _, _ := strings.Cut(p.body, `<label for="task-rename">`)
		if i := strings.IndexAny(shownPart, "\u202e\u200b\U000E0041"); i >= 0 {
			t.Errorf("%s shows the request %s with its hidden characters as they are: %q", path, r.ID, shownPart[max(0, i-300):i+20])
		}
	}
}

func TestTaskPageShowsApprovalsAndCallsInTimeOrder(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		alice, id, _ := aliceWorld(t, env)
		b := newBrowser(t, env, alice)
		b.get("/tasks/"+id.task).want(t, 200, "No approvals or calls yet.")
		a := newAsker(t, env, alice, id)
		first, done := a.raise("first_tool", `{"n":1}`)
		answer(b, first.ID, "once", "/tasks/"+id.task).redirect(t, "/tasks/"+id.task)
		decision(t, done)
		call := func(tool, decision, outcome, errText string, at time.Time) {
			err := env.DB.AppendAudit(context.Background(), &store.AuditEntry{UserID: a.uid, WorkspaceID: id.workspace, TokenID: id.token,
				TaskID: id.task, Site: site, Tool: tool, ArgsBytes: 2048, ResultBytes: 90, Decision: decision, DecidedBy: a.uid,
				Outcome: outcome, Error: errText, DurationMS: 1500, CreatedAt: at})
			if err != nil {
				t.Fatal(err)
			}
		}
		// A call's row keeps its time to the millisecond (its id's), a request's to the
		// microsecond: the next request is raised at least 2 ms after the first, so the call put
		// at the first millisecond after the first request sorts between the two. (Halfway between
		// two requests raised in the same millisecond, it truncated to before the first one.)
		time.Sleep(time.Until(first.CreatedAt.Add(2 * time.Millisecond))) // the clock must pass that instant
		waiting, _ := a.raise("third_tool", `{"n":3}`)
		if waiting.CreatedAt.Sub(first.CreatedAt) < 2*time.Millisecond {
			t.Fatalf("requests at %v and %v", first.CreatedAt, waiting.CreatedAt)
		}
		call("second_tool", "asked", "ok", "", first.CreatedAt.Truncate(time.Millisecond).Add(time.Millisecond))
		// In the request's own millisecond (its time has microseconds, the call's not): after it.
		call("same_ms_tool", "read-only", "ok", "", waiting.CreatedAt.Truncate(time.Millisecond))
		call("fourth_tool", "read-only", sitetools.OutcomeFailed, "the page threw: no such row", waiting.CreatedAt.Add(time.Millisecond))

		p := b.get("/tasks/" + id.task)
		p.want(t, 200, "Allowed once", "answered by you", "Waiting", "decision: Asked — answered by you", "2.0 KB sent, 90 B back",
			"took 1.5 s", "the page threw: no such row", `status-rejected">Failed`, "Read-only", `<summary id="req-`+first.ID+`-summary">Arguments</summary>`,
			"&#34;n&#34;: 3", "Always allow third_tool on this site", `data-live="approval.created approval.updated approval.decided approval.expired approval.withdrawn call.finished workspace.deleted"`)
		last := -1
		for _, tool := range []string{"first_tool", "second_tool", "third_tool", "same_ms_tool", "fourth_tool"} {
			i := strings.Index(p.body, tool)
			if i < last {
				t.Fatalf("%s is out of time order", tool)
			}
			last = i
		}
	})
}

func TestAuditPageFiltersAndPages(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		alice, id, _ := aliceWorld(t, env)
		b := newBrowser(t, env, alice)
		b.get("/audit").want(t, 200, "No calls yet.", `for="f-site"`, `for="f-outcome"`)
		a := newAsker(t, env, alice, id)
		ctx := context.Background()
		for i := 0; i < 55; i++ {
			e := &store.AuditEntry{UserID: a.uid, WorkspaceID: id.workspace, TokenID: id.token, TaskID: id.task, Site: site,
				Tool: fmt.Sprintf("tool_%02d", i), Decision: "grant", Outcome: "ok", DurationMS: int64(i)}
			if i%10 == 0 {
				e.Site, e.Outcome, e.Decision, e.Error = "https://other.example", "denied", "expired", "no answer in time"
			}
			if err := env.DB.AppendAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		// The person reads what happened, not the advice written for the agent.
		failed := &store.AuditEntry{UserID: a.uid, WorkspaceID: id.workspace, TokenID: id.token, TaskID: id.task, Site: site,
			Tool: "tool_55", Decision: "grant", Outcome: "failed", Error: "The page failed: out of paper. Do not repeat the same call: plan around it."}
		if err := env.DB.AppendAudit(ctx, failed); err != nil {
			t.Fatal(err)
		}
		if p := b.get("/audit"); !strings.Contains(p.body, "The page failed: out of paper.") || strings.Contains(p.body, "Do not repeat") {
			t.Fatalf("the audit log shows a failure as %s", p.body)
		}
		if err := env.DB.WithContext(ctx).Exec("DELETE FROM audit_log WHERE id = ?", uuidBytes(t, failed.ID)).Error; err != nil {
			t.Fatal(err)
		}
		p := b.get("/audit")
		p.want(t, 200, "tool_54", "Ship it", "Alice&#39;s", "Decision: Grant", "Expired unanswered", "the agent was told it did not run", "token “laptop”",
			`<option value="https://other.example">`, `<option value="denied">Denied</option>`, "Older")
		row := func(tool string) string { return `<code class="tool">` + tool + `</code>` }
		if strings.Contains(p.body, row("tool_04")) || strings.Index(p.body, row("tool_54")) > strings.Index(p.body, row("tool_53")) {
			t.Fatal("the first page is not the newest 50, newest first")
		}
		older := regexpFind(t, p.body, `href="(/audit\?before=[^"]+)">Older`)
		b.get(strings.ReplaceAll(older, "&amp;", "&")).want(t, 200, "tool_04", "tool_00", "Older calls", "Newest")

		f := b.get("/audit?site=" + url.QueryEscape("https://other.example"))
		f.want(t, 200, "tool_50", "tool_00", `<option value="https://other.example" selected>`, "Clear filters")
		if strings.Contains(f.body, row("tool_51")) {
			t.Fatal("the site filter lets other sites through")
		}
		o := b.get("/audit?outcome=denied&tool=tool_20")
		o.want(t, 200, "tool_20")
		if strings.Contains(o.body, row("tool_30")) {
			t.Fatal("the tool filter lets other tools through")
		}
		b.get("/audit?task="+id.task+"&outcome=error").want(t, 200, "No calls match these filters.")
	})
}

func regexpFind(t *testing.T, body, expr string) string {
	t.Helper()
	m := regexp.MustCompile(expr).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in %.3000s", expr, body)
	}
	return m[1]
}

// TestWithdrawnRequestsSayWhyOnThePages: the task page labels each
// withdrawn request with its reason, and answering one says how it ended.
func TestWithdrawnRequestsSayWhyOnThePages(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, _ := aliceWorld(t, env)
	b := newBrowser(t, env, alice)
	a := newAsker(t, env, alice, id)
	gate := env.Server.ApprovalGate()

	// The agent gives up.
	ctx, giveUp := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := gate.Decide(ctx, a.call("archive", `{}`))
		gone <- err
	}()
	cancelled := eventOf(t, a.events, "approval.created")
	giveUp()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call returned %v", err)
	}
	eventOf(t, a.events, "approval.withdrawn")

	// The site stops being shared (newAsker shared it).
	var shared struct {
		Site struct{ ID string } `json:"site"`
	}
	alice.MustJSON("POST", "/api/sites", map[string]string{"origin": site, "workspaceId": id.workspace}, 200, &shared)
	siteID := shared.Site.ID
	_, unsharedDone := a.raise("publish", `{}`)
	alice.MustJSON("DELETE", "/api/sites/"+siteID, nil, 204, nil)
	if d := decision(t, unsharedDone); d.Withdrawn != approvals.WithdrawUnshared {
		t.Fatalf("unsharing released %+v", d)
	}

	// Left pending by an earlier run of the server.
	a.raise("rename", `{}`)
	if n, err := gate.WithdrawStale(context.Background()); err != nil || n != 1 {
		t.Fatalf("withdrew %d (%v), want 1", n, err)
	}

	b.get("/tasks/"+id.task).want(t, 200, "Withdrawn: the agent cancelled the call",
		"Withdrawn: the site is no longer shared with this workspace", "Withdrawn: the server restarted")
	var ended struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(cancelled.data), &ended); err != nil {
		t.Fatal(err)
	}
	answer(b, ended.ID, "once", "").want(t, 409, "That request already ended (Withdrawn: the agent cancelled the call)")
	var list struct {
		Approvals []approvals.Request `json:"approvals"`
	}
	alice.MustJSON("GET", "/api/tasks/"+id.task+"/approvals", nil, 200, &list)
	var reasons []string
	for _, r := range list.Approvals {
		reasons = append(reasons, string(r.WithdrawnReason))
	}
	if got := strings.Join(reasons, " "); got != "cancelled unshared restart" {
		t.Errorf("the API gives the reasons as %q", got)
	}
}

// uuidBytes is the 16 bytes the audit log stores an entry's id as.
func uuidBytes(t *testing.T, id string) []byte {
	t.Helper()
	u, err := uuid.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	return u[:]
}
