package server_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// testCaps are the caps the tests below run under: small, so each is met.
var testCaps = server.Caps{Workspaces: 3, AgentTokens: 2, Machines: 2, SharedSites: 2, Invitations: 2}

// ownerCapCase is one per-owner cap as a person meets it through the API
// and the pages. scope is the workspace the rows hang on ("" for none).
type ownerCapCase struct {
	name      string
	max       int
	sentence  string // the refusal, with %d for the cap
	inScope   bool   // the rows belong to a workspace of the person's
	ownerOnly bool   // only the server's owner creates these
	create    func(p *servertest.Client, scope string, i int) (int, []byte)
	list      func(p *servertest.Client, scope string) []string // the live rows' ids
	remove    func(p *servertest.Client, scope, id string)
	form      func(scope string, i int) (string, url.Values)
	atCap     func(t *testing.T, p *servertest.Client, scope string) // more checks at the cap, or nil
}

// listIDs reads the ids of the list under key in a GET answer.
func listIDs(p *servertest.Client, path, key string) []string {
	var out map[string][]struct{ ID string }
	p.MustJSON("GET", path, nil, 200, &out)
	var ids []string
	for _, r := range out[key] {
		ids = append(ids, r.ID)
	}
	return ids
}

var ownerCapCases = []ownerCapCase{
	{
		name: "workspaces", max: testCaps.Workspaces,
		sentence: "You have reached the limit of %d workspaces per person. Delete a workspace you no longer use, then create this one.",
		create: func(p *servertest.Client, _ string, i int) (int, []byte) {
			return p.Do("POST", "/api/workspaces", map[string]string{"name": fmt.Sprintf("W%d", i)})
		},
		list:   func(p *servertest.Client, _ string) []string { return listIDs(p, "/api/workspaces", "workspaces") },
		remove: func(p *servertest.Client, _, id string) { p.MustJSON("DELETE", "/api/workspaces/"+id, nil, 204, nil) },
		form: func(_ string, i int) (string, url.Values) {
			return "/workspaces", url.Values{"name": {fmt.Sprintf("Form %d", i)}}
		},
	},
	{
		name: "agent tokens", max: testCaps.AgentTokens, inScope: true,
		sentence: "This workspace has reached the limit of %d agent tokens. Revoke tokens you no longer use (expired ones too), then create this one.",
		create: func(p *servertest.Client, ws string, i int) (int, []byte) {
			return p.Do("POST", "/api/workspaces/"+ws+"/tokens", map[string]any{"name": fmt.Sprintf("T%d", i), "expiresInDays": 7})
		},
		list: func(p *servertest.Client, ws string) []string {
			return listIDs(p, "/api/workspaces/"+ws+"/tokens", "tokens")
		},
		remove: func(p *servertest.Client, ws, id string) {
			p.MustJSON("DELETE", "/api/workspaces/"+ws+"/tokens/"+id, nil, 204, nil)
		},
		form: func(ws string, i int) (string, url.Values) {
			return "/workspaces/" + ws + "/tokens", url.Values{"tokenName": {fmt.Sprintf("Form %d", i)}}
		},
		atCap: func(t *testing.T, p *servertest.Client, _ string) {
			// another workspace of the same person has a cap of its own
			other := p.Workspace("other")
			p.MustJSON("POST", "/api/workspaces/"+other+"/tokens", map[string]string{"name": "elsewhere"}, 201, nil)
		},
	},
	{
		name: "machines", max: testCaps.Machines,
		sentence: "You have reached the limit of %d machines per person. Revoke machines you no longer use, then connect this one.",
		create: func(p *servertest.Client, _ string, i int) (int, []byte) {
			return p.Do("POST", "/api/machines", map[string]string{"name": fmt.Sprintf("M%d", i)})
		},
		list:   func(p *servertest.Client, _ string) []string { return listIDs(p, "/api/machines", "machines") },
		remove: func(p *servertest.Client, _, id string) { p.MustJSON("DELETE", "/api/machines/"+id, nil, 204, nil) },
		form: func(_ string, i int) (string, url.Values) {
			return "/machines", url.Values{"name": {fmt.Sprintf("Form %d", i)}}
		},
	},
	{
		name: "shared sites", max: testCaps.SharedSites, inScope: true,
		sentence: "You have reached the limit of %d shared sites per person. Stop sharing sites you no longer use, then share this one.",
		create: func(p *servertest.Client, ws string, i int) (int, []byte) {
			return p.Do("POST", "/api/sites", map[string]string{"origin": fmt.Sprintf("https://s%d.example", i), "workspaceId": ws})
		},
		list:   func(p *servertest.Client, _ string) []string { return listIDs(p, "/api/sites", "sites") },
		remove: func(p *servertest.Client, _, id string) { p.MustJSON("DELETE", "/api/sites/"+id, nil, 204, nil) },
		form: func(ws string, i int) (string, url.Values) {
			return "/sites", url.Values{"origin": {fmt.Sprintf("https://form%d.example", i)}, "workspaceId": {ws}}
		},
		atCap: func(t *testing.T, p *servertest.Client, _ string) {
			// a move adds no row: never refused at the cap
			other := p.Workspace("other")
			var out struct{ Moved bool }
			p.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://s0.example", "workspaceId": other}, 200, &out)
			if !out.Moved {
				t.Fatal("the site did not move")
			}
		},
	},
	{
		name: "invitations", max: testCaps.Invitations, ownerOnly: true,
		sentence: "You have reached the limit of %d unused invitations. Withdraw invitations that are no longer needed (expired ones too), then create this one.",
		create: func(p *servertest.Client, _ string, i int) (int, []byte) {
			return p.Do("POST", "/api/invitations", map[string]string{"note": fmt.Sprintf("I%d", i)})
		},
		list:   func(p *servertest.Client, _ string) []string { return listIDs(p, "/api/invitations", "invitations") },
		remove: func(p *servertest.Client, _, id string) { p.MustJSON("DELETE", "/api/invitations/"+id, nil, 204, nil) },
		form: func(_ string, i int) (string, url.Values) {
			return "/settings/invitations", url.Values{"note": {fmt.Sprintf("Form %d", i)}}
		},
	},
}

// A person (or, for agent tokens, a workspace) keeps at most the cap of
// each kind: up to it every create is made; one more is refused with
// 409 limit_reached and a sentence that names the limit and what to do,
// through the API and at the page's form, and creates nothing; removing one
// makes room; another person (another workspace) is not affected.
func TestWhatOnePersonKeepsIsCapped(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup, o.Caps = true, testCaps })
		owner := env.Person(t, "owner@example.com") // the first: the one who may invite
		for _, tc := range ownerCapCases {
			t.Run(tc.name, func(t *testing.T) { tc.check(t, env, owner) })
		}
	})
}

func (tc ownerCapCase) check(t *testing.T, env *servertest.Env, owner *servertest.Client) {
	p := owner
	if !tc.ownerOnly {
		p = env.Person(t, strings.ReplaceAll(tc.name, " ", "-")+"@example.com")
	}
	scope := ""
	if tc.inScope {
		scope = p.Workspace("home")
	}
	for i := len(tc.list(p, scope)); i < tc.max; i++ {
		if status, body := tc.create(p, scope, i); status != http.StatusCreated {
			t.Fatalf("create %d of %d: %d %s", i+1, tc.max, status, body)
		}
	}
	want := fmt.Sprintf(tc.sentence, tc.max)
	status, body := tc.create(p, scope, tc.max)
	if code, msg := servertest.ErrorOf(body); status != http.StatusConflict || code != "limit_reached" || msg != want {
		t.Fatalf("one more than %d: %d %s, want 409 limit_reached %q", tc.max, status, body, want)
	}
	path, vals := tc.form(scope, 0)
	newBrowser(t, env, p).post(path, vals).want(t, http.StatusConflict, `<p class="error" role="alert">`+html.EscapeString(want)+`</p>`, `action="`+path+`"`)
	live := tc.list(p, scope)
	if len(live) != tc.max {
		t.Fatalf("%d live after the refusals, want the cap of %d", len(live), tc.max)
	}
	if tc.atCap != nil {
		tc.atCap(t, p, scope)
	}
	tc.remove(p, scope, live[0])
	if status, body := tc.create(p, scope, tc.max+1); status != http.StatusCreated {
		t.Fatalf("a create after one was removed: %d %s", status, body)
	}
	if status, _ := tc.create(p, scope, tc.max+2); status != http.StatusConflict {
		t.Fatalf("the freed room was taken twice: %d", status)
	}
	if tc.ownerOnly {
		return
	}
	q := env.Person(t, strings.ReplaceAll(tc.name, " ", "-")+"-other@example.com")
	qScope := ""
	if tc.inScope {
		qScope = q.Workspace("home")
	}
	if status, body := tc.create(q, qScope, 0); status != http.StatusCreated {
		t.Fatalf("another person while the first is at the cap: %d %s", status, body)
	}
}

// Concurrent creates at the edge leave exactly the cap, through the API.
func TestConcurrentCreatesLeaveTheCap(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.Caps = testCaps })
		alice := env.Person(t, "alice@example.com")
		var wg sync.WaitGroup
		var mu sync.Mutex
		made, refused := 0, 0
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body := alice.Do("POST", "/api/machines", map[string]string{"name": fmt.Sprintf("M%d", i)})
				mu.Lock()
				defer mu.Unlock()
				switch code := servertest.ErrorCode(body); {
				case status == http.StatusCreated:
					made++
				case status == http.StatusConflict && code == "limit_reached":
					refused++
				default:
					t.Errorf("a create at the cap: %d %s", status, body)
				}
			}()
		}
		wg.Wait()
		if made != testCaps.Machines || refused != 10-testCaps.Machines {
			t.Fatalf("10 creates at a cap of %d: %d made, %d refused", testCaps.Machines, made, refused)
		}
		if n := len(listIDs(alice, "/api/machines", "machines")); n != testCaps.Machines {
			t.Fatalf("%d machines, want %d", n, testCaps.Machines)
		}
	})
}
