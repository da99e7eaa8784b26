package e2e

import (
	"context"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/internal/testutil"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// pendingID is the id of the person's waiting request for tool.
func pendingID(t *testing.T, person *servertest.Client, tool string) string {
	t.Helper()
	var pending struct {
		Approvals []struct{ ID, Tool string } `json:"approvals"`
	}
	person.MustJSON("GET", "/api/approvals", nil, 200, &pending)
	for _, p := range pending.Approvals {
		if p.Tool == tool {
			return p.ID
		}
	}
	t.Fatalf("no request waits for %s: %+v", tool, pending.Approvals)
	return ""
}

// swapped marks a live region and waits until app.js replaced it, so a
// check after it sees the page as a live update left it.
func swapped(region, ready string) (mark, wait chromedp.Action[chromedp.Void]) {
	return chromedp.Evaluate[chromedp.Void](`document.getElementById(` + jsString(region) + `).dataset.stale = '1'`),
		chromedp.Poll[chromedp.Void](`(() => { const r = document.getElementById(` + jsString(region) + `);
  return r && !r.dataset.stale && (` + ready + `); })()`)
}

// TestLiveUpdatesKeepWhatThePersonIsDoing: in the popup's size, events
// that re-render a region leave the person where they were. Focus on an
// answer button stays on it when another request arrives; a half-typed
// machine name stays (the region waits while the field has focus, then
// keeps the value); Arguments opened on a task page stay open as calls
// finish; and on the terminal page, which has no live regions of its own,
// the nav's Inbox count follows requests without disturbing the terminal.
func TestLiveUpdatesKeepWhatThePersonIsDoing(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	owner := env.Person(t, "alice@example.com")
	agent := newAgentCaller(t, env, owner, "Docs site", "Update the pricing page", "https://docs.example", "fill_form", "publish", "archive", "rename")
	ctx := startBrowser(t)
	signIn(t, ctx, env, "alice@example.com")
	live := chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`))

	// Focus on "Allow once" survives a second request arriving.
	run(t, ctx, "open the inbox", viewport(440, 600, "light"), chromedp.Navigate(env.URL+"/"), chromedp.WaitVisible(chromedp.ID("inbox-empty")), live)
	first, _ := agent.ask("fill_form", map[string]any{"title": "Pricing"})
	run(t, ctx, "see the first request", chromedp.WaitVisible(chromedp.Search(`//article//code[.="fill_form"]`)))
	a := pendingID(t, owner, "fill_form")
	mark, wait := swapped("inbox", `document.querySelectorAll('#inbox .request').length === 2`)
	once := `document.querySelector('#req-` + a + ` form:has(input[name=answer][value=once]) button')`
	run(t, ctx, "focus Allow once", chromedp.Evaluate[chromedp.Void](once+`.focus()`), mark)
	second, _ := agent.ask("publish", map[string]any{"page": "/pricing"})
	run(t, ctx, "the second request arrives", wait)
	if got := get(t, ctx, "focus", chromedp.Evaluate[string](`document.activeElement === `+once+` ? 'kept' : document.activeElement.outerHTML.slice(0, 80)`)); got != "kept" {
		t.Fatalf("after a request arrived, focus is on %s, want the Allow once button of the first request", got)
	}
	run(t, ctx, "answer from the keyboard", chromedp.WaitVisible(chromedp.CSS(`#req-`+a+`[data-clicks="ready"]`)), // it arrived a moment ago (lib/settle.js)
		chromedp.KeyEvent("\r"), chromedp.WaitNotPresent(chromedp.ID("req-"+a)))
	if o := released(t, first); !o.Allowed {
		t.Fatalf("allow once from the keyboard released %+v", o)
	}
	owner.MustJSON("POST", "/api/approvals/"+pendingID(t, owner, "publish")+"/answer", map[string]string{"answer": "once"}, 200, nil)
	released(t, second)

	// A half-typed machine name survives machine events.
	var m struct {
		Machine struct{ ID string } `json:"machine"`
	}
	owner.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, &m)
	field := "rename-" + m.Machine.ID
	run(t, ctx, "type a new name",
		chromedp.Navigate(env.URL+"/machines"), live,
		chromedp.Click(chromedp.CSS("#machine-"+m.Machine.ID+" details summary")),
		chromedp.WaitVisible(chromedp.ID(field)),
		chromedp.Clear(chromedp.ID(field)),
		chromedp.SendKeys(chromedp.ID(field), "desk"),
	)
	owner.MustJSON("POST", "/api/machines", map[string]string{"name": "build box"}, 201, nil)
	run(t, ctx, "the region waits while the field has focus",
		chromedp.WaitVisible(chromedp.CSS(`#machines[data-live-deferred]`)))
	state := `[document.activeElement.id, document.getElementById(` + jsString(field) + `).value, document.querySelector('#machine-` + m.Machine.ID + ` details').open].join(' ')`
	if got, want := get(t, ctx, "the field", chromedp.Evaluate[string](state)), field+" desk true"; got != want {
		t.Fatalf("while typing: focus, value and open are %q, want %q", got, want)
	}
	// Moving to the Save button keeps the region waiting, so the button is
	// not swapped away between pressing and releasing it.
	save := "machine-" + m.Machine.ID + "-rename-save"
	run(t, ctx, "move to Save",
		chromedp.Evaluate[chromedp.Void](`document.getElementById(`+jsString(save)+`).focus(); document.getElementById(`+jsString(save)+`).dataset.same = '1'`))
	waited := get(t, ctx, "deferrals", chromedp.Evaluate[string](`document.getElementById('machines').getAttribute('data-live-deferred') || ''`))
	owner.MustJSON("POST", "/api/machines", map[string]string{"name": "spare"}, 201, nil)
	run(t, ctx, "the region waits again",
		chromedp.Poll[chromedp.Void](`+(document.getElementById('machines').getAttribute('data-live-deferred') || 0) > `+jsString(waited)+` * 1`))
	kept := `document.activeElement.id === ` + jsString(save) + ` && document.activeElement.dataset.same === '1'`
	if !get(t, ctx, "the Save button", chromedp.Evaluate[bool](kept)) {
		t.Fatal("the Save button was swapped while it had focus after typing")
	}
	run(t, ctx, "leave the form; the new machines appear",
		chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="machines"]//h2[.="build box"]`)),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="machines"]//h2[.="spare"]`)),
	)
	if got, want := get(t, ctx, "the field", chromedp.Evaluate[string](state)), " desk true"; got != want {
		t.Fatalf("after the update: focus, value and open are %q, want %q (the typed name and the open Rename kept)", got, want)
	}

	// Arguments opened on a task page stay open as calls finish.
	run(t, ctx, "open the task", chromedp.Navigate(env.URL+"/tasks/"+agent.task), live,
		chromedp.WaitVisible(chromedp.Search(`//li[contains(@class,"tl-call")]//code[.="publish"]`)),
		chromedp.Click(chromedp.CSS("#req-"+a+" summary")),
		chromedp.WaitVisible(chromedp.CSS("#req-"+a+" pre.args")),
	)
	mark, wait = swapped("timeline", `document.querySelectorAll('#timeline .tl-call').length === 3`)
	run(t, ctx, "mark the timeline", mark)
	third, _ := agent.ask("archive", map[string]any{"id": 7})
	run(t, ctx, "the request arrives", chromedp.WaitVisible(chromedp.Search(`//li[contains(@class,"tl-approval")]//code[.="archive"]`)))
	owner.MustJSON("POST", "/api/approvals/"+pendingID(t, owner, "archive")+"/answer", map[string]string{"answer": "once"}, 200, nil)
	released(t, third)
	run(t, ctx, "the call finishes on the page", wait)
	if open := get(t, ctx, "details", chromedp.Evaluate[bool](`document.querySelector('#req-`+a+` details').open`)); !open {
		t.Fatal("the Arguments the person opened closed when a call finished")
	}

	// The terminal page's nav count follows requests.
	rig := connectMachine(t, env, owner, "terminal box")
	session := rig.start(80, 24, "cat")
	run(t, ctx, "open the terminal", chromedp.Navigate(env.URL+"/sessions/"+session),
		chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"]`)), live,
		chromedp.Evaluate[chromedp.Void](`window.notReloaded = true; document.getElementById('term-host').dataset.same = '1'`),
	)
	fourth, _ := agent.ask("rename", map[string]any{"to": "x"})
	run(t, ctx, "the count appears",
		chromedp.Poll[chromedp.Void](`(document.getElementById('inbox-count') || {textContent: ''}).textContent.trim().startsWith('1')`))
	owner.MustJSON("POST", "/api/approvals/"+pendingID(t, owner, "rename")+"/answer", map[string]string{"answer": "deny"}, 200, nil)
	released(t, fourth)
	run(t, ctx, "the count goes", chromedp.WaitNotPresent(chromedp.ID("inbox-count")))
	undisturbed := get(t, ctx, "the terminal", chromedp.Evaluate[bool](`window.notReloaded === true && document.getElementById('term-host').dataset.same === '1' && document.querySelector('#term-page').dataset.state === 'live'`))
	if !undisturbed {
		t.Fatal("updating the nav count disturbed the terminal")
	}
}

// TestAPageHearsWhatHappenedBeforeItsStreamOpened: an agent's request that
// arrives after the inbox was rendered but before its event stream opened
// reaches the page anyway. The stream's request is held (the DevTools Fetch
// domain pauses it in the browser) while the agent asks; released, the
// stream tells the page it missed an event and the request appears. Before
// the fix the page said "No requests waiting" beside a nav count of 1 until
// the next event.
func TestAPageHearsWhatHappenedBeforeItsStreamOpened(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	owner := env.Person(t, "alice@example.com")
	agent := newAgentCaller(t, env, owner, "Docs site", "Update the pricing page", "https://docs.example", "publish")
	ctx := startBrowser(t)
	signIn(t, ctx, env, "alice@example.com")

	held := make(chan fetch.RequestID, 4)
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			held <- e.RequestID
		}
	}); err != nil {
		t.Fatal(err)
	}
	cdpDo := func(what string, f func(context.Context, *chromedp.Target) error) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Func(f)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	cdpDo("hold the event stream", func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/api/events*"}}})
		return err
	})
	run(t, ctx, "open the inbox", viewport(440, 600, "light"), chromedp.Navigate(env.URL+"/"), chromedp.WaitVisible(chromedp.ID("inbox-empty")))
	id := testutil.RequireReceive(t, testutil.WaitMedium, held)

	got, _ := agent.ask("publish", map[string]any{"page": "/pricing"})
	testutil.Eventually(t, testutil.WaitMedium, func() bool {
		var out struct {
			Approvals []struct{ ID string } `json:"approvals"`
		}
		owner.MustJSON("GET", "/api/approvals", nil, 200, &out)
		return len(out.Approvals) == 1
	}, "the agent's request is pending")
	if n := get(t, ctx, "the inbox before its stream", chromedp.Evaluate[int](`document.querySelectorAll('#inbox .request').length`)); n != 0 {
		t.Fatalf("the inbox shows %d requests before its stream opened: the request came too early to test the gap", n)
	}
	cdpDo("release the stream", func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: id}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, fetch.Disable, cdp.Empty{})
		return err
	})
	run(t, ctx, "the request the page missed appears",
		chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="inbox"]//article//code[.="publish"]`)))
	owner.MustJSON("POST", "/api/approvals/"+pendingID(t, owner, "publish")+"/answer", map[string]string{"answer": "deny"}, 200, nil)
	released(t, got)
}
