package server_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// browser drives the pages as a browser would, but does not follow
// redirects, so tests see each 303 and where it points.
type browser struct {
	t    *testing.T
	env  *servertest.Env
	c    *servertest.Client
	http *http.Client
}

func newBrowser(t *testing.T, env *servertest.Env, c *servertest.Client) *browser {
	hc := *c.HTTP
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: t, env: env, c: c, http: &hc}
}

type page struct {
	status   int
	location string
	body     string
	header   http.Header
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{resp.StatusCode, resp.Header.Get("Location"), string(body), resp.Header}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.env.URL+path, nil)
	return b.do(req)
}

// post submits a form with the CSRF token its page carries (unless vals
// sets _csrf): the tb_csrf cookie's value, which signing in sets to the
// sign-in's token.
func (b *browser) post(path string, vals url.Values) page {
	b.t.Helper()
	if vals == nil {
		vals = url.Values{}
	}
	if _, ok := vals["_csrf"]; !ok {
		vals.Set("_csrf", b.c.Cookie("tb_csrf"))
	}
	req, _ := http.NewRequest("POST", b.env.URL+path, strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func (p page) want(t *testing.T, status int, contains ...string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("status %d, want %d (location %q): %.400s", p.status, status, p.location, p.body)
	}
	for _, s := range contains {
		if !strings.Contains(p.body, s) {
			t.Fatalf("page lacks %q: %.2000s", s, p.body)
		}
	}
}

func (p page) redirect(t *testing.T, to string) {
	t.Helper()
	if p.status != http.StatusSeeOther || p.location != to {
		t.Fatalf("got %d to %q, want 303 to %q: %.300s", p.status, p.location, to, p.body)
	}
}

type aliceIDs struct {
	ids
	invitation string
}

// aliceWithInvitation is aliceWorld plus an unused invitation.
func aliceWithInvitation(t *testing.T, env *servertest.Env) (*servertest.Client, aliceIDs, string) {
	alice, id, secret := aliceWorld(t, env)
	var inv struct {
		Invitation struct {
			ID string `json:"id"`
		} `json:"invitation"`
	}
	alice.MustJSON("POST", "/api/invitations", map[string]string{"note": "for Sam"}, 201, &inv)
	return alice, aliceIDs{id, inv.Invitation.ID}, secret
}

// snapshot is everything of Alice's a form could change, as the API shows it.
func snapshot(t *testing.T, c *servertest.Client, id aliceIDs) string {
	t.Helper()
	var b strings.Builder
	for _, p := range []string{"/api/workspaces", "/api/workspaces/" + id.workspace + "/tokens",
		"/api/workspaces/" + id.workspace + "/tasks", "/api/invitations"} {
		_, body := c.Do("GET", p, nil)
		b.Write(body)
	}
	return b.String()
}

func TestPagesSendTheSignedOutToSetupThenSignin(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	anon := newBrowser(t, env, env.NewClient(t))
	anon.get("/workspaces").redirect(t, "/setup")
	anon.get("/signin").redirect(t, "/setup")
	anon.get("/setup").want(t, 200, `action="/setup"`, `name="_csrf"`)

	env.Person(t, "alice@example.com")
	anon.get("/setup").redirect(t, "/signin")
	anon.get("/workspaces/abc?x=1").redirect(t, "/signin?next=%2Fworkspaces%2Fabc%3Fx%3D1")
	anon.get("/").redirect(t, "/signin?next=%2F")
	anon.post("/workspaces", url.Values{"name": {"x"}}).redirect(t, "/signin?next=%2F")
	anon.get("/signin?next=/settings").want(t, 200, `name="next" value="/settings"`)
}

func TestSetupSignOutAndSignInThroughForms(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	b := newBrowser(t, env, env.NewClient(t))
	b.post("/setup", url.Values{"name": {"Alice"}, "email": {"alice@example.com"}, "password": {"short"}}).
		want(t, 400, "password", `value="alice@example.com"`)
	b.post("/setup", url.Values{"name": {"Alice"}, "email": {"alice@example.com"}, "password": {"long enough"}}).redirect(t, "/workspaces")
	b.get("/workspaces").want(t, 200, "Alice", "No workspaces yet", "Sign out")
	// A second owner cannot be set up, by form or otherwise.
	other := newBrowser(t, env, env.NewClient(t))
	other.post("/setup", url.Values{"name": {"Mallory"}, "email": {"m@example.com"}, "password": {"long enough"}}).want(t, 409, "already has its owner")

	b.post("/signout", nil).redirect(t, "/signin")
	b.get("/workspaces").redirect(t, "/signin?next=%2Fworkspaces")
	b.post("/signin", url.Values{"email": {"alice@example.com"}, "password": {"wrong password"}, "next": {"/settings"}}).
		want(t, 401, "do not match", `value="alice@example.com"`, `name="next" value="/settings"`)
	b.post("/signin", url.Values{"email": {"alice@example.com"}, "password": {"long enough"}, "next": {"/settings"}}).redirect(t, "/settings")
	b.get("/signin").redirect(t, "/")
	// An open redirect is refused: next stays on this server.
	b.post("/signout", nil)
	b.post("/signin", url.Values{"email": {"alice@example.com"}, "password": {"long enough"}, "next": {"//evil.example/x"}}).redirect(t, "/")
	// Browsers drop tabs and newlines and read a backslash as a slash: each of these would leave.
	for _, evil := range []string{"/\t/evil.example/x", "/\n/evil.example", "/\x0b/evil.example", "/\\evil.example", "\\/evil.example",
		"https://evil.example", "/\r\nSet-Cookie: x=1", " //evil.example"} {
		b.get("/signin?next="+url.QueryEscape(evil)).redirect(t, "/")
	}
	b.get("/signin?next="+url.QueryEscape("/tasks/1?tab=calls#top")).redirect(t, "/tasks/1?tab=calls#top")
}

func TestInvitationAndSignupPages(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice := env.Person(t, "alice@example.com")
	ab := newBrowser(t, env, alice)
	created := ab.post("/settings/invitations", url.Values{"note": {"for Sam"}})
	created.want(t, 201, "Invitation link created", "for Sam")
	link := regexp.MustCompile(`id="invite-url"[^>]*>([^<]+)<`).FindStringSubmatch(created.body)
	if link == nil {
		t.Fatalf("no invitation link shown: %s", created.body)
	}
	path := strings.TrimPrefix(link[1], env.Opts.PublicURL)
	ab.get("/settings").want(t, 200, "for Sam", "Withdraw")
	if strings.Contains(ab.get("/settings").body, path) {
		t.Fatal("the settings page shows the invitation link again")
	}

	sam := newBrowser(t, env, env.NewClient(t))
	sam.get(path).want(t, 200, `action="`+path+`"`)
	sam.post(path, url.Values{"name": {"Sam"}, "email": {"sam@example.com"}, "password": {"sam's password"}}).redirect(t, "/workspaces")
	sam.get("/settings").want(t, 200, "sam@example.com", "Member")
	if strings.Contains(sam.get("/settings").body, "Invitations") {
		t.Fatal("a member sees the invitations section")
	}
	sam.post("/settings/invitations", nil).want(t, 403, "Only the server")
	// A used link is refused, and says what to do.
	other := newBrowser(t, env, env.NewClient(t))
	other.post(path, url.Values{"name": {"Eve"}, "email": {"eve@example.com"}, "password": {"eve's password"}}).want(t, 400, "ask the owner for a new one")

	other.get("/signup").want(t, 403, "by invitation")
}

func TestOpenSignupPage(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.OpenSignup = true })
	env.Person(t, "alice@example.com")
	b := newBrowser(t, env, env.NewClient(t))
	b.get("/signin").want(t, 200, `href="/signup"`)
	b.post("/signup", url.Values{"name": {"Bob"}, "email": {"ALICE@example.com"}, "password": {"bob's password"}}).want(t, 409, "sign in instead")
	b.post("/signup", url.Values{"name": {"Bob"}, "email": {"bob@example.com"}, "password": {"bob's password"}}).redirect(t, "/workspaces")
}

// TestEveryPageRendersForTheOwner opens each signed-in page on both databases.
func TestEveryPageRendersForTheOwner(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		alice, id, _ := aliceWithInvitation(t, env)
		b := newBrowser(t, env, alice)
		b.get("/").want(t, 200, "Inbox", `aria-current="page">Inbox`)
		b.get("/grants").want(t, 200, "No grants.")
		b.get("/audit").want(t, 200, "No calls yet.")
		p := b.get("/workspaces")
		p.want(t, 200, "Alice&#39;s", `href="/workspaces/`+id.workspace+`"`, `data-src="/workspaces"`)
		if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'self' chrome-extension://"+servertest.ExtensionID) {
			t.Errorf("CSP %q does not let only the extension frame the app", csp)
		}
		if p.header.Get("Cache-Control") != "no-store" {
			t.Errorf("pages may be cached: %q", p.header.Get("Cache-Control"))
		}
		b.get("/workspaces/"+id.workspace).want(t, 200, "laptop", "never used", "Ship it", "Not started", "Create token", "Revoke")
		b.get("/workspaces/"+id.workspace+"/delete").want(t, 200, "Delete “Alice&#39;s”?", "cannot be undone")
		b.get("/tasks/"+id.task).want(t, 200, "Ship it", "Opened by", "you", `<option value="ongoing">`)
		b.get("/settings").want(t, 200, "alice@example.com", "Owner", "for Sam", "expires in 7 days")
		b.get("/static/app.css").want(t, 200, "prefers-color-scheme: dark")
		b.get("/nope").want(t, 404)
	})
}

func TestWorkspaceAndTaskFormsChangeThings(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, _ := aliceWithInvitation(t, env)
	b := newBrowser(t, env, alice)
	ws := "/workspaces/" + id.workspace

	b.post("/workspaces", url.Values{"name": {"  "}}).want(t, 400, "must not be blank")
	created := b.post("/workspaces", url.Values{"name": {"Second"}})
	if created.status != 303 || !strings.HasPrefix(created.location, "/workspaces/") {
		t.Fatalf("create workspace: %d %q", created.status, created.location)
	}
	b.get(created.location).want(t, 200, "Second", "No agent tokens.", "No tasks yet.")

	b.post(ws+"/rename", url.Values{"name": {"Renamed"}}).redirect(t, ws)
	b.post(ws+"/rename", url.Values{"name": {""}}).want(t, 400, "must not be blank")

	tok := b.post(ws+"/tokens", url.Values{"tokenName": {"build box"}})
	tok.want(t, 201, "Token “build box” created", "claude mcp add --transport http tabbridge-build-box "+env.Opts.PublicURL+"/mcp --header &#39;Authorization: Bearer tba_", `data-src="`+ws+`"`)
	secret := regexp.MustCompile(`id="token-secret"[^>]*>(tba_[^<]+)<`).FindStringSubmatch(tok.body)
	if secret == nil {
		t.Fatalf("no secret shown: %s", tok.body)
	}
	env.Agent(t, secret[1]).MustJSON("GET", "/api/agent/workspace", nil, 200, nil)
	if strings.Contains(b.get(ws).body, secret[1]) {
		t.Fatal("the workspace page shows a token's secret after its creation")
	}
	b.post(ws+"/tokens", url.Values{"tokenName": {""}}).want(t, 400, "must not be blank")
	b.post(ws+"/tokens/"+id.token+"/revoke", nil).redirect(t, ws+"?revoked=token")
	b.get(ws+"?revoked=token").want(t, 200, "Token revoked: an agent using it is refused from its next request.")
	if strings.Contains(b.get(ws).body, ">laptop<") {
		t.Fatal("revoked token still listed")
	}

	b.post(ws+"/tasks", url.Values{"title": {"Write docs"}}).redirect(t, ws)
	b.get(ws).want(t, 200, "Write docs")
	b.post("/tasks/"+id.task, url.Values{"status": {"blocked"}}).redirect(t, "/tasks/"+id.task)
	b.post("/tasks/"+id.task, url.Values{"status": {"done"}}).want(t, 400, "notstarted")
	b.post("/tasks/"+id.task, url.Values{"title": {"Ship it today"}}).redirect(t, "/tasks/"+id.task)
	b.get("/tasks/"+id.task).want(t, 200, "Ship it today", "Blocked")

	b.post("/settings/invitations/"+id.invitation+"/withdraw", nil).redirect(t, "/settings")
	b.get("/settings").want(t, 200, "No invitations.")

	b.post(ws+"/delete", nil).redirect(t, "/workspaces")
	b.get(ws).want(t, 404, "No workspace with that id")
	b.get("/tasks/"+id.task).want(t, 404)
}

// forms lists every state-changing page form, with valid values.
func forms(id aliceIDs) []struct {
	path string
	vals url.Values
} {
	ws := "/workspaces/" + id.workspace
	return []struct {
		path string
		vals url.Values
	}{
		{"/workspaces", url.Values{"name": {"x"}}},
		{ws + "/rename", url.Values{"name": {"x"}}},
		{ws + "/delete", nil},
		{ws + "/tokens", url.Values{"tokenName": {"x"}}},
		{ws + "/tokens/" + id.token + "/revoke", nil},
		{ws + "/tasks", url.Values{"title": {"x"}}},
		{"/tasks/" + id.task, url.Values{"status": {"completed"}, "title": {"x"}}},
		{"/settings/invitations", url.Values{"note": {"x"}}},
		{"/settings/invitations/" + id.invitation + "/withdraw", nil},
		{"/settings/password", url.Values{"current_password": {"password-alice@example.com"}, "new_password": {"another password"}}},
		{"/signout", nil},
	}
}

func TestPageFormsRefuseMissingOrWrongCSRF(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, _ := aliceWithInvitation(t, env)
	b := newBrowser(t, env, alice)
	before := snapshot(t, alice, id)
	for _, f := range forms(id) {
		for _, token := range []string{"", "forged-forged-forged-forged-forged-forged"} {
			vals := url.Values{}
			for k, v := range f.vals {
				vals[k] = v
			}
			vals.Set("_csrf", token)
			p := b.post(f.path, vals)
			if p.status != 403 || !strings.Contains(p.body, "CSRF") {
				t.Errorf("POST %s with _csrf=%q: %d, want 403: %.200s", f.path, token, p.status, p.body)
			}
		}
	}
	for _, f := range []string{"/setup", "/signin"} {
		if p := b.post(f, url.Values{"_csrf": {""}, "email": {"alice@example.com"}, "password": {"password-alice@example.com"}}); p.status != 403 {
			t.Errorf("POST %s without CSRF: %d", f, p.status)
		}
	}
	if after := snapshot(t, alice, id); after != before {
		t.Fatalf("refused forms changed something:\nbefore %s\nafter  %s", before, after)
	}
	b.get("/workspaces").want(t, 200) // and Alice is still signed in
}

func TestOtherPeoplesPagesAndFormsAreNotFound(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
		alice, id, _ := aliceWithInvitation(t, env)
		before := snapshot(t, alice, id)
		bob := newBrowser(t, env, env.Person(t, "bob@example.com"))
		ws := "/workspaces/" + id.workspace
		for _, p := range []string{ws, ws + "/delete", "/tasks/" + id.task} {
			bob.get(p).want(t, 404, "No ")
		}
		for _, f := range forms(id) {
			if f.path == "/workspaces" || f.path == "/signout" || strings.HasPrefix(f.path, "/settings") {
				continue // not about someone else's things (settings: Bob is no owner, below)
			}
			if p := bob.post(f.path, f.vals); p.status != 404 {
				t.Errorf("bob POST %s: %d, want 404: %.200s", f.path, p.status, p.body)
			}
		}
		if p := bob.post("/settings/invitations/"+id.invitation+"/withdraw", nil); p.status != 403 && p.status != 404 {
			t.Errorf("bob withdraws alice's invitation: %d", p.status)
		}
		if after := snapshot(t, alice, id); after != before {
			t.Fatalf("bob changed alice's things:\nbefore %s\nafter  %s", before, after)
		}
		if strings.Contains(bob.get("/workspaces").body, "Alice") {
			t.Fatal("bob's workspace list shows alice's workspace")
		}
	})
}

func TestPagesRefuseAgentTokens(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, secret := aliceWithInvitation(t, env)
	b := newBrowser(t, env, alice)
	before := snapshot(t, alice, id)
	for _, p := range []string{"/workspaces", "/workspaces/" + id.workspace, "/tasks/" + id.task, "/settings"} {
		req, _ := http.NewRequest("GET", env.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		b.do(req).want(t, 401, "Agent tokens do not open the web app")
	}
	vals := url.Values{"_csrf": {alice.CSRF}, "name": {"x"}}
	req, _ := http.NewRequest("POST", env.URL+"/workspaces", strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+secret)
	b.do(req).want(t, 401)
	// Without a cookie the token alone is refused too.
	anon := newBrowser(t, env, env.Agent(t, secret))
	req, _ = http.NewRequest("GET", env.URL+"/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	anon.do(req).want(t, 401)
	if snapshot(t, alice, id) != before {
		t.Fatal("an agent token changed something through a page")
	}
}

// TestPagesRefreshAnExpiredSession lets the access token expire: the page
// still opens, with new cookies, and the old refresh token is spent.
func TestPagesRefreshAnExpiredSession(t *testing.T) {
	var clk clock
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.Now = clk.now })
	alice := env.Person(t, "alice@example.com")
	b := newBrowser(t, env, alice)
	oldAccess, oldRefresh := alice.Cookie("tb_access"), alice.Cookie("tb_refresh")
	clk.advance(20 * time.Minute)
	if status, body := alice.Do("GET", "/api/workspaces", nil); status != 401 || servertest.ErrorCode(body) != "access_expired" {
		t.Fatalf("API with an expired access token: %d %s", status, body)
	}
	b.get("/workspaces").want(t, 200, "Workspaces")
	if alice.Cookie("tb_access") == oldAccess || alice.Cookie("tb_refresh") == oldRefresh {
		t.Fatal("the page did not rotate the session cookies")
	}
	alice.MustJSON("GET", "/api/workspaces", nil, 200, nil) // the new access token works
	// A sign-in ended elsewhere is not brought back by a page.
	alice.MustJSON("POST", "/api/auth/signout", nil, 200, nil)
	b.get("/workspaces").redirect(t, "/signin?next=%2Fworkspaces")
}

// TestEveryControlHasALabel parses every page's forms: each visible input,
// select and textarea has a <label for>, an aria-label or aria-labelledby.
func TestEveryControlHasALabel(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.OpenSignup = true })
	anon := newBrowser(t, env, env.NewClient(t))
	pages := map[string]string{"/setup": anon.get("/setup").body}
	alice, id, _ := aliceWithInvitation(t, env)
	b := newBrowser(t, env, alice)
	ws := "/workspaces/" + id.workspace
	pages["/signin"] = anon.get("/signin").body
	pages["/signup"] = anon.get("/signup").body
	pages["/invite/x"] = anon.get("/invite/x").body
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	alice.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	if err := env.DB.AppendAudit(context.Background(), &store.AuditEntry{UserID: me.User.ID, WorkspaceID: id.workspace,
		TokenID: id.token, TaskID: id.task, Site: site, Tool: "t", Decision: "grant", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	newAsker(t, env, alice, id.ids).raise("fill_form", `{"a":1}`)
	for _, p := range []string{"/workspaces", ws, ws + "/delete", "/tasks/" + id.task, "/settings", "/", "/grants", "/audit"} {
		pages[p] = b.get(p).body
	}
	pages["token created"] = b.post(ws+"/tokens", url.Values{"tokenName": {"y"}}).body
	pages["invitation created"] = b.post("/settings/invitations", nil).body
	controls := 0
	for name, body := range pages {
		controls += checkControls(t, name, body)
	}
	if controls < 15 {
		t.Fatalf("checked only %d controls; the pages did not render", controls)
	}
}

// checkControls fails the test for each visible input, select or textarea
// of a page without a <label for>, an aria-label or aria-labelledby, and
// each button without a name; it returns how many controls it checked.
func checkControls(t *testing.T, name, body string) int {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	labels := map[string]bool{}
	ids := map[string]bool{}
	walk(doc, func(n *html.Node) {
		if n.Data == "label" && attr(n, "for") != "" {
			labels[attr(n, "for")] = true
		}
		if id := attr(n, "id"); id != "" {
			ids[id] = true
		}
	})
	controls := 0
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode || (n.Data != "input" && n.Data != "select" && n.Data != "textarea") {
			return
		}
		if attr(n, "type") == "hidden" {
			return
		}
		controls++
		id := attr(n, "id")
		ok := (id != "" && labels[id]) || attr(n, "aria-label") != "" || ids[attr(n, "aria-labelledby")]
		if !ok {
			t.Errorf("%s: <%s name=%q> has no label", name, n.Data, attr(n, "name"))
		}
	})
	// Buttons need a name too.
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "button" && strings.TrimSpace(text(n)) == "" && attr(n, "aria-label") == "" {
			t.Errorf("%s: a button has no text", name)
		}
	})
	return controls
}

func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return b.String()
}

// TestSigninPagesShareTheAPIAttemptBudget: guessing through the pages and the
// API draws on one budget per address.
func TestSigninPagesShareTheAPIAttemptBudget(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.AuthAttemptsPerMinute = 4 })
	env.Person(t, "alice@example.com") // one attempt (setup)
	c := env.NewClient(t)
	b := newBrowser(t, env, c)
	wrong := map[string]string{"email": "alice@example.com", "password": "wrong password"}
	c.MustJSON("POST", "/api/auth/signin", wrong, 401, nil)
	c.MustJSON("POST", "/api/auth/signin", wrong, 401, nil)
	b.post("/signin", url.Values{"email": {"alice@example.com"}, "password": {"wrong password"}}).want(t, 401)
	b.post("/signin", url.Values{"email": {"alice@example.com"}, "password": {"wrong password"}}).want(t, 429, "Too many attempts")
}

// Deleting a workspace from its page does what the API does: the person's
// browsers are told its shared sites are gone.
func TestDeletingAWorkspaceFromItsPageUnsharesItsSites(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice := env.Person(t, "alice@example.com")
	ws := alice.Workspace("Shop")
	alice.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://shop.example", "workspaceId": ws}, 201, nil)
	br, welcome := extBrowser(t, env, alice, "browser-one")
	if len(welcome.SharedSites) != 1 {
		t.Fatalf("welcome shares %v", welcome.SharedSites)
	}
	newBrowser(t, env, alice).post("/workspaces/"+ws+"/delete", nil).want(t, 303)
	m, err := br.Expect("sites", testutil.WaitShort)
	if err != nil || len(m.SharedSites) != 0 {
		t.Fatalf("after deleting the workspace from its page: %+v %v", m, err)
	}
}

// TestUnknownPathsAreAPageForBrowsers: a browser asking for a page that
// does not exist gets the app's HTML 404 (with the navigation when signed
// in); the API and clients not asking for HTML keep the JSON error.
func TestUnknownPathsAreAPageForBrowsers(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, _, _ := aliceWorld(t, env)
	get := func(b *browser, path, accept string) page {
		t.Helper()
		req, _ := http.NewRequest("GET", env.URL+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		return b.do(req)
	}
	html := "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	signedIn := newBrowser(t, env, alice)
	p := get(signedIn, "/nope", html)
	p.want(t, 404, "<title>Not Found · Tabbridge</title>", "There is no such page.", `id="nav-inbox"`)
	if !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
		t.Errorf("an unknown page is %q", p.header.Get("Content-Type"))
	}
	get(newBrowser(t, env, env.NewClient(t)), "/nope/deeper", html).want(t, 404, "There is no such page.", `href="/signin"`)
	get(signedIn, "/api/nope", html).want(t, 404, `"code":"no_route"`)
	get(signedIn, "/nope", "").want(t, 404, `"code":"no_route"`)
	get(signedIn, "/nope", "application/json").want(t, 404, `"code":"no_route"`)
}
