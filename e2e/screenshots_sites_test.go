package e2e

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/server/servertest"
)

// sitesEmptyShots captures the sites and browsers pages before anything is
// shared or connected.
func sitesEmptyShots(env *servertest.Env, capture func(shot)) {
	capture(shot{"sites-empty", "Shared sites, before the first", visit(env.URL+"/sites", `#sites-empty`)})
	capture(shot{"browsers-empty", "Browsers, before the first connects", visit(env.URL+"/browsers", `#browsers-empty`)})
}

const docsTools = `[
 {"name":"search_docs","title":"Search the docs","description":"Full-text search over every published page.","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object"}},
 {"name":"edit_section","title":"Edit a section","description":"Replace one section of a page with new HTML.","inputSchema":{"type":"object"}},
 {"name":"publish_page","description":"Publish a page's pending changes.","inputSchema":{"type":"object"}}
]`

const billingTools = `[
 {"name":"list_invoices","description":"List invoices, newest first.","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object"}},
 {"name":"refund","title":"Refund an invoice","description":"Refund all or part of a paid invoice.","inputSchema":{"type":"object"}}
]`

// sitesShots shares two sites — one open in a connected browser, one whose
// only browser left (its tools as last seen) — and captures the sites and
// browsers pages.
func sitesShots(t *testing.T, ctx context.Context, env *servertest.Env, owner *servertest.Client, docsWS, billingWS string, capture func(shot)) {
	// docs.example.com is shared already when the approvals were captured first
	if st, body := owner.Do("POST", "/api/sites", map[string]string{"origin": "https://docs.example.com", "workspaceId": docsWS}); st != 200 && st != 201 {
		t.Fatalf("share docs.example.com: %d %s", st, body)
	}
	var billing struct {
		Site struct{ ID string } `json:"site"`
	}
	owner.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://billing.example.com", "workspaceId": billingWS}, 201, &billing)
	owner.MustJSON("PATCH", "/api/sites/"+billing.Site.ID, map[string]bool{"askAll": true}, 200, nil)

	home := connectBrowser(t, env, owner, "browser-home", "Chrome at home")
	announce(t, home, "b1", "https://billing.example.com", billingTools, 1)
	home.Close()
	laptop := connectBrowser(t, env, owner, "browser-laptop", "Chrome on the work laptop")
	announce(t, laptop, "d1", "https://docs.example.com", docsTools, 2)
	if _, err := laptop.Ping("p1", wait); err != nil { // the home browser's goodbye is recorded by now
		t.Fatal(err)
	}
	run(t, ctx, "wait until the home browser is gone", chromedp.Navigate(env.URL+"/browsers"),
		chromedp.WaitVisible(chromedp.Search(`//section[@id="browser-browser-home"]//span[.="Offline"]`)))

	capture(shot{"sites", "Shared sites: one online in a connected browser, one offline with its tools as last seen", visit(env.URL+"/sites", `#sites .site-card`)})
	capture(shot{"site-delete", "Stop sharing asks first", visit(env.URL+"/sites/"+billing.Site.ID+"/delete", `.btn-danger-solid`)})
	capture(shot{"browsers", "Browsers: one connected with a shared site open, one offline", visit(env.URL+"/browsers", `#browser-browser-laptop`)})
}
