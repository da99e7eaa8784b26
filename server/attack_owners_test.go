package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/daemon/daemontest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// The names Alice gives her things: none of them may appear in an answer to
// Bob. Each is distinctive, so no page of Bob's has it by chance.
const (
	ownerWorkspace = "Alice Hidden Workspace"
	ownerTokenName = "alice-hidden-token"
	ownerTask      = "Alice hidden task"
	ownerOrigin    = "https://alice-hidden.example"
	ownerBrowser   = "alice-hidden-browser"
	ownerMachine   = "alice-hidden-machine"
	ownerCommand   = "alice_hidden_command"
	ownerNote      = "alice-hidden-note"
	ownerToolText  = "alice-hidden-tool-text"
	ownerEmail     = "alice-hidden@example.com"
)

var ownerMarkers = []string{ownerWorkspace, ownerTokenName, ownerTask, ownerOrigin, ownerBrowser, ownerMachine,
	ownerCommand, ownerNote, ownerToolText, ownerEmail, "alice-hidden"}

const ownerTools = `[
 {"name":"search","description":"Search ` + ownerToolText + `","annotations":{"readOnlyHint":true},
  "inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}},
 {"name":"buy","description":"Buy ` + ownerToolText + `","inputSchema":{"type":"object","properties":{"item":{"type":"string"}},"required":["item"]}},
 {"name":"pay","description":"Pay ` + ownerToolText + `","inputSchema":{"type":"object","properties":{"item":{"type":"string"}},"required":["item"]}},
 {"name":"ship","description":"Ship ` + ownerToolText + `","inputSchema":{"type":"object","properties":{"item":{"type":"string"}},"required":["item"]}}
]`

// ownerKind names a kind of thing the server keeps that a route takes the
// id of. Each person's ids are listed by kind; a kind may have several ids
// (an approval request pending, denied, allowed).
type ownerKind string

const (
	kWorkspace  ownerKind = "workspace"
	kToken      ownerKind = "agent token"
	kTask       ownerKind = "task"
	kSite       ownerKind = "shared site"
	kGrant      ownerKind = "grant"
	kApproval   ownerKind = "approval request"
	kMachine    ownerKind = "machine"
	kSession    ownerKind = "terminal session"
	kBrowser    ownerKind = "browser"
	kInvitation ownerKind = "invitation"
	kSignIn     ownerKind = "sign-in"
	kClient     ownerKind = "connected client"
)

// routeParams says, for every route path with parameters, what kind of
// thing each parameter names. A route the server gains that is not here
// fails the sweep, saying to add it.
var routeParams = map[string]map[string]ownerKind{
	"/api/auth/signins/:id":                   {"id": kSignIn},
	"/api/grants/:id":                         {"id": kGrant},
	"/api/invitations/:id":                    {"id": kInvitation},
	"/api/machines/:id":                       {"id": kMachine},
	"/api/machines/:id/sessions":              {"id": kMachine},
	"/api/sites/:id":                          {"id": kSite},
	"/api/workspaces/:id":                     {"id": kWorkspace},
	"/api/workspaces/:id/clients":             {"id": kWorkspace},
	"/api/workspaces/:id/clients/:grantId":    {"id": kWorkspace, "grantId": kClient},
	"/api/workspaces/:id/tokens":              {"id": kWorkspace},
	"/api/workspaces/:id/tokens/:tokenId":     {"id": kWorkspace, "tokenId": kToken},
	"/api/workspaces/:id/tasks":               {"id": kWorkspace},
	"/api/tasks/:id":                          {"id": kTask},
	"/api/tasks/:id/approvals":                {"id": kTask},
	"/api/browsers/:id":                       {"id": kBrowser},
	"/api/approvals/:id/answer":               {"id": kApproval},
	"/api/approvals/:id/forget":               {"id": kApproval},
	"/api/sessions/:id/viewer-ticket":         {"id": kSession},
	"/approvals/:id/answer":                   {"id": kApproval},
	"/approvals/:id/forget":                   {"id": kApproval},
	"/browsers/:id/rename":                    {"id": kBrowser},
	"/grants/:id/revoke":                      {"id": kGrant},
	"/machines/:id/rename":                    {"id": kMachine},
	"/machines/:id/revoke":                    {"id": kMachine},
	"/sessions/:id":                           {"id": kSession},
	"/settings/invitations/:id/withdraw":      {"id": kInvitation},
	"/settings/signins/:id/signout":           {"id": kSignIn},
	"/sites/:id/ask":                          {"id": kSite},
	"/sites/:id/delete":                       {"id": kSite},
	"/sites/:id/move":                         {"id": kSite},
	"/tasks/:id":                              {"id": kTask},
	"/workspaces/:id":                         {"id": kWorkspace},
	"/workspaces/:id/clients/:grantId/revoke": {"id": kWorkspace, "grantId": kClient},
	"/workspaces/:id/delete":                  {"id": kWorkspace},
	"/workspaces/:id/rename":                  {"id": kWorkspace},
	"/workspaces/:id/tasks":                   {"id": kWorkspace},
	"/workspaces/:id/tokens":                  {"id": kWorkspace},
	"/workspaces/:id/tokens/:tokenId/revoke":  {"id": kWorkspace, "tokenId": kToken},
}

// bearerRoutes take a secret in the path that is itself the key: whoever
// holds an invitation link may use it, as its note says. They are not a
// person's id and are left out of the sweep on purpose.
var bearerRoutes = map[string]string{
	"/invite/:token": "the invitation link's secret is the credential; holding it is the permission",
}

// routeBodies gives the body each state-changing route is sent, valid for
// its own person so that only ownership can refuse it. A field value
// "{kind}" is a slot filled with an id of that kind, Alice's or Bob's, just
// as path parameters are. API routes take JSON; page routes take forms.
var routeBodies = map[string]map[string]string{
	"PATCH /api/workspaces/:id":            {"name": "bob-was-here"},
	"POST /api/workspaces/:id/tokens":      {"name": "bob-was-here"},
	"POST /api/workspaces/:id/tasks":       {"title": "bob-was-here"},
	"PATCH /api/tasks/:id":                 {"title": "bob-was-here", "status": "completed"},
	"POST /api/approvals/:id/answer":       {"answer": "always"},
	"PATCH /api/sites/:id":                 {"askAll": "true"},
	"PATCH /api/browsers/:id":              {"name": "bob-was-here"},
	"PATCH /api/machines/:id":              {"name": "bob-was-here"},
	"POST /api/sessions/:id/viewer-ticket": {"watchOnly": "false"},
	"POST /api/sites":                      {"origin": "https://bob-new.example", "workspaceId": "{workspace}"},
	"POST /approvals/:id/answer":           {"answer": "always"},
	"POST /browsers/:id/rename":            {"name": "bob-was-here"},
	"POST /machines/:id/rename":            {"name": "bob-was-here"},
	"POST /sites/:id/ask":                  {"askAll": "off"},
	"POST /sites/:id/move":                 {"workspaceId": "{workspace}"},
	"POST /sites":                          {"origin": "https://bob-new.example", "workspaceId": "{workspace}"},
	"POST /tasks/:id":                      {"title": "bob-was-here", "status": "completed"},
	"POST /workspaces/:id/rename":          {"name": "bob-was-here"},
	"POST /workspaces/:id/tasks":           {"title": "bob-was-here"},
	"POST /workspaces/:id/tokens":          {"tokenName": "bob-was-here"},
}

// queryProbes are list routes that take an id of Alice's as a filter in
// the query. A filter naming another person's thing is refused where the
// API says so (404), and otherwise narrows Bob's own list: either way
// nothing of Alice's shows.
var queryProbes = []struct {
	path   string
	kinds  map[string]ownerKind
	status int
}{
	{"/api/approvals", map[string]ownerKind{"task": kTask}, http.StatusNotFound},
	{"/api/audit", map[string]ownerKind{"workspace": kWorkspace}, http.StatusOK},
	{"/api/audit", map[string]ownerKind{"task": kTask}, http.StatusOK},
	{"/audit", map[string]ownerKind{"task": kTask}, http.StatusOK},
}

// ownerIDs are one person's ids by kind.
type ownerIDs map[ownerKind][]string

func (o ownerIDs) one(k ownerKind) string {
	if len(o[k]) == 0 {
		return ""
	}
	return o[k][0]
}

// ownersWorld is Alice, the server's owner, with one of everything, live:
// her browser is connected with her site's page open, her agent is
// connected over MCP and over OAuth, her daemon runs a session, and one of
// her approval requests is waiting. Bob is an ordinary account with a
// workspace, token, task, site and connected client of his own.
type ownersWorld struct {
	env        *servertest.Env // Alice's instance
	bobEnv     *servertest.Env // Bob's instance: env, or another on its database
	alice, bob *servertest.Client
	a, b       ownerIDs
	aliceID    string
	site       *siteWorld // Alice's agent, browser and task, for the helpers
	aliceApp   *mcp.ClientSession
	bobAgent   *mcp.ClientSession
	bobSecret  string
	// bobMachineToken is his machine's, for a daemon socket of his own.
	bobMachineToken string
	aliceMCPID      string       // Alice's agent's MCP session
	shipping        chan callOut // Alice's call waiting for her answer
}

// newOwnersWorld builds Alice's things through env and Bob's, and every
// request of his, through bobEnv: the same server, or another instance on
// the same database.
func newOwnersWorld(t *testing.T, env, bobEnv *servertest.Env) *ownersWorld {
	t.Helper()
	w := &ownersWorld{env: env, bobEnv: bobEnv, a: ownerIDs{}, b: ownerIDs{}}
	w.alice = env.Person(t, ownerEmail)
	w.aliceID = env.Server.UserIDForTest(t, ownerEmail)
	w.buildAlice(t)
	w.bob = bobEnv.Person(t, "bob@example.com")
	w.buildBob(t)
	return w
}

func (w *ownersWorld) buildAlice(t *testing.T) {
	t.Helper()
	env, alice, a := w.env, w.alice, w.a
	ws := alice.Workspace(ownerWorkspace)
	a[kWorkspace] = []string{ws}
	secret := alice.AgentToken(ws, ownerTokenName)
	a[kToken] = []string{tokenIDs(t, alice, ws)[0]}
	a[kTask] = []string{newTask(t, alice, ws, ownerTask)}
	a[kSite] = []string{shareID(t, alice, ownerOrigin, ws)}
	br, _ := extBrowser(t, env, alice, ownerBrowser)
	a[kBrowser] = []string{ownerBrowser}
	m, err := br.Announce(bridgetest.Doc{ID: "d1", Origin: ownerOrigin, URL: ownerOrigin + "/", Title: "Alice hidden page", TabID: 3, Tools: ownerTools}, testutil.WaitShort)
	if err != nil || m.Type != "tools.accepted" || len(m.Accepted) != 4 {
		t.Fatalf("announce: %+v %v", m, err)
	}
	w.site = &siteWorld{env: env, person: alice, ws: ws, token: secret, br: br, task: a.one(kTask), agent: env.MCP(t, secret, nil)}
	w.aliceMCPID = w.site.agent.ID()
	w.approvals(t)
	w.machine(t, alice, a, ownerMachine, true)

	var inv struct {
		Invitation struct{ ID string } `json:"invitation"`
	}
	alice.MustJSON("POST", "/api/invitations", map[string]string{"note": ownerNote}, 201, &inv)
	a[kInvitation] = []string{inv.Invitation.ID}
	a[kSignIn] = []string{signInIDs(t, alice)[0]}

	cs, _, err := env.OAuthMCP(t, "", alice.Allow(ws))
	if err != nil {
		t.Fatalf("alice's connected client: %v", err)
	}
	w.aliceApp = cs
	a[kClient] = []string{clientIDs(t, alice, ws)[0]}
}

// approvals leaves Alice with a denied request (remembered), an allowed one
// that made a grant, and one still waiting for her.
func (w *ownersWorld) approvals(t *testing.T) {
	t.Helper()
	call := func(tool string) (chan callOut, context.CancelFunc) {
		return callAsync(w.site.agent, "callSiteTool", map[string]any{"site": ownerOrigin, "tool": tool, "taskId": w.site.task, "arguments": map[string]any{"item": "x"}})
	}
	ch, cancel := call("pay")
	denied := w.site.pending(t, 1)[0].ID
	w.site.answer(t, denied, "deny")
	wantError(t, awaitCall(t, ch), "denied")
	cancel()
	ch, cancel = call("buy")
	allowed := w.site.pending(t, 1)[0].ID
	w.site.answer(t, allowed, "always")
	w.site.runInBrowser(t, `"bought"`)
	awaitCall(t, ch)
	cancel()
	var grants struct {
		Grants []struct{ ID string } `json:"grants"`
	}
	w.alice.MustJSON("GET", "/api/grants", nil, 200, &grants)
	if len(grants.Grants) != 1 {
		t.Fatalf("alice's grants: %+v", grants)
	}
	w.a[kGrant] = []string{grants.Grants[0].ID}
	ch, cancel = call("ship")
	t.Cleanup(cancel)
	w.shipping = ch
	waiting := w.site.pending(t, 1)[0].ID
	w.a[kApproval] = []string{waiting, denied, allowed}
}

// machine creates a machine for c and returns its token; with a daemon, it
// also runs a session.
func (w *ownersWorld) machine(t *testing.T, c *servertest.Client, ids ownerIDs, name string, withDaemon bool) string {
	t.Helper()
	var created struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
	}
	c.MustJSON("POST", "/api/machines", map[string]string{"name": name}, 201, &created)
	ids[kMachine] = []string{created.Machine.ID}
	if !withDaemon {
		return created.Token
	}
	d := daemontest.Start(t, w.env.URL, created.Token, 10*time.Millisecond)
	sid, err := d.Start(daemon.Spec{Argv: []string{"sh", "-c", "read " + ownerCommand}, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	ids[kSession] = []string{sid}
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		_, body := c.Do("GET", "/api/machines/"+created.Machine.ID+"/sessions", nil)
		return strings.Contains(string(body), sid)
	}, "the session never showed on its machine")
	return created.Token
}

func (w *ownersWorld) buildBob(t *testing.T) {
	t.Helper()
	bob, b := w.bob, w.b
	ws := bob.Workspace("Bob's")
	b[kWorkspace] = []string{ws}
	w.bobSecret = bob.AgentToken(ws, "bob-token")
	b[kToken] = []string{tokenIDs(t, bob, ws)[0]}
	b[kTask] = []string{newTask(t, bob, ws, "Bob's task")}
	b[kSite] = []string{shareID(t, bob, "https://bob-shop.example", ws)}
	w.bobMachineToken = w.machine(t, bob, b, "bob-machine", false)
	br, _ := extBrowser(t, w.bobEnv, bob, "bob-browser")
	m, err := br.Announce(bridgetest.Doc{ID: "b1", Origin: "https://bob-shop.example", URL: "https://bob-shop.example/", Title: "Bob's shop", TabID: 4, Tools: shopTools}, testutil.WaitShort)
	if err != nil || m.Type != "tools.accepted" {
		t.Fatalf("bob's announce: %+v %v", m, err)
	}
	if _, _, err := w.bobEnv.OAuthMCP(t, "", bob.Allow(ws)); err != nil {
		t.Fatalf("bob's connected client: %v", err)
	}
	b[kClient] = []string{clientIDs(t, bob, ws)[0]}
	w.bobAgent = w.bobEnv.MCP(t, w.bobSecret, nil)
}

func tokenIDs(t *testing.T, c *servertest.Client, ws string) []string {
	t.Helper()
	var out struct {
		Tokens []struct{ ID string } `json:"tokens"`
	}
	c.MustJSON("GET", "/api/workspaces/"+ws+"/tokens", nil, 200, &out)
	var ids []string
	for _, x := range out.Tokens {
		ids = append(ids, x.ID)
	}
	return ids
}

func newTask(t *testing.T, c *servertest.Client, ws, title string) string {
	t.Helper()
	var out struct {
		Task struct{ ID string } `json:"task"`
	}
	c.MustJSON("POST", "/api/workspaces/"+ws+"/tasks", map[string]string{"title": title}, 201, &out)
	return out.Task.ID
}

func signInIDs(t *testing.T, c *servertest.Client) []string {
	t.Helper()
	var out struct {
		SignIns []struct{ ID string } `json:"signIns"`
	}
	c.MustJSON("GET", "/api/auth/signins", nil, 200, &out)
	var ids []string
	for _, x := range out.SignIns {
		ids = append(ids, x.ID)
	}
	return ids
}

func clientIDs(t *testing.T, c *servertest.Client, ws string) []string {
	t.Helper()
	var out struct {
		Clients []struct{ ID string } `json:"clients"`
	}
	c.MustJSON("GET", "/api/workspaces/"+ws+"/clients", nil, 200, &out)
	var ids []string
	for _, x := range out.Clients {
		ids = append(ids, x.ID)
	}
	return ids
}

// slot is one place a route takes an id: a path parameter or a body field.
type slot struct {
	name string // the path parameter, or "body.<field>"
	kind ownerKind
}

// probe is one request Bob makes with at least one id of Alice's in it.
type probe struct {
	method, path string
	route        string
	form         url.Values        // page routes
	json         map[string]any    // API routes
	alices       map[string]string // slot name to Alice's id, for the message
}

// routeSlots lists the id slots of a route, or an error saying what to add
// to the tables.
func routeSlots(method, path string, params []string) ([]slot, error) {
	var slots []slot
	kinds, known := routeParams[path]
	for _, p := range params {
		k, ok := kinds[p]
		if !known || !ok {
			return nil, fmt.Errorf("%s %s: parameter %q names no kind of thing in routeParams; add the route there (and a body to routeBodies if it takes one) so the sweep can give it an id of Alice's", method, path, p)
		}
		slots = append(slots, slot{p, k})
	}
	for field, v := range routeBodies[method+" "+path] {
		if strings.HasPrefix(v, "{") {
			slots = append(slots, slot{"body." + field, ownerKind(strings.Trim(v, "{}"))})
		}
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].name < slots[j].name })
	return slots, nil
}

// probes builds every request of a route where each slot holds Alice's or
// Bob's id and at least one holds Alice's: Alice's ids alone, and mixed with
// Bob's (his workspace with her token, her site into his workspace, …).
func (w *ownersWorld) probes(t *testing.T, method, path string, slots []slot) []probe {
	t.Helper()
	var out []probe
	n := len(slots)
	for mask := 1; mask < 1<<n; mask++ { // bit i set: slot i is Alice's
		choices := [][]string{{}}
		for i, s := range slots {
			ids := w.b[s.kind][:min(1, len(w.b[s.kind]))]
			if mask&(1<<i) != 0 {
				ids = w.a[s.kind]
			}
			if len(ids) == 0 {
				t.Fatalf("%s %s: no id of kind %q for %s; the world must make one", method, path, s.kind, map[bool]string{true: "Alice", false: "Bob"}[mask&(1<<i) != 0])
			}
			var next [][]string
			for _, c := range choices {
				for _, id := range ids {
					next = append(next, append(append([]string{}, c...), id))
				}
			}
			choices = next
		}
		for _, c := range choices {
			out = append(out, w.probe(method, path, slots, mask, c))
		}
	}
	return out
}

func (w *ownersWorld) probe(method, path string, slots []slot, mask int, ids []string) probe {
	p := probe{method: method, route: path, alices: map[string]string{}}
	filled := path
	body := map[string]string{}
	for k, v := range routeBodies[method+" "+path] {
		body[k] = v
	}
	for i, s := range slots {
		if mask&(1<<i) != 0 {
			p.alices[s.name] = string(s.kind)
		}
		if field, ok := strings.CutPrefix(s.name, "body."); ok {
			body[field] = ids[i]
		} else {
			filled = strings.Replace(filled, ":"+s.name, url.PathEscape(ids[i]), 1)
		}
	}
	p.path = filled
	if strings.HasPrefix(path, "/api/") {
		if _, has := routeBodies[method+" "+path]; has && len(body) > 0 {
			p.json = map[string]any{}
			for k, v := range body {
				switch v {
				case "true":
					p.json[k] = true
				case "false":
					p.json[k] = false
				default:
					p.json[k] = v
				}
			}
		}
	} else if method == http.MethodPost {
		p.form = url.Values{}
		for k, v := range body {
			p.form.Set(k, v)
		}
	}
	return p
}

// send makes the probe's request as Bob, with his cookies and CSRF token.
func (w *ownersWorld) send(t *testing.T, bob *browser, p probe) (int, string) {
	t.Helper()
	if strings.HasPrefix(p.route, "/api/") {
		var body any
		if p.json != nil {
			body = p.json
		}
		status, b := w.bob.Do(p.method, p.path, body)
		return status, string(b)
	}
	var pg page
	switch p.method {
	case http.MethodGet:
		pg = bob.get(p.path)
	case http.MethodPost:
		pg = bob.post(p.path, p.form)
	default:
		t.Fatalf("%s %s: the sweep sends pages GET and POST only", p.method, p.route)
	}
	return pg.status, pg.body
}

// leaks lists Alice's names found in s.
func leaks(s string) []string { return leaksBeyond(s, "") }

// leaksBeyond lists Alice's names found in s that the request did not carry
// itself: an error may quote back the origin an agent sent.
func leaksBeyond(s, request string) []string {
	var found []string
	for _, m := range ownerMarkers {
		if strings.Contains(s, m) && !strings.Contains(request, m) {
			found = append(found, m)
		}
	}
	return found
}

// textColumns hold text a person or their agent wrote, not references to a
// thing: audit_names interns the strings of a person's own audit log (what
// their agent sent as a taskId, say), so a row of Bob's there that spells an
// id of Alice's is his record of what his agent sent, not a thing of hers.
var textColumns = map[string]bool{"audit_names.name": true}

// volatileColumns change on their own while Alice's browser, daemon and
// agents stay connected; the snapshot leaves them out.
var volatileColumns = map[string]bool{
	"last_seen_at": true, "last_used_at": true, "last_seen": true, "heartbeat_at": true,
}

// aliceRows is every row in every table that names one of Alice's ids, with
// the columns that tick by themselves left out, sorted: two equal snapshots
// mean nothing of Alice's changed, and a row Bob made in her name shows.
func (w *ownersWorld) aliceRows(t *testing.T) []string {
	t.Helper()
	mine := map[string]bool{w.aliceID: true}
	for _, ids := range w.a {
		for _, id := range ids {
			mine[id] = true
		}
	}
	tables, err := w.env.DB.Migrator().GetTables()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, table := range tables {
		var rows []map[string]any
		if err := w.env.DB.Table(table).Find(&rows).Error; err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		for _, r := range rows {
			var cols []string
			hers := false
			for c, v := range r {
				s := fmt.Sprint(v)
				if b, ok := v.([]byte); ok {
					s = string(b)
				}
				if mine[s] && !textColumns[table+"."+c] {
					hers = true
				}
				if !volatileColumns[c] {
					cols = append(cols, c+"="+s)
				}
			}
			if hers {
				sort.Strings(cols)
				out = append(out, table+": "+strings.Join(cols, " "))
			}
		}
	}
	sort.Strings(out)
	return out
}

// diffRows reports the rows only in before and only in after.
func diffRows(before, after []string) string {
	in := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range s {
			m[x] = true
		}
		return m
	}
	b, a := in(before), in(after)
	var d strings.Builder
	for _, x := range before {
		if !a[x] {
			fmt.Fprintf(&d, "\n  - %s", x)
		}
	}
	for _, x := range after {
		if !b[x] {
			fmt.Fprintf(&d, "\n  + %s", x)
		}
	}
	return d.String()
}

// TestEveryRouteRefusesAnotherPersonsIDs is the class-level guard of "every
// query scoped to its owner". Alice has one of everything; Bob, an ordinary
// account with things of his own, calls every route the server has that
// takes an id — enumerated from the app, so a route added later is swept
// too — with Alice's ids in every slot, alone and mixed with his own. Every
// answer refuses (404, as docs/API.md says, or 403 owner_only for the
// owner's own routes), shows none of Alice's names, and nothing of hers
// changes: not a row of the database, not her live browser, session,
// request, agents or sign-in.
func TestEveryRouteRefusesAnotherPersonsIDs(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
		newOwnersWorld(t, env, env).sweep(t)
	})
}

// TestEveryRouteRefusesAnotherPersonsIDsAcrossInstances is the sweep with
// Bob on another instance than Alice's browser, daemon and agents: the
// routes and MCP requests that forward to the instance holding her things
// are held to the same.
func TestEveryRouteRefusesAnotherPersonsIDsAcrossInstances(t *testing.T) {
	envs := instances(t, 2, func(_ int, o *server.Options) { o.OpenSignup = true })
	newOwnersWorld(t, envs[0], envs[1]).sweep(t)
}

// sweep runs every probe as Bob and checks Alice's things after.
func (w *ownersWorld) sweep(t *testing.T) {
	t.Helper()
	bob := newBrowser(t, w.bobEnv, w.bob)
	bobEvents, aliceEvents := openStream(t, w.bobEnv, w.bob, nil), openStream(t, w.env, w.alice, nil)
	before := w.aliceRows(t)

	swept := 0
	var untabled []string
	w.tablesNameRealRoutes(t)
	for _, r := range w.bobEnv.Server.App().GetRoutes(true) {
		if len(r.Params) == 0 && !hasBodySlots(r.Method, r.Path) {
			continue
		}
		if why, ok := bearerRoutes[r.Path]; ok {
			t.Logf("left out %s %s: %s", r.Method, r.Path, why)
			continue
		}
		slots, err := routeSlots(r.Method, r.Path, r.Params)
		if err != nil {
			untabled = append(untabled, err.Error())
			continue
		}
		for _, p := range w.probes(t, r.Method, r.Path, slots) {
			swept++
			status, body := w.send(t, bob, p)
			w.wantRefused(t, p, status, body)
		}
	}
	for _, u := range untabled {
		t.Error(u)
	}
	for _, q := range queryProbes {
		for name, kind := range q.kinds {
			path := q.path + "?" + name + "=" + url.QueryEscape(w.a.one(kind))
			var status int
			var body string
			if strings.HasPrefix(path, "/api/") {
				s, b := w.bob.Do("GET", path, nil)
				status, body = s, string(b)
			} else {
				pg := bob.get(path)
				status, body = pg.status, pg.body
			}
			if status != q.status {
				t.Errorf("bob GET %s: %d, want %d: %.300s", path, status, q.status, body)
			}
			if l := leaks(body); len(l) > 0 {
				t.Errorf("bob GET %s shows alice's %q", path, l)
			}
		}
	}
	t.Logf("swept %d requests with alice's ids", swept)

	w.mcpProbes(t)
	w.consentProbe(t)
	w.listsShowNothingOfAlices(t, bob)

	if d := diffRows(before, w.aliceRows(t)); d != "" {
		t.Errorf("bob's requests changed alice's rows:%s", d)
	}
	w.eventsUntouched(t, bobEvents, aliceEvents)
	// Last, as a browser of Bob's named like hers is his own row.
	w.socketProbes(t)
	w.aliceStillLive(t)
}

// tablesNameRealRoutes fails on a table row for a route the server no longer
// has: a renamed route would otherwise leave its new name unswept and its
// old row unnoticed (the new one fails as untabled, the old one here).
func (w *ownersWorld) tablesNameRealRoutes(t *testing.T) {
	t.Helper()
	paths, routes := map[string]bool{}, map[string]bool{}
	for _, r := range w.env.Server.App().GetRoutes(true) {
		paths[r.Path] = true
		routes[r.Method+" "+r.Path] = true
	}
	for p := range routeParams {
		if !paths[p] {
			t.Errorf("routeParams has %s, which the server no longer routes; remove it", p)
		}
	}
	for r := range routeBodies {
		if !routes[r] {
			t.Errorf("routeBodies has %s, which the server no longer routes; remove it", r)
		}
	}
}

func hasBodySlots(method, path string) bool {
	for _, v := range routeBodies[method+" "+path] {
		if strings.HasPrefix(v, "{") {
			return true
		}
	}
	return false
}

// wantRefused checks one answer: refused, and nothing of Alice's in it.
func (w *ownersWorld) wantRefused(t *testing.T, p probe, status int, body string) {
	t.Helper()
	what := fmt.Sprintf("bob %s %s (alice's %v)", p.method, p.path, p.alices)
	if l := leaks(body); len(l) > 0 {
		t.Errorf("%s shows alice's %q: %.300s", what, l, body)
	}
	if strings.HasPrefix(p.route, "/api/") {
		code := servertest.ErrorCode([]byte(body))
		if status == http.StatusNotFound && code == "not_found" || status == http.StatusForbidden && code == "owner_only" {
			return
		}
		t.Errorf("%s: %d %.300s, want 404 not_found", what, status, body)
		return
	}
	if status != http.StatusNotFound && status != http.StatusForbidden {
		t.Errorf("%s: %d, want the 404 page: %.300s", what, status, body)
	}
}

// mcpProbeArgs gives each MCP tool the arguments Bob's agent sends it with
// Alice's ids: her site's origin, her tools, her task. A tool the server
// gains that is not here fails the sweep.
func (w *ownersWorld) mcpProbeArgs() map[string][]map[string]any {
	task := w.a.one(kTask)
	item := map[string]any{"item": "x"}
	return map[string][]map[string]any{
		"listSiteTools":         {{}},
		"getSiteToolDefinition": {{"site": ownerOrigin, "tool": "search"}, {"site": ownerOrigin, "tool": "buy"}},
		"callSiteTool": {
			{"site": ownerOrigin, "tool": "search", "arguments": map[string]any{"q": "x"}},
			{"site": ownerOrigin, "tool": "buy", "taskId": task, "arguments": item},
			{"site": "https://bob-shop.example", "tool": "buy", "taskId": task, "arguments": map[string]any{"item": "x", "qty": 1}},
		},
		"createTask": {{"title": "bob-was-here"}},
		"updateTask": {{"taskId": task, "status": "completed"}},
		"listTasks":  {{}},
	}
}

// mcpProbes calls every MCP tool as Bob's agent with Alice's ids, and uses
// her agent's MCP session id with his token.
func (w *ownersWorld) mcpProbes(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLong)
	defer cancel()
	tools, err := w.bobAgent.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := w.mcpProbeArgs()
	for _, tool := range tools.Tools {
		calls, ok := args[tool.Name]
		if !ok {
			t.Errorf("MCP tool %q has no arguments in mcpProbeArgs; add how Bob's agent calls it with Alice's ids", tool.Name)
			continue
		}
		for _, a := range calls {
			res, err := w.bobAgent.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: a})
			text := fmt.Sprint(err)
			if err == nil {
				text = servertest.ResultText(res)
			}
			if l := leaksBeyond(text, fmt.Sprint(a)); len(l) > 0 {
				t.Errorf("bob's agent %s %v shows alice's %q: %.300s", tool.Name, a, l, text)
			}
			if mentionsAlice(a, w.a) && err == nil && !res.IsError {
				t.Errorf("bob's agent %s %v succeeded: %.300s", tool.Name, a, text)
			}
		}
	}
	w.foreignSessionRefused(t)
}

// foreignSessionRefused sends Bob's token with Alice's agent's MCP session
// id: it is answered as an id that is gone, never as "someone else's"
// (docs/DECISIONS.md, "Every route, another person's ids"). A DELETE first
// is 404 "session not found" and ends nothing; a POST and a GET are served
// in a session of Bob's own, which shows nothing of hers; a DELETE then
// ends his. Her session goes on (aliceStillLive calls through it, and her
// call waiting in it is still waiting).
func (w *ownersWorld) foreignSessionRefused(t *testing.T) {
	t.Helper()
	for i, m := range []string{"DELETE", "POST", "GET", "DELETE"} {
		status, body := w.mcpWithSession(t, m, w.aliceMCPID)
		switch {
		case strings.Contains(body, "mismatch"):
			t.Errorf("bob's token in alice's MCP session %s is told the session is someone else's: %d %q", m, status, body)
		case i == 0 && (status != http.StatusNotFound || strings.TrimSpace(body) != "session not found"):
			t.Errorf("bob's token in alice's MCP session DELETE: %d %q, want 404 session not found", status, body)
		case i == 3 && (status < 200 || status > 299):
			t.Errorf("bob's DELETE of the session he was given under alice's id: %d %q", status, body)
		case m == "POST" && (status != http.StatusOK || !strings.Contains(body, `"result"`)):
			t.Errorf("bob's token in alice's MCP session POST: %d %.300q, want it served in a session of his own", status, body)
		case m == "GET" && status != http.StatusOK:
			t.Errorf("bob's token in alice's MCP session GET: %d %.300q, want a stream of a session of his own", status, body)
		}
		if l := leaks(body); len(l) > 0 {
			t.Errorf("bob's token in alice's MCP session %s shows alice's %q", m, l)
		}
	}
}

// mentionsAlice reports whether tool arguments carry an id or site of hers.
func mentionsAlice(a map[string]any, ids ownerIDs) bool {
	s := fmt.Sprint(a)
	if strings.Contains(s, ownerOrigin) {
		return true
	}
	for _, list := range ids {
		for _, id := range list {
			if strings.Contains(s, id) {
				return true
			}
		}
	}
	return false
}

// mcpWithSession sends one request to /mcp with Bob's token and session id
// sid; of a GET's event stream only the status is read.
func (w *ownersWorld) mcpWithSession(t *testing.T, method, sid string) (int, string) {
	t.Helper()
	body := ""
	if method == "POST" {
		body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"listSiteTools","arguments":{}}}`
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitShort)
	defer cancel()
	req := mustRequest(t, method, w.bobEnv.URL+"/mcp", body).WithContext(ctx)
	req.Header.Set("Authorization", "Bearer "+w.bobSecret)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("bob's token in MCP session %s %s: %v", sid, method, err)
	}
	defer resp.Body.Close()
	if method == "GET" && resp.StatusCode == http.StatusOK {
		return resp.StatusCode, ""
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("bob's token in MCP session %s %s: read: %v", sid, method, err)
	}
	return resp.StatusCode, string(b)
}

// consentProbe has Bob answer an OAuth consent with Alice's workspace: no
// client of his may be connected to it.
func (w *ownersWorld) consentProbe(t *testing.T) {
	t.Helper()
	_, _, err := w.bobEnv.OAuthMCP(t, "", w.bob.Allow(w.a.one(kWorkspace)))
	if err == nil {
		t.Error("bob connected a client to alice's workspace through the consent page")
		return
	}
	if l := leaks(err.Error()); len(l) > 0 {
		t.Errorf("the consent refusal shows alice's %q: %v", l, err)
	}
}

// aliceStillLive checks what the database does not hold: Alice's browser,
// daemon session, waiting request, agents and sign-in all still work, and
// the next call her browser gets is her own agent's.
func (w *ownersWorld) aliceStillLive(t *testing.T) {
	t.Helper()
	if ids := connectedIDs(w.env, w.alice, t); len(ids) != 1 || ids[0] != ownerBrowser {
		t.Errorf("alice's connected browsers after the sweep: %v", ids)
	}
	w.alice.MustJSON("GET", "/api/auth/me", nil, 200, nil)
	if _, body := w.alice.Do("GET", "/api/approvals", nil); !strings.Contains(string(body), w.a.one(kApproval)) {
		t.Errorf("alice's waiting request is gone: %s", body)
	}
	if _, body := w.alice.Do("GET", "/api/machines/"+w.a.one(kMachine)+"/sessions", nil); !strings.Contains(string(body), w.a.one(kSession)) {
		t.Errorf("alice's terminal session is gone: %s", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLong)
	defer cancel()
	if _, err := w.aliceApp.ListTools(ctx, nil); err != nil {
		t.Errorf("alice's connected client stopped working: %v", err)
	}
	ch, stop := callAsync(w.site.agent, "callSiteTool", map[string]any{"site": ownerOrigin, "tool": "search", "arguments": map[string]any{"q": "after the sweep"}})
	defer stop()
	m, err := w.site.br.Expect("call", testutil.WaitShort)
	if err != nil || m.Tool != "search" || string(m.Arguments) != `{"q":"after the sweep"}` {
		t.Fatalf("alice's browser got %+v (%v); want her own agent's search, never one of bob's", m, err)
	}
	w.site.br.Dispatched(m.ID, "d1")
	w.site.br.Result(m.ID, `"found"`)
	if res := awaitCall(t, ch); res.IsError {
		t.Errorf("alice's agent after the sweep: %s", servertest.ResultText(res))
	}
	// Her call that waited through the sweep still waits on her: her answer
	// reaches it.
	w.site.answer(t, w.a.one(kApproval), "deny")
	wantError(t, awaitCall(t, w.shipping), "denied")
}

// listsShowNothingOfAlices fetches, as Bob, every GET route without an id
// (lists, pages, settings), enumerated from the app: none shows Alice's
// names, even after Bob's agent has called with her ids (his audit log).
func (w *ownersWorld) listsShowNothingOfAlices(t *testing.T, bob *browser) {
	t.Helper()
	streams := map[string]bool{"/api/events": true, "/mcp": true, "/ws/extension": true, "/ws/daemon": true, "/ws/viewer": true}
	for _, r := range w.env.Server.App().GetRoutes(true) {
		if r.Method != http.MethodGet || len(r.Params) > 0 || streams[r.Path] {
			continue
		}
		var body string
		if strings.HasPrefix(r.Path, "/api/") {
			_, b := w.bob.Do("GET", r.Path, nil)
			body = string(b)
		} else {
			body = bob.get(r.Path).body
		}
		// His audit log rightly records what his agent sent: her origin.
		if l := leaksBeyond(body, ownerOrigin); len(l) > 0 {
			t.Errorf("bob GET %s shows alice's %q: %.300s", r.Path, l, body)
		}
	}
}

// socketProbes has Bob's extension speak with Alice's ids: a browser of
// hers by id, her site's origin, her page's document id. The browser is
// then his own, of that id (an id is the extension's say-so); nothing of
// hers moves: her sites and browsers read the same, her browser's link
// stays hers, and aliceStillLive finds her browser connected and her page
// answering her agent.
func (w *ownersWorld) socketProbes(t *testing.T) {
	t.Helper()
	before := sitesSnapshot(t, w.alice)
	br, _ := extBrowser(t, w.bobEnv, w.bob, ownerBrowser)
	m, err := br.Announce(bridgetest.Doc{ID: "d1", Origin: ownerOrigin, URL: ownerOrigin + "/", Title: "Bob's", TabID: 3, Tools: shopTools}, testutil.WaitShort)
	if err != nil || m.Type != "error" || m.Code != "site_not_shared" {
		t.Errorf("bob's browser announced alice's origin: %+v %v", m, err)
	}
	if l := leaksBeyond(m.Message, ownerOrigin); len(l) > 0 {
		t.Errorf("the refusal shows alice's %q: %s", l, m.Message)
	}
	if err := br.Used("d1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := br.Gone("d1"); err != nil {
		t.Fatal(err)
	}
	// The server handles a socket's frames in order: the pong means it
	// has taken the two before.
	if _, err := br.Ping("p1", testutil.WaitShort); err != nil {
		t.Fatal(err)
	}
	br.Close()
	bobID := userIDOf(t, w.bob)
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		for _, b := range w.bobEnv.Server.Hub().Connected(bobID) {
			if b.BrowserID == ownerBrowser {
				return false
			}
		}
		return true
	}, "bob's browser of alice's id never left")
	links, err := w.env.Server.Registry().Links(context.Background(), cluster.LinkBrowser, w.aliceID)
	if err != nil || len(links) != 1 || links[0].LinkID != ownerBrowser {
		t.Errorf("alice's browser link after bob's browser of its id came and went: %+v %v", links, err)
	}
	if after := sitesSnapshot(t, w.alice); after != before {
		t.Errorf("alice's sites and browsers changed as bob's browser of her browser's id came and went:\n%s\n%s", before, after)
	}
	w.daemonProbe(t)
}

// daemonProbe has a daemon of Bob's machine announce a session under the
// id of Alice's session (a daemon reports its sessions' ids itself), then
// one of its own. A session id is its person's: his daemon gets a session
// of his own under that id, and hers stays hers, on her machine, with her
// program (TestADaemonSessionIDIsOnlyItsPersons holds the order the other
// way round).
func (w *ownersWorld) daemonProbe(t *testing.T) {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(w.bobEnv.URL, "http")+"/ws/daemon",
		http.Header{"Authorization": {"Bearer " + w.bobMachineToken}, wire.InstallHeader: {"owners-sweep-install"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	session := func(index uint32, id string) []byte {
		return wire.Control{Type: wire.TypeSession, Index: index, Session: &wire.SessionInfo{
			ID: id, Command: []string{"sh"}, StartedAt: time.Now(), Cols: 80, Rows: 24}}.Encode()
	}
	for _, msg := range [][]byte{session(1, w.a.one(kSession)), session(2, "bob-own-session"), wire.Control{Type: wire.TypeSynced}.Encode()} {
		if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
			t.Fatal(err)
		}
	}
	sessionsOf := func(c *servertest.Client, machine string) string {
		_, body := c.Do("GET", "/api/machines/"+machine+"/sessions", nil)
		return string(body)
	}
	// The link handles its frames in order: once his own is listed, hers
	// was taken or refused before it.
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		return strings.Contains(sessionsOf(w.bob, w.b.one(kMachine)), "bob-own-session")
	}, "bob's daemon's own session was never listed")
	if got := sessionsOf(w.bob, w.b.one(kMachine)); len(leaks(got)) > 0 || strings.Contains(got, w.a.one(kMachine)) {
		t.Errorf("bob's machine lists alice's session: %s", got)
	}
	if got := sessionsOf(w.alice, w.a.one(kMachine)); !strings.Contains(got, w.a.one(kSession)) || !strings.Contains(got, ownerCommand) ||
		strings.Contains(got, w.b.one(kMachine)) {
		t.Errorf("alice's session after bob's daemon announced its id: %s", got)
	}
	if status, body := w.alice.Do("POST", "/api/sessions/"+w.a.one(kSession)+"/viewer-ticket", map[string]bool{"watchOnly": true}); status != http.StatusCreated {
		t.Errorf("alice's viewer ticket for her session after bob's daemon announced its id: %d %s", status, body)
	}
}

// eventsUntouched reads both people's event streams up to a change each
// makes to a workspace of their own: nothing before it on Bob's names
// Alice's things, and Alice was told of no change.
func (w *ownersWorld) eventsUntouched(t *testing.T, bob, alice *stream) {
	t.Helper()
	w.bob.MustJSON("PATCH", "/api/workspaces/"+w.b.one(kWorkspace), map[string]string{"name": "bob-sentinel"}, 200, nil)
	for e := bob.next(t, false); !strings.Contains(e.data, "bob-sentinel"); e = bob.next(t, false) {
		// His agent's own calls carried her task's id and origin.
		if l := leaksBeyond(e.data, ownerOrigin); len(l) > 0 || w.namesHers(e.data, w.a.one(kTask)) {
			t.Errorf("bob's event stream told him of alice's things: %s %s", e.typ, e.data)
		}
	}
	w.alice.MustJSON("PATCH", "/api/workspaces/"+w.a.one(kWorkspace), map[string]string{"name": "alice-sentinel"}, 200, nil)
	for e := alice.next(t, false); !strings.Contains(e.data, "alice-sentinel"); e = alice.next(t, false) {
		t.Errorf("alice was told of a change while only bob acted: %s %s", e.typ, e.data)
	}
}

// namesHers reports whether s holds one of Alice's ids other than except.
func (w *ownersWorld) namesHers(s, except string) bool {
	for _, ids := range w.a {
		for _, id := range ids {
			if id != except && strings.Contains(s, id) {
				return true
			}
		}
	}
	return strings.Contains(s, w.aliceID)
}
