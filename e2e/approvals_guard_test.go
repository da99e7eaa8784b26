package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestAllowOnAPageAnotherSiteOpenedIsHeld: a site the person visits links
// to the inbox and asks for a double-click, so that the second click lands
// on Allow (double-clickjacking). In real Chromium the browser says where
// the navigation came from (Sec-Fetch-Site), the inbox marks itself as
// arrived from another site, and a click on Allow in its first moment does
// nothing; once the card says its answers count, the same click allows. The
// inbox opened from a typed address answers at the first click.
func TestAllowOnAPageAnotherSiteOpenedIsHeld(t *testing.T) {
	pw := newPayWorld(t)
	env, caller := pw.env, pw.caller

	// The other site: a page with a link to the inbox, on another origin.
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>Win a prize</title><a id="go" href="%s/">Double-click here to claim</a>`, env.URL)
	}))
	t.Cleanup(hostile.Close)

	ctx := startBrowser(t)
	signIn(t, ctx, env, "ada@example.com")
	pending := func(id string) bool { return slices.Contains(pw.pending(), id) }
	// waitAsked waits until the agent's call has opened its request, so a page loaded after it
	// shows it on load.
	waitAsked := func() { pw.waitPending(1) }
	requestOnCard := func() string {
		return get(t, ctx, "the card's request", chromedp.Evaluate[string](`document.querySelector('#inbox .request').dataset.request`))
	}

	got, _ := caller.ask("pay", map[string]any{"amount": 5})
	waitAsked()
	run(t, ctx, "the other site's page, and its link to the inbox",
		viewport(1280, 800, "light"),
		chromedp.Navigate(hostile.URL),
		chromedp.Click(chromedp.ID("go")),
		chromedp.WaitVisible(chromedp.CSS(`#inbox .request`)),
	)
	if arrived := get(t, ctx, "the page's mark", chromedp.Evaluate[string](`document.body.dataset.arrived || ''`)); arrived != "cross-site" {
		t.Fatalf("the inbox opened from another site is marked %q, want cross-site", arrived)
	}
	id := requestOnCard()
	clickWhere(t, ctx, "the second click of the double-click, at once", answerButton("once"))
	// The answer counts once the card says so (a second on screen, with focus); a click that had
	// gone through would have been posted long before.
	run(t, ctx, "the card says its answers count, or is gone", chromedp.Poll[chromedp.Void](fmt.Sprintf(
		`!!document.querySelector('#inbox .request[data-keys="ready"]') || !document.querySelector('#inbox .request[data-request=%q]')`, id)))
	if !pending(id) {
		t.Fatal("the click in the page's first moment answered the request")
	}
	clickWhere(t, ctx, "a deliberate click", answerButton("once"))
	if o := released(t, got); !o.Allowed {
		t.Fatalf("allowed after the page settled, the call read %q", o.Text)
	}

	// Opened from a typed address, the inbox answers at the first click.
	got, _ = caller.ask("pay", map[string]any{"amount": 6})
	waitAsked()
	run(t, ctx, "the inbox from a typed address",
		chromedp.Navigate(env.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#inbox .request`)),
	)
	if arrived := get(t, ctx, "the page's mark", chromedp.Evaluate[string](`document.body.dataset.arrived || ''`)); arrived != "" {
		t.Fatalf("the inbox from a typed address is marked %q", arrived)
	}
	clickWhere(t, ctx, "click at once", answerButton("once"))
	if o := released(t, got); !o.Allowed {
		t.Fatalf("allowed at the first click, the call read %q", o.Text)
	}
}

// TestAnAnswerAimedAtARequestThatLeftIsHeld: the person aims at the first request's Allow once;
// just before the press its agent withdraws it, and the next request — another agent's, or the
// same hostile agent's second ask — slides up under the pointer. In real Chromium the press lands
// on that request's Allow once and does nothing: the card says it just moved, its answers count
// once it has held its place a moment, and then a deliberate click answers it.
func TestAnAnswerAimedAtARequestThatLeftIsHeld(t *testing.T) {
	pw := newPayWorld(t)
	env, caller := pw.env, pw.caller
	_, withdrawFirst := caller.ask("pay", map[string]any{"amount": 5})
	pw.waitPending(1)
	second, _ := caller.ask("pay", map[string]any{"amount": 500})
	pw.waitPending(2)
	ids := pw.pending()
	first, next := ids[0], ids[1]

	ctx := startBrowser(t)
	signIn(t, ctx, env, "ada@example.com")
	run(t, ctx, "the inbox with both requests, settled",
		viewport(1280, 800, "light"),
		chromedp.Navigate(env.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#inbox .request').length === 2`),
	)
	// The press is made in the page the moment the first card leaves (a person's hand is faster
	// than a test's round trip to the browser), at the point where the first card's Allow once was.
	run(t, ctx, "aim at the first request's Allow once", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const r = document.getElementById('ans-%s-once').getBoundingClientRect();
		const x = r.left + r.width / 2, y = r.top + r.height / 2;
		new MutationObserver((_, obs) => {
			if (document.querySelector('[data-request=%q]')) return;
			obs.disconnect();
			const el = document.elementFromPoint(x, y);
			const btn = el && el.closest('button');
			if (btn) btn.click();
			window.__press = { on: btn ? btn.id : '', held: !!document.querySelector('[data-request=%q] .held-note') };
		}).observe(document.body, { childList: true, subtree: true });
	})()`, first, first, next)))
	withdrawFirst()
	press := get(t, ctx, "the press", chromedp.Poll[struct {
		On   string
		Held bool
	}](`window.__press`))
	if press.On != "ans-"+next+"-once" {
		t.Fatalf("the press landed on %q, want the next request's Allow once (ans-%s-once): the test did not reproduce the slide", press.On, next)
	}
	if !press.Held {
		t.Fatal("the card that slid under the press does not say the click was held")
	}
	run(t, ctx, "the moved card's answers count again", chromedp.Poll[chromedp.Void](`!document.querySelector('.held-note')`))
	if ids := pw.pending(); len(ids) != 1 || ids[0] != next {
		t.Fatalf("pending after the held press: %v, want only %s", ids, next)
	}
	run(t, ctx, "a deliberate Deny", chromedp.Click(answerButton("deny")))
	if o := released(t, second); o.Allowed {
		t.Fatalf("denied deliberately, the call read %q", o.Text)
	}
}

// TestAnAnswerToARequestThatJustArrivedIsHeld: the person has the inbox open with nothing
// waiting and is about to press something where the first request will appear (the empty inbox's
// notice, the checklist); the agent chooses that moment to ask. In real Chromium a press on the new
// card's Allow once as it appears does nothing: the card says it just arrived, its answers fade in,
// and once it has been on screen a moment a deliberate click answers it. A card the page loaded
// with takes the first click (TestAllowOnAPageAnotherSiteOpenedIsHeld's typed-address half).
func TestAnAnswerToARequestThatJustArrivedIsHeld(t *testing.T) {
	pw := newPayWorld(t)
	ctx := startBrowser(t)
	signIn(t, ctx, pw.env, "ada@example.com")
	run(t, ctx, "the empty inbox, live",
		viewport(440, 600, "light"),
		chromedp.Navigate(pw.env.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("inbox-empty")),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)),
	)
	// The press is made in the page the moment the card is in it (a person's hand is faster than a
	// test's round trip to the browser): at the middle of its Allow once, by what is under that point.
	run(t, ctx, "press Allow once as the request appears", chromedp.Evaluate[chromedp.Void](`(() => {
		new MutationObserver((_, obs) => {
			const card = document.querySelector('#inbox .request');
			if (!card) return;
			obs.disconnect();
			const r = card.querySelector('button[data-key="y"]').getBoundingClientRect();
			const btn = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2).closest('button');
			btn.click();
			window.__press = { id: card.dataset.request, on: btn.id, clicks: card.dataset.clicks || '', note: (card.querySelector('.held-note') || {}).textContent || '' };
		}).observe(document.body, { childList: true, subtree: true });
	})()`))
	got, _ := pw.caller.ask("pay", map[string]any{"amount": 500})
	press := get(t, ctx, "the press", chromedp.Poll[struct{ ID, On, Clicks, Note string }](`window.__press`))
	id := press.ID
	if press.On != "ans-"+id+"-once" {
		t.Fatalf("the press landed on %q, want the new request's Allow once (ans-%s-once)", press.On, id)
	}
	if press.Clicks != "held" || press.Note != "This request just arrived. Read it, then answer." {
		t.Fatalf("the card under the press: clicks %q, note %q; want held, and a note that it just arrived", press.Clicks, press.Note)
	}
	run(t, ctx, "the card's answers count", chromedp.WaitVisible(chromedp.CSS(`#inbox .request[data-clicks="ready"]`)))
	if ids := pw.pending(); len(ids) != 1 || ids[0] != id {
		t.Fatalf("pending after the held press: %v, want %s still waiting", ids, id)
	}
	if note := get(t, ctx, "the note", chromedp.Evaluate[bool](`!!document.querySelector('.held-note')`)); note {
		t.Fatal("the card still says it just arrived once its answers count")
	}
	run(t, ctx, "a deliberate Allow once", chromedp.Click(answerButton("once")))
	if o := released(t, got); !o.Allowed {
		t.Fatalf("allowed deliberately, the call read %q", o.Text)
	}
}

// payWorld is ada with a workspace, a task and an agent whose calls of pay on
// https://shop.example a test browser runs: where the inbox's guard and layout tests start.
type payWorld struct {
	t      *testing.T
	env    *servertest.Env
	person *servertest.Client
	caller *agentCaller
}

func newPayWorld(t *testing.T) *payWorld {
	t.Helper()
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	return &payWorld{t: t, env: env, person: person, caller: newAgentCaller(t, env, person, "Shopping", "Pay", "https://shop.example", "pay")}
}

// pending returns the ids of ada's pending requests, oldest first.
func (w *payWorld) pending() []string {
	var out struct {
		Approvals []struct{ ID string } `json:"approvals"`
	}
	w.person.MustJSON("GET", "/api/approvals", nil, 200, &out)
	ids := make([]string, len(out.Approvals))
	for i, a := range out.Approvals {
		ids[i] = a.ID
	}
	return ids
}

// waitPending waits until n requests are pending, so a page loaded after shows them.
func (w *payWorld) waitPending(n int) {
	w.t.Helper()
	testutil.Eventually(w.t, testutil.WaitMedium, func() bool { return len(w.pending()) == n }, fmt.Sprintf("%d requests pending", n))
}
