package server_test

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/daemon/daemontest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// eventOf waits on the person's event stream for an event of typ.
func eventOf(t *testing.T, s *stream, typ string) sseEvent {
	t.Helper()
	for {
		if e := s.next(t, false); e.typ == typ {
			return e
		}
	}
}

// eventsOf reads the stream until it has seen every one of typs, in any order.
func eventsOf(t *testing.T, s *stream, typs ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, typ := range typs {
		want[typ] = true
	}
	for len(want) > 0 {
		delete(want, s.next(t, false).typ)
	}
}

var tokenRe = regexp.MustCompile(`tbm_[A-Za-z0-9_-]+`)

// TestMachinePagesWithARealDaemon walks the machines pages as a person does:
// the empty state, creating a machine (its token and the exact command shown
// once), a real daemon connecting with that token and running a real
// program, the page showing it online with the session and its state as
// the relay reports them live, renaming, the session's terminal page, and
// revoking after a confirmation.
func TestMachinePagesWithARealDaemon(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	ada := env.Person(t, "ada@example.com")
	b := newBrowser(t, env, ada)
	events := openStream(t, env, ada, nil)

	b.get("/machines").want(t, 200, `id="nav-machines" href="/machines" aria-current="page"`,
		`<label for="machine-name">Machine name</label>`, `<input id="machine-name" name="name"`,
		"No machine connected yet.", "Create one here and run the command it shows on the machine where your agents run.")

	b.post("/machines", url.Values{"name": {"  "}}).want(t, 400, `role="alert"`, "name")
	p := b.post("/machines", url.Values{"name": {"laptop"}})
	p.want(t, 201, `Machine “laptop” created`, `id="daemon-command" aria-labelledby="daemon-command-label">tabbridge daemon enroll --server `+env.Opts.PublicURL+"</pre>",
		`id="machine-token" aria-labelledby="machine-token-label">tbm_`, "tabbridge run -- claude</pre>",
		`data-copy="daemon-command"`, `data-src="/machines"`)
	if strings.Contains(p.body, "--token") {
		t.Fatal("the page still puts the token in a command line")
	}
	if p.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("a page with a secret may be cached: %q", p.header.Get("Cache-Control"))
	}
	token := tokenRe.FindString(p.body)
	eventOf(t, events, "machine.created")
	b.get("/machines").want(t, 200, "laptop", "Offline", "Never connected")
	if strings.Contains(b.get("/machines").body, token) {
		t.Fatal("the token is shown again")
	}

	d := daemontest.Start(t, env.URL, token, 10*time.Millisecond)
	eventOf(t, events, "machine.online")
	id, err := d.Start(daemon.Spec{Argv: []string{"sh", "-c", "echo ready; read x; exit 4"}, Cols: 90, Rows: 20,
		Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	if e := eventOf(t, events, "session.started"); !strings.Contains(e.data, id) {
		t.Fatalf("session.started %s", e.data)
	}
	b.get("/machines").want(t, 200, "Online", "Connected now", `aria-label="Sessions on laptop"`, `<label for="rename-`, `href="/sessions/`+id+`"`, "sh -c echo ready; read x; exit 4",
		"90×20", "0 viewers", "Running")

	term := b.get("/sessions/" + id)
	term.want(t, 200, `data-session="`+id+`"`, "sh -c echo ready; read x; exit 4", "laptop",
		`src="/static/vendor/xterm/xterm.js"`, `src="/static/terminal.js"`, `id="mode-watch"`,
		// the page refuses a paste the server would refuse, by the server's own limit
		fmt.Sprintf(`data-max-input="%d"`, wire.MaxInput), `id="term-notice"`)
	if strings.Contains(term.body, "data-src=") {
		t.Fatal("the terminal page takes part in live page refreshes")
	}
	csp := term.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self';") || !strings.Contains(csp, "style-src 'self' 'unsafe-inline';") ||
		!strings.Contains(csp, "frame-ancestors 'self'") {
		t.Fatalf("terminal page CSP %q", csp)
	}
	if csp := b.get("/machines").header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("the machines page relaxed its CSP: %q", csp)
	}
	for _, f := range []string{"/static/terminal.js", "/static/terminal.css", "/static/vendor/xterm/xterm.js",
		"/static/vendor/xterm/addon-webgl.js", "/static/vendor/xterm/addon-fit.js", "/static/vendor/xterm/xterm.css",
		"/static/vendor/xterm/addon-unicode11.js", "/static/vendor/xterm/LICENSE-addon-unicode11",
		"/static/vendor/xterm/LICENSE-xterm"} {
		b.get(f).want(t, 200)
	}

	sess, _ := d.Session(id)
	if err := sess.Input([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	if e := eventOf(t, events, "session.exited"); !strings.Contains(e.data, `"exitCode":4`) {
		t.Fatalf("session.exited %s", e.data)
	}
	b.get("/machines").want(t, 200, "Exited 4")

	m := regexp.MustCompile(`action="/machines/([^/"]+)/rename"`).FindStringSubmatch(b.get("/machines").body)
	if m == nil {
		t.Fatal("no rename form")
	}
	mid := m[1]
	b.post("/machines/"+mid+"/rename", url.Values{"name": {""}}).want(t, 400, `<details id="machine-`+mid+`-rename" open>`, `role="alert"`)
	b.post("/machines/"+mid+"/rename", url.Values{"name": {"desk"}}).redirect(t, "/machines")
	eventOf(t, events, "machine.updated")
	b.get("/machines").want(t, 200, "desk")

	b.get("/machines/"+mid+"/revoke").want(t, 200, "Revoke “desk”?", "ending its session", `action="/machines/`+mid+`/revoke"`)
	b.post("/machines/"+mid+"/revoke", nil).redirect(t, "/machines?revoked=1")
	b.get("/machines?revoked=1").want(t, 200, "Machine revoked: its token no longer works")
	// The link's reader emits machine.offline as it ends, so it may come
	// before or after the revoke handler's machine.revoked.
	eventsOf(t, events, "machine.revoked", "machine.offline")
	b.get("/machines").want(t, 200, "No machine connected yet.")
	b.get("/sessions/"+id).want(t, 404)
}

// TestMachinePagesRefuseOthersForgeriesAndAgents: another person gets 404
// for every page and form of Ada's machine and session and sees none of
// them; a form without the CSRF token changes nothing; an agent token does
// not open the pages.
func TestMachinePagesRefuseOthersForgeriesAndAgents(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.OpenSignup = true })
	ada := env.Person(t, "ada@example.com")
	var created struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
	}
	ada.MustJSON("POST", "/api/machines", map[string]string{"name": "ada-laptop"}, 201, &created)
	d := daemontest.Start(t, env.URL, created.Token, 10*time.Millisecond)
	sid, err := d.Start(daemon.Spec{Argv: []string{"sh", "-c", "read x"}, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	ab := newBrowser(t, env, ada)
	testutil.Eventually(t, testutil.WaitMedium, func() bool { return strings.Contains(ab.get("/machines").body, sid) }, // the listing has no event to wait on here
		"the session never showed")
	mid := created.Machine.ID

	bob := newBrowser(t, env, env.Person(t, "bob@example.com"))
	if p := bob.get("/machines"); strings.Contains(p.body, "ada-laptop") || strings.Contains(p.body, sid) {
		t.Fatal("Bob sees Ada's machine")
	}
	bob.get("/sessions/"+sid).want(t, 404)
	bob.get("/machines/"+mid+"/revoke").want(t, 404)
	bob.post("/machines/"+mid+"/rename", url.Values{"name": {"mine"}}).want(t, 404)
	bob.post("/machines/"+mid+"/revoke", nil).want(t, 404)
	if status, _ := bob.c.Do("POST", "/api/sessions/"+sid+"/viewer-ticket", map[string]bool{"watchOnly": true}); status != 404 {
		t.Fatalf("Bob got a ticket for Ada's session: %d", status)
	}

	// Forged forms (no token, or another's) change nothing.
	ab.post("/machines", url.Values{"name": {"forged"}, "_csrf": {""}}).want(t, 403)
	ab.post("/machines/"+mid+"/rename", url.Values{"name": {"forged"}, "_csrf": {bob.c.CSRF}}).want(t, 403)
	ab.post("/machines/"+mid+"/revoke", url.Values{"_csrf": {"nope"}}).want(t, 403)
	page := ab.get("/machines")
	page.want(t, 200, "ada-laptop", "Online")
	if strings.Contains(page.body, "forged") {
		t.Fatal("a forged form changed something")
	}

	// An agent token does not open the web app.
	agent := env.Agent(t, ada.AgentToken(ada.Workspace("w"), "t"))
	for _, path := range []string{"/machines", "/sessions/" + sid} {
		if status, body := agent.Do("GET", path, nil); status != 401 || !strings.Contains(string(body), "Agent tokens do not open the web app") {
			t.Fatalf("agent token on %s: %d %.200s", path, status, body)
		}
	}
}
