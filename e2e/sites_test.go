package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// wait bounds one frame exchanged with the server over the extension socket.
const wait = testutil.WaitShort

// connectBrowser opens the extension socket for the person of c as browser
// id, named name, as the extension's service worker does.
func connectBrowser(t *testing.T, env *servertest.Env, c *servertest.Client, id, name string) *bridgetest.Browser {
	t.Helper()
	var ticket struct {
		Ticket string `json:"ticket"`
	}
	c.MustJSON("POST", "/api/tickets", nil, 201, &ticket)
	b, resp, err := bridgetest.Dial(context.Background(), env.URL, ticket.Ticket, bridgetest.Origin(servertest.ExtensionID))
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	t.Cleanup(func() { b.Conn.Close() })
	if _, err := b.Hello(id, name, "0.3.1", wait); err != nil {
		t.Fatalf("hello: %v", err)
	}
	return b
}

// announce has the browser report a page of origin with tools, with its tab
// open (sites.open) as the extension does.
func announce(t *testing.T, b *bridgetest.Browser, doc, origin, tools string, tabs int) {
	t.Helper()
	err := b.Send(map[string]any{"type": bridge.TypeSitesOpen, "sites": []map[string]any{{"origin": origin, "lastUsed": time.Now().UnixMilli(), "tabs": tabs}}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Announce(bridgetest.Doc{ID: doc, Origin: origin, URL: origin + "/", Title: origin, TabID: 4, Tools: tools}, wait)
	if err != nil || m.Type != bridge.TypeToolsAccepted {
		t.Fatalf("announce: %+v %v", m, err)
	}
}

func signIn(t *testing.T, ctx context.Context, env *servertest.Env, email string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(env.URL+"/signin"),
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), "password-"+email),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`nav.nav`)),
	)
}

const shopTools = `[
 {"name":"search","title":"Search","description":"Search the catalogue","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object"}},
 {"name":"buy","description":"Buy an item","inputSchema":{"type":"object"}}
]`

// TestSitesGoOnlineAndOfflineLiveAndABrowserIsRenamed: in the popup's size,
// the sites page shows a shared site come online when a browser announces
// its tools and go offline when the browser disconnects, without a reload;
// then the person renames the browser on the browsers page.
func TestSitesGoOnlineAndOfflineLiveAndABrowserIsRenamed(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice := env.Person(t, "alice@example.com")
	ws := alice.Workspace("Shopping")
	var shared struct {
		Site struct{ ID string } `json:"site"`
	}
	alice.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://shop.example", "workspaceId": ws}, 201, &shared)
	state := fmt.Sprintf(`document.getElementById('site-%s-state').textContent.trim()`, shared.Site.ID)

	ctx := startBrowser(t)
	run(t, ctx, "popup size", viewport(440, 600, "light"))
	signIn(t, ctx, env, "alice@example.com")
	run(t, ctx, "open the sites page",
		chromedp.Navigate(env.URL+"/sites"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)),
		chromedp.Poll[chromedp.Void](state+` === 'Offline'`),
		chromedp.WaitVisible(chromedp.ID("no-browser")),
	)
	noHorizontalScroll(t, ctx, "sites", 440)

	br := connectBrowser(t, env, alice, "browser-one", "Chrome on the laptop")
	run(t, ctx, "the no-browser notice goes", chromedp.WaitNotPresent(chromedp.ID("no-browser")))
	announce(t, br, "d1", "https://shop.example", shopTools, 1)
	run(t, ctx, "see the site come online with its tools",
		chromedp.Poll[chromedp.Void](state+` === 'Online'`),
		chromedp.WaitVisible(chromedp.Search(`//section[@id="site-`+shared.Site.ID+`"]//code[.="search"]`)),
	)
	tools := get(t, ctx, "read the tools", chromedp.Text(chromedp.CSS(`#site-`+shared.Site.ID+` .tools`)))
	open := get(t, ctx, "read where it is open", chromedp.Text(chromedp.CSS(`#site-`+shared.Site.ID+` .open-in`)))
	if !strings.Contains(tools, "read-only") || !strings.Contains(tools, "asks first") || !strings.Contains(open, "Chrome on the laptop") {
		t.Fatalf("tools %q, open in %q", tools, open)
	}

	br.Close()
	run(t, ctx, "see the site go offline",
		chromedp.Poll[chromedp.Void](state+` === 'Offline'`),
		chromedp.WaitVisible(chromedp.ID("no-browser")),
	)

	run(t, ctx, "rename the browser",
		chromedp.Navigate(env.URL+"/browsers"),
		chromedp.WaitVisible(chromedp.ID("browser-browser-one")),
		chromedp.Click(chromedp.CSS(`#rename-browser-one summary`)),
		chromedp.WaitVisible(chromedp.ID("rename-browser-one-name")),
		chromedp.Clear(chromedp.ID("rename-browser-one-name")),
		chromedp.SendKeys(chromedp.ID("rename-browser-one-name"), "Work laptop"),
		chromedp.Submit(chromedp.ID("rename-browser-one-name")),
		chromedp.WaitVisible(chromedp.Search(`//h2[@id="browser-browser-one-head" and .="Work laptop"]`)),
	)
	noHorizontalScroll(t, ctx, "browsers", 440)
	var browsers struct {
		Browsers []struct{ Name string } `json:"browsers"`
	}
	alice.MustJSON("GET", "/api/browsers", nil, 200, &browsers)
	if len(browsers.Browsers) != 1 || browsers.Browsers[0].Name != "Work laptop" {
		t.Fatalf("browsers after rename: %+v", browsers)
	}

	// A browser connecting again appears on the open page live, with its new name.
	connectBrowser(t, env, alice, "browser-one", "Chrome on the laptop")
	run(t, ctx, "see it connect", chromedp.WaitVisible(chromedp.Search(`//section[@id="browser-browser-one"]//span[.="Connected"]`)))
}
