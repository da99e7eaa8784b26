package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

const docsSite = "https://docs.example"

// sitesWorld is Alice with two workspaces and two shared sites: the shop,
// open in a connected browser whose page announced its tools, and the docs
// site, open nowhere. A second browser connected once and left.
type sitesWorld struct {
	env          *servertest.Env
	alice        *servertest.Client
	ws, other    string
	shopID       string
	docsID       string
	br           *bridgetest.Browser
	browserOne   string
	browserGone  string
	aliceBrowser *browser
}

func newSitesWorld(t *testing.T, k storetest.Kind) *sitesWorld {
	t.Helper()
	env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
	w := &sitesWorld{env: env, alice: env.Person(t, "alice@example.com"), browserOne: "browser-one", browserGone: "browser-two"}
	w.ws = w.alice.Workspace("Shopping")
	w.other = w.alice.Workspace("Reading")
	w.shopID = shareID(t, w.alice, shop, w.ws)
	w.docsID = shareID(t, w.alice, docsSite, w.other)
	gone, _ := extBrowser(t, env, w.alice, w.browserGone)
	gone.Close()
	testutil.Eventually(t, testutil.WaitShort, func() bool { return len(connectedIDs(env, w.alice, t)) == 0 }, "the condition never held")
	w.br, _ = extBrowser(t, env, w.alice, w.browserOne)
	m, err := w.br.Announce(bridgetest.Doc{ID: "d1", Origin: shop, URL: shop + "/", Title: "Shop", TabID: 3, Tools: shopTools}, testutil.WaitShort)
	if err != nil || m.Type != bridge.TypeToolsAccepted {
		t.Fatalf("announce: %+v %v", m, err)
	}
	w.aliceBrowser = newBrowser(t, env, w.alice)
	return w
}

func shareID(t *testing.T, c *servertest.Client, origin, ws string) string {
	t.Helper()
	var out struct {
		Site struct{ ID string } `json:"site"`
	}
	c.MustJSON("POST", "/api/sites", map[string]string{"origin": origin, "workspaceId": ws}, 201, &out)
	return out.Site.ID
}

// sitesSnapshot is everything of the sites and browsers a form could change.
func sitesSnapshot(t *testing.T, c *servertest.Client) string {
	t.Helper()
	_, sites := c.Do("GET", "/api/sites", nil)
	_, browsers := c.Do("GET", "/api/browsers", nil)
	// Last ping and use times move on their own; names, workspaces and
	// settings are what matter.
	var b strings.Builder
	for _, part := range strings.Split(string(sites)+string(browsers), ",") {
		if !strings.Contains(part, "lastPing") && !strings.Contains(part, "lastSeen") && !strings.Contains(part, "lastUsed") {
			b.WriteString(part)
		}
	}
	return b.String()
}

// siteForms lists every state-changing form of the two pages.
func (w *sitesWorld) siteForms() []struct {
	path string
	vals url.Values
} {
	return []struct {
		path string
		vals url.Values
	}{
		{"/sites/" + w.shopID + "/ask", url.Values{"askAll": {"on"}}},
		{"/sites/" + w.shopID + "/move", url.Values{"workspaceId": {w.other}}},
		{"/sites/" + w.shopID + "/delete", nil},
		{"/browsers/" + w.browserOne + "/rename", url.Values{"name": {"Renamed"}}},
		{"/sites", url.Values{"origin": {"https://new.example"}, "workspaceId": {w.ws}}},
	}
}

func TestSitesAndBrowsersPagesShowWhatIsSharedAndConnected(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSitesWorld(t, k)
		b := w.aliceBrowser
		p := b.get("/sites")
		p.want(t, 200, `aria-current="page">Sites`, `data-src="/sites"`,
			`<h2 id="site-`+w.shopID+`-head" class="site-origin">https://shop.example</h2>`, "Shared with <a id=\"site-"+w.shopID+"-ws\" href=\"/workspaces/"+w.ws+"\">Shopping</a>",
			`id="site-`+w.shopID+`-state">Online`, `id="site-`+w.docsID+`-state">Offline`,
			"Chrome browser-one", "1 tab",
			`<code class="tool">search</code> <span class="tool-title">Search</span>`, "Search the catalogue", "read-only",
			`<code class="tool">buy</code>`, "Buy an item", "asks first",
			"Ask me before every tool, even read-only ones", `aria-checked="false"`, `name="askAll" value="on"`,
			"Move to workspace…", `<option value="`+w.other+`">Reading</option>`,
			`href="/sites/`+w.shopID+`/delete"`, "Stop sharing…",
			"Not open in any connected browser", "No tools seen yet", `action="/sites"`, "Share a site")
		if strings.Contains(p.body, `id="no-browser"`) {
			t.Error("the sites page says no browser is connected while one is")
		}
		// The move list offers the other workspaces only.
		if strings.Contains(p.body, `<option value="`+w.ws+`">Shopping</option></select>`) {
			t.Error("the shop's move list offers the workspace it is already in")
		}

		bp := b.get("/browsers")
		bp.want(t, 200, `aria-current="page">Browsers`, "Chrome browser-one", "Chrome browser-two",
			"Connected", "Offline", "Last seen", "extension 1.2.3", "https://shop.example", "Shopping",
			`action="/browsers/`+w.browserOne+`/rename"`, `action="/browsers/`+w.browserGone+`/rename"`, "Rename")

		// Once the browser leaves, the shop goes offline and the page says
		// why calls cannot run; its tools stay listed as last seen.
		w.br.Close()
		testutil.Eventually(t, testutil.WaitShort, func() bool { return len(connectedIDs(w.env, w.alice, t)) == 0 }, "the condition never held")
		b.get("/sites").want(t, 200, `id="site-`+w.shopID+`-state">Offline`, `id="no-browser"`,
			"Calls to these sites cannot run until Chrome is open", "(as last seen)", `<code class="tool">search</code>`)

		bob := newBrowser(t, w.env, w.env.Person(t, "bob@example.com"))
		bob.get("/sites").want(t, 200, "No site shared yet.", "click Share in the Tabbridge popup, or add its address here",
			"No workspace yet.")
		bob.get("/browsers").want(t, 200, "No browser connected yet.", "Install the Tabbridge extension, sign in, and share a site.")
		for _, leak := range []string{"shop.example", "docs.example", "browser-one"} {
			if strings.Contains(bob.get("/sites").body+bob.get("/browsers").body, leak) {
				t.Errorf("bob's pages show alice's %s", leak)
			}
		}
	})
}

func TestSiteAndBrowserFormsChangeThings(t *testing.T) {
	w := newSitesWorld(t, storetest.SQLite)
	b := w.aliceBrowser
	api := func() string { _, body := w.alice.Do("GET", "/api/sites", nil); return string(body) }

	// Share: a bad address is refused at the form, keeping what was typed.
	b.post("/sites", url.Values{"origin": {"https://new.example/path"}, "workspaceId": {w.ws}}).
		want(t, 400, "https://new.example", `value="https://new.example/path"`, `role="alert"`)
	b.post("/sites", url.Values{"origin": {"https://New.Example:443"}, "workspaceId": {w.other}}).redirect(t, "/sites")
	if !strings.Contains(api(), `"origin":"https://new.example"`) {
		t.Fatalf("shared site missing: %s", api())
	}
	b.post("/sites", url.Values{"origin": {"https://x.example"}, "workspaceId": {"nope"}}).want(t, 404, "That workspace no longer exists")

	b.post("/sites/"+w.shopID+"/ask", url.Values{"askAll": {"on"}}).redirect(t, "/sites")
	b.get("/sites").want(t, 200, `aria-checked="true"`, `name="askAll" value="off"`, "On: every call on this site waits")
	var sites struct {
		Sites []struct {
			ID, WorkspaceID string
			AskAll          bool
		} `json:"sites"`
	}
	w.alice.MustJSON("GET", "/api/sites", nil, 200, &sites)
	for _, s := range sites.Sites {
		if s.ID == w.shopID && !s.AskAll {
			t.Fatal("the ask-all form did not turn the setting on")
		}
	}
	b.post("/sites/"+w.shopID+"/ask", url.Values{"askAll": {"maybe"}}).want(t, 400, "askAll=on or askAll=off")
	b.post("/sites/"+w.shopID+"/ask", url.Values{"askAll": {"off"}}).redirect(t, "/sites")

	b.post("/sites/"+w.shopID+"/move", url.Values{"workspaceId": {w.other}}).redirect(t, "/sites")
	w.alice.MustJSON("GET", "/api/sites", nil, 200, &sites)
	for _, s := range sites.Sites {
		if s.ID == w.shopID && s.WorkspaceID != w.other {
			t.Fatalf("the move form left the shop in %s", s.WorkspaceID)
		}
	}
	b.post("/sites/"+w.shopID+"/move", url.Values{"workspaceId": {""}}).want(t, 400, "Choose the workspace")

	b.get("/sites/"+w.shopID+"/delete").want(t, 200, "Stop sharing https://shop.example?", "Keep sharing", `action="/sites/`+w.shopID+`/delete"`)
	b.post("/sites/"+w.shopID+"/delete", nil).redirect(t, "/sites")
	if strings.Contains(api(), "shop.example") {
		t.Fatalf("stop sharing left the site: %s", api())
	}
	b.get("/sites/"+w.shopID+"/delete").want(t, 404, "No shared site")

	b.post("/browsers/"+w.browserOne+"/rename", url.Values{"name": {"  "}}).want(t, 400, "Type a name for the browser.", `role="alert"`)
	b.post("/browsers/"+w.browserOne+"/rename", url.Values{"name": {"Work laptop"}}).redirect(t, "/browsers")
	b.get("/browsers").want(t, 200, "Work laptop")
	if m, err := w.br.Expect(bridge.TypeBrowser, testutil.WaitShort); err != nil || m.Name != "Work laptop" {
		t.Fatalf("the connected browser was not told its new name: %+v %v", m, err)
	}
}

func TestSiteFormsRefuseMissingOrWrongCSRF(t *testing.T) {
	w := newSitesWorld(t, storetest.SQLite)
	before := sitesSnapshot(t, w.alice)
	for _, f := range w.siteForms() {
		for _, token := range []string{"", "forged-forged-forged-forged-forged-forged"} {
			vals := url.Values{"_csrf": {token}}
			for k, v := range f.vals {
				vals[k] = v
			}
			if p := w.aliceBrowser.post(f.path, vals); p.status != 403 || !strings.Contains(p.body, "CSRF") {
				t.Errorf("POST %s with _csrf=%q: %d, want 403", f.path, token, p.status)
			}
		}
	}
	if after := sitesSnapshot(t, w.alice); after != before {
		t.Fatalf("refused forms changed something:\nbefore %s\nafter  %s", before, after)
	}
}

func TestOtherPeoplesSitesAndBrowsersAreNotFound(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSitesWorld(t, k)
		before := sitesSnapshot(t, w.alice)
		bobClient := w.env.Person(t, "bob@example.com")
		bobClient.Workspace("Bob's")
		bob := newBrowser(t, w.env, bobClient)
		bob.get("/sites/"+w.shopID+"/delete").want(t, 404, "No shared site")
		for _, f := range w.siteForms() {
			p := bob.post(f.path, f.vals)
			if f.path == "/sites" {
				// Sharing into alice's workspace: refused as if it did not exist.
				p.want(t, 404, "That workspace no longer exists")
				continue
			}
			if p.status != 404 {
				t.Errorf("bob POST %s: %d, want 404: %.200s", f.path, p.status, p.body)
			}
		}
		if after := sitesSnapshot(t, w.alice); after != before {
			t.Fatalf("bob changed alice's things:\nbefore %s\nafter  %s", before, after)
		}
	})
}

func TestSitePagesRefuseAgentTokens(t *testing.T) {
	w := newSitesWorld(t, storetest.SQLite)
	secret := w.alice.AgentToken(w.ws, "laptop")
	before := sitesSnapshot(t, w.alice)
	for _, p := range []string{"/sites", "/browsers", "/sites/" + w.shopID + "/delete"} {
		req, _ := http.NewRequest("GET", w.env.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		w.aliceBrowser.do(req).want(t, 401, "Agent tokens do not open the web app")
	}
	for _, f := range w.siteForms() {
		vals := url.Values{"_csrf": {w.alice.CSRF}}
		for k, v := range f.vals {
			vals[k] = v
		}
		req, _ := http.NewRequest("POST", w.env.URL+f.path, strings.NewReader(vals.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+secret)
		w.aliceBrowser.do(req).want(t, 401)
	}
	if sitesSnapshot(t, w.alice) != before {
		t.Fatal("an agent token changed something through a page")
	}
}

func TestSitePagesLabelEveryControl(t *testing.T) {
	w := newSitesWorld(t, storetest.SQLite)
	b := w.aliceBrowser
	pages := map[string]string{
		"/sites":            b.get("/sites").body,
		"/browsers":         b.get("/browsers").body,
		"/sites/:id/delete": b.get("/sites/" + w.shopID + "/delete").body,
		"share failed":      b.post("/sites", url.Values{"origin": {"nope"}, "workspaceId": {w.ws}}).body,
		"rename failed":     b.post("/browsers/"+w.browserOne+"/rename", url.Values{"name": {""}}).body,
	}
	controls := 0
	for name, body := range pages {
		controls += checkControls(t, name, body)
	}
	// Sites, twice: share (2) and a move per site (2); browsers, twice: a
	// name per browser (2).
	if controls < 2*4+2*2 {
		t.Fatalf("checked only %d controls; the pages did not render", controls)
	}
}

// TestSiteAndBrowserChangesReachTheEventStream: sharing, the setting,
// moving and unsharing (API and forms), and a browser connecting, opening a
// site, announcing and dropping tools, being renamed and leaving, each reach
// the person's pages as an event, and nobody else's.
func TestSiteAndBrowserChangesReachTheEventStream(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
		alice := env.Person(t, "alice@example.com")
		ws, other := alice.Workspace("Shopping"), alice.Workspace("Reading")
		s := openStream(t, env, alice, nil)
		if e := s.next(t, true); e.comment != "connected" {
			t.Fatalf("first frame %+v", e)
		}
		bob := env.Person(t, "bob@example.com")
		shareID(t, bob, shop, bob.Workspace("Bob's")) // never reaches alice
		expect := func(typ string, contains ...string) {
			t.Helper()
			e := s.next(t, false)
			if e.typ != typ {
				t.Fatalf("got %s %s, want %s", e.typ, e.data, typ)
			}
			for _, c := range contains {
				if !strings.Contains(e.data, c) {
					t.Fatalf("%s %s lacks %q", e.typ, e.data, c)
				}
			}
		}

		id := shareID(t, alice, shop, ws)
		expect("site.shared", `"origin":"https://shop.example"`, id)
		alice.MustJSON("POST", "/api/sites", map[string]string{"origin": shop, "workspaceId": ws}, 200, nil) // no change, no event
		alice.MustJSON("POST", "/api/sites", map[string]string{"origin": shop, "workspaceId": other}, 200, nil)
		expect("site.updated", `"movedFrom":"`+ws+`"`, `"workspaceId":"`+other+`"`)
		alice.MustJSON("PATCH", "/api/sites/"+id, map[string]bool{"askAll": true}, 200, nil)
		expect("site.updated", `"askAll":true`, id)

		br, _ := extBrowser(t, env, alice, "browser-one")
		expect("browser.connected", `"id":"browser-one"`)
		if err := br.Send(map[string]any{"type": bridge.TypeSitesOpen, "sites": []map[string]any{{"origin": shop, "lastUsed": 1, "tabs": 1}}}); err != nil {
			t.Fatal(err)
		}
		expect("browser.sites", `"id":"browser-one"`)
		if m, err := br.Announce(bridgetest.Doc{ID: "d1", Origin: shop, URL: shop + "/", Tools: shopTools}, testutil.WaitShort); err != nil || m.Type != bridge.TypeToolsAccepted {
			t.Fatalf("announce: %+v %v", m, err)
		}
		expect("site.tools", `"origin":"https://shop.example"`, `"id":"browser-one"`)
		if err := br.Gone("d1"); err != nil {
			t.Fatal(err)
		}
		expect("site.tools", `"origin":"https://shop.example"`)
		alice.MustJSON("PATCH", "/api/browsers/browser-one", map[string]string{"name": "Laptop"}, 200, nil)
		expect("browser.renamed", `"name":"Laptop"`)
		br.Close()
		expect("browser.disconnected", `"id":"browser-one"`)
		alice.MustJSON("DELETE", "/api/sites/"+id, nil, 204, nil)
		expect("site.unshared", id)

		// The page forms publish the same events.
		b := newBrowser(t, env, alice)
		b.post("/sites", url.Values{"origin": {docsSite}, "workspaceId": {ws}}).redirect(t, "/sites")
		expect("site.shared", `"origin":"https://docs.example"`)
		docs := shareID(t, alice, "https://third.example", ws)
		expect("site.shared", docs)
		b.post("/sites/"+docs+"/ask", url.Values{"askAll": {"on"}}).redirect(t, "/sites")
		expect("site.updated", `"askAll":true`)
		b.post("/sites/"+docs+"/move", url.Values{"workspaceId": {other}}).redirect(t, "/sites")
		expect("site.updated", `"movedFrom":"`+ws+`"`)
		b.post("/browsers/browser-one/rename", url.Values{"name": {"Desk"}}).redirect(t, "/browsers")
		expect("browser.renamed", `"name":"Desk"`)
		b.post("/sites/"+docs+"/delete", nil).redirect(t, "/sites")
		expect("site.unshared", docs)
	})
}
