package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// linkProgram prints one hyperlink (OSC 8) per pair of uri and text, each
// on its own row from the top, then READY; then it answers every line typed
// to it with "got [line]", so a test sees keys reach it.
func linkProgram(links ...[2]string) []string {
	script := `printf '\033[H\033[2J'; while [ $# -gt 0 ]; do printf '\033]8;;%s\033\\%s\033]8;;\033\\\r\n' "$1" "$2"; shift 2; done; printf 'READ''Y\r\n'; ` +
		`while IFS= read -r l; do printf 'g''ot [%s]\r\n' "$l"; done`
	argv := []string{"sh", "-c", script, "sh"}
	for _, l := range links {
		argv = append(argv, l[0], l[1])
	}
	return argv
}

// landing is a site a terminal's link leads to: it records each visit to
// /landed with the Referer the browser sent.
type landing struct {
	url    string
	visits chan string // the Referer of each visit
}

func startLanding(t *testing.T) *landing {
	t.Helper()
	l := &landing{visits: make(chan string, 8)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/landed" {
			l.visits <- r.Header.Get("Referer")
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>landed</title><p>landed</p>")
	}))
	t.Cleanup(srv.Close)
	l.url = srv.URL
	return l
}

// landedOnce waits for the one visit an opened link makes and checks, in
// browser b (any of its contexts), that exactly one tab shows it, that the
// tab has no opener, and that no referrer was sent.
func (l *landing) landedOnce(t *testing.T, b context.Context, href string) {
	t.Helper()
	select {
	case ref := <-l.visits:
		if ref != "" {
			t.Fatalf("the opened link sent the referrer %q", ref)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the link %s was never opened", href)
	}
	wctx, cancel := context.WithTimeout(b, 10*time.Second)
	defer cancel()
	var tabs []*target.Info
	for len(tabs) == 0 {
		infos, err := chromedp.Targets(wctx)
		if err != nil {
			t.Fatalf("no tab shows %s: %v", href, err)
		}
		for _, info := range infos {
			if info.Type == "page" && strings.HasPrefix(info.URL, l.url) {
				tabs = append(tabs, info)
			}
		}
		if len(tabs) == 0 {
			select { // a tab's address is reported a moment after its request: polling the target list, there is no event to wait on here
			case <-wctx.Done():
				t.Fatalf("no tab shows %s", href)
			case <-time.After(25 * time.Millisecond):
			}
		}
	}
	if len(tabs) != 1 || tabs[0].URL != href {
		var urls []string
		for _, info := range tabs {
			urls = append(urls, info.URL)
		}
		t.Fatalf("tabs at the link's site: %q, want exactly one at %s", urls, href)
	}
	if tabs[0].CanAccessOpener {
		t.Fatalf("the new tab can reach the terminal's page as its opener")
	}
	tab, cancelTab := chromedp.NewContext(b, chromedp.WithTargetID(tabs[0].TargetID))
	defer cancelTab()
	if got := get(t, tab, "the new tab's opener and referrer", chromedp.Evaluate[string](`String(window.opener) + ' ' + JSON.stringify(document.referrer)`)); got != `null ""` {
		t.Fatalf("the new tab has opener and referrer %s, want none", got)
	}
	select {
	case ref := <-l.visits:
		t.Fatalf("the link was opened twice (the second sent referrer %q)", ref)
	default:
	}
}

// nativeDialogs fails the test whenever the page in ctx opens a native
// JavaScript dialog (alert, confirm, prompt): the terminal asks in the page.
// The dialog is dismissed, so the page goes on; what it said is sent on
// the channel returned.
func nativeDialogs(t *testing.T, ctx context.Context) <-chan string {
	t.Helper()
	said := make(chan string, 8)
	if err := chromedp.Listen(ctx, func(ev any) {
		e, ok := ev.(*page.EventJavascriptDialogOpening)
		if !ok {
			return
		}
		t.Errorf("a native %s dialog opened: %q", e.Type, e.Message)
		select {
		case said <- e.Message:
		default:
		}
		go chromedp.Do(ctx, chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(c, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			return err
		}))
	}); err != nil {
		t.Fatal(err)
	}
	return said
}

// clickCell moves the mouse over the cell at col, row of the terminal's
// screen and clicks it, as a person clicks a link there. It reports
// whether xterm.js found a link under the pointer before the click.
func clickCell(t *testing.T, ctx context.Context, what string, col, row int) bool {
	t.Helper()
	at := cellAt(t, ctx, what, col, row)
	// The pointer comes from outside the terminal over the next cell:
	// xterm.js looks for a link only when the pointer is over another cell
	// than at its last move, even if it left the terminal in between.
	next := cellAt(t, ctx, what, col+1, row)
	run(t, ctx, what+": point at it", chromedp.MouseEvent(chromedp.MouseMoved, 1, 1),
		chromedp.MouseEvent(chromedp.MouseMoved, next[0], next[1]), chromedp.MouseEvent(chromedp.MouseMoved, at[0], at[1]))
	// xterm.js finds the link under the pointer after the move, and shows
	// it with a pointer cursor; a click before that is not on a link.
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](`!!document.querySelector('#term-host .xterm-cursor-pointer')`, chromedp.WithPollingInterval(10*time.Millisecond))); err != nil {
		return false
	}
	run(t, ctx, what, chromedp.MouseClickXY(at[0], at[1]))
	return true
}

// cellAt is the middle of the cell at col, row of the terminal's screen,
// in the page's coordinates.
func cellAt(t *testing.T, ctx context.Context, what string, col, row int) []float64 {
	t.Helper()
	return get(t, ctx, what+": where", chromedp.Evaluate[[]float64](fmt.Sprintf(`(() => {
  const r = document.querySelector('#term-host .xterm-screen').getBoundingClientRect();
  const c = window.__term._core._renderService.dimensions.css.cell;
  return [r.left + c.width * (%d + 0.5), r.top + c.height * (%d + 0.5)]; })()`, col, row)))
}

// question is the terminal page's in-page question about a link, as shown.
type question struct {
	Open    bool   `json:"open"`
	Title   string `json:"title"`
	Site    string `json:"site"`
	Address string `json:"address"`
	Warning string `json:"warning"`
	Focused string `json:"focused"` // the id of the element with the keyboard
}

const questionJS = `(() => { const d = document.getElementById('link-ask');
  const text = (id) => { const e = document.getElementById(id); return e ? e.textContent : ''; };
  return { open: !!d && d.open, title: text('link-ask-title'), site: text('link-ask-site'),
    address: text('link-ask-address'), warning: text('link-ask-warning'),
    focused: document.activeElement ? document.activeElement.id : '' }; })()`

func readQuestion(t *testing.T, ctx context.Context) question {
	t.Helper()
	return get(t, ctx, "read the question", chromedp.Evaluate[question](questionJS))
}

// clickLink clicks the link at col, row until its question opens in the
// page, and returns the question. A click can miss: xterm.js forgets the
// link under the pointer whenever it renders the link's rows again, as it
// does when the terminal gets the keyboard back from the previous
// question; a person clicks again. A native dialog instead fails the test.
func clickLink(t *testing.T, ctx context.Context, what string, col, row int, native <-chan string) question {
	t.Helper()
	for range 5 {
		if !clickCell(t, ctx, what, col, row) {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := chromedp.Run(wctx, chromedp.Poll[bool](`(() => { const d = document.getElementById('link-ask'); return !!d && d.open; })()`, chromedp.WithPollingInterval(10*time.Millisecond)))
		cancel()
		select {
		case msg := <-native:
			t.Fatalf("%s: the page asked in a native dialog, not in the page: %q", what, msg)
		default:
		}
		if err == nil {
			return readQuestion(t, ctx)
		}
	}
	t.Fatalf("%s: no question opened in the page after five clicks", what)
	return question{}
}

// waitAnswered waits until the question is closed and the terminal has the
// keyboard again.
func waitAnswered(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](`(() => { const d = document.getElementById('link-ask');
  return !d.open && !!document.activeElement && document.activeElement.closest('#term-host') !== null; })()`, chromedp.WithPollingInterval(10*time.Millisecond))); err != nil {
		t.Fatalf("%s: the question did not close, giving the terminal the keyboard back: %+v", what, readQuestion(t, ctx))
	}
}

// typeLine types s and Enter, and waits for the program to echo the line:
// the keyboard is the terminal's.
func typeLine(t *testing.T, ctx context.Context, what, s string) {
	t.Helper()
	for _, r := range s + "\r" {
		run(t, ctx, what, typeKey(r))
	}
	waitScreen(t, ctx, what, "got ["+s+"]")
}

// heldClick asks a question (ask, then check what it says) and clicks its
// Open button at once, as the second click of a double-click on the link
// does: the click must open nothing, and the question stays.
//
// Whether the click came within the hold is read in the page, not from the
// test's clock: a watcher (heldClickJS) notes when the question opened and
// sees every click that reaches Open. A click that reached Open within the
// hold (SETTLE_MS after the question opened) fails the test. A click that came later (a
// slow machine) proves nothing: the watcher stops it before Open's own
// handler, so it opens nothing, and the question is cancelled and asked
// again, a few times.
func heldClick(t *testing.T, ctx context.Context, ask func() question, check func(question)) {
	t.Helper()
	for range 3 {
		if !get(t, ctx, "watch the question's Open button", chromedp.Evaluate[bool](fmt.Sprintf(heldClickJS, surelyHeldMs))) {
			t.Fatal("the page has no question to watch")
		}
		check(ask())
		at := get(t, ctx, "where Open is", chromedp.Evaluate[[]float64](`(() => { const r = document.getElementById('link-ask-open').getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2]; })()`))
		run(t, ctx, "click Open at once", chromedp.MouseClickXY(at[0], at[1]))
		w := get(t, ctx, "what the watcher saw", chromedp.Evaluate[heldClickSeen](`(() => { const w = window.__heldClick; w.stop();
  return { opened: w.opened, down: w.down, clicked: w.clicked }; })()`))
		q := readQuestion(t, ctx)
		switch {
		case w.Opened == nil:
			t.Fatalf("the watcher never saw the question open: %+v", q)
		case w.Down != "link-ask-open":
			t.Fatalf("the click meant for Open went down on %q", w.Down)
		case w.Clicked != nil && *w.Clicked < surelyHeldMs:
			t.Fatalf("a click on Open %.0f ms after the question opened (within its %d ms hold) reached Open", *w.Clicked, settleMs)
		case w.Clicked != nil:
			// Too late to prove anything; the watcher kept it from Open.
			if !q.Open {
				t.Fatalf("a click the watcher stopped answered the question")
			}
			run(t, ctx, "too slow: cancel and ask again", chromedp.KeyEvent(kb.Escape))
			waitAnswered(t, ctx, "cancel a question clicked too late")
			continue
		case !q.Open:
			t.Fatalf("a click on Open in the question's first moment answered it")
		}
		return
	}
	t.Fatalf("could not click Open within the question's first %d ms three times", settleMs)
}

// heldClickSeen is what heldClickJS saw of one question.
type heldClickSeen struct {
	Opened  *float64 `json:"opened"`  // the page's clock when the question opened
	Down    string   `json:"down"`    // the id of what the pointer went down on
	Clicked *float64 `json:"clicked"` // ms after the opening that a click reached Open, if one did
}

// settleMs is the page's hold on the question's Open button (lib/settle.js
// SETTLE_MS). A click that reaches Open sooner than surelyHeldMs after the
// question opened was not held: the page's timer that ends the hold starts
// a moment before the watcher sees the question open, and never fires
// early.
const (
	settleMs     = 1000
	surelyHeldMs = settleMs - 100
)

// heldClickJS (a format: surelyHeldMs) installs window.__heldClick in the
// terminal page: when the question next opens, what the pointer next goes
// down on, and how long after the opening a click reached the Open button
// (the page's clock as the click is handled). A click that may have come
// after the hold is stopped there, so that a click the test made too late
// opens nothing. stop() removes it all.
const heldClickJS = `(() => {
  const d = document.getElementById('link-ask'), open = document.getElementById('link-ask-open');
  if (!d || !open || d.open) return false;
  const w = window.__heldClick = { opened: null, down: '', clicked: null };
  const seen = new MutationObserver(() => { if (d.open && w.opened === null) w.opened = performance.now(); });
  seen.observe(d, { attributes: true, attributeFilter: ['open'] });
  const down = (e) => { if (w.opened !== null && !w.down) w.down = (e.target && e.target.id) || '?'; };
  const click = (e) => {
    if (e.target !== open || w.opened === null) return;
    w.clicked = performance.now() - w.opened;
    if (w.clicked >= %d) { e.stopImmediatePropagation(); e.preventDefault(); }
  };
  addEventListener('pointerdown', down, true);
  addEventListener('click', click, true);
  w.stop = () => { seen.disconnect(); removeEventListener('pointerdown', down, true); removeEventListener('click', click, true); };
  return true;
})()`

// TestTerminalLinksSayWhereTheyLead: in real Chromium, a hyperlink a
// program writes opens only after a question, in the page (never a native
// dialog), that names the site the browser would reach, in its ASCII form,
// never as the program spelled it; a link that hides its site behind a user
// name is not opened, and the page says which site it really was. xterm.js's
// own question showed the program's spelling: "https://accounts.google.com@evil.example/"
// and a host in Cyrillic look-alike letters read as Google. Enter on the
// question and Escape open nothing, nor does a click on Open in the
// question's first moment; only the Open button opens the link, once, in
// a new tab without opener or referrer; after every answer the
// keys typed go to the program again.
func TestTerminalLinksSayWhereTheyLead(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	m := connectMachine(t, env, person, "laptop")
	site := startLanding(t)
	href := site.url + "/landed?from=terminal"
	id := m.start(80, 24, linkProgram(
		[2]string{"https://accounts.google.com@evil.example/login", "https://accounts.google.com/login"},
		[2]string{"https://\u0430ccounts.google.com/login", "https://accounts.google.com/login"},
		[2]string{href, "the docs"},
	)...)
	ctx := typingTerminal(t, env, "ada@example.com", id)
	native := nativeDialogs(t, ctx)
	waitScreen(t, ctx, "the program's screen", "READY")

	// A user name in front of the site: no question, nothing opened, and the
	// notice names the real site.
	if !clickCell(t, ctx, "click the link with a user name", 3, 0) {
		t.Fatal("xterm.js found no link under the pointer")
	}
	waitNotice(t, ctx, "the refused link", "evil.example is the real site", "not opened")
	if q := readQuestion(t, ctx); q.Open {
		t.Fatalf("a link with a user name in it was offered to open: %+v", q)
	}

	// Look-alike letters: the question names the site in its ASCII form, on
	// its own line, and has Cancel under the keyboard: Enter, pressed by
	// someone who has not read it, opens nothing.
	q := clickLink(t, ctx, "click the look-alike link", 3, 1, native)
	if !strings.HasPrefix(q.Site, "xn--ccounts-") || !strings.HasSuffix(q.Site, ".google.com") {
		t.Fatalf("the question does not show the look-alike site in its ASCII form: %+v", q)
	}
	if strings.Contains(q.Site+q.Address, "\u0430") || !strings.HasPrefix(q.Address, "https://xn--ccounts-") {
		t.Fatalf("the question shows the program's spelling: %+v", q)
	}
	if !strings.Contains(q.Title, "program in this terminal") || !strings.Contains(q.Warning, "can say anything") {
		t.Fatalf("the question does not say who chose the link: %+v", q)
	}
	if q.Focused != "link-ask-cancel" {
		t.Fatalf("the question has %q under the keyboard, want Cancel", q.Focused)
	}
	// One question at a time: a click on another link while it is open
	// changes nothing, and leaves Cancel with the keyboard.
	at := cellAt(t, ctx, "the docs link", 2, 2)
	run(t, ctx, "click another link under the question", chromedp.MouseClickXY(at[0], at[1]))
	if again := readQuestion(t, ctx); again.Site != q.Site || !again.Open || again.Focused != "link-ask-cancel" {
		t.Fatalf("a second click changed the question, or took the keyboard from Cancel: %+v, was %+v", again, q)
	}
	run(t, ctx, "Enter on the question", typeKey('\r'))
	waitAnswered(t, ctx, "Enter on the question")
	typeLine(t, ctx, "typing after Enter cancelled", "after-enter")

	// An honest link: the question says exactly where. Its Open button
	// takes no click in the question's first moment (the program chose
	// where its link is: under Open, the second click of a double-click
	// would land there). Escape cancels.
	heldClick(t, ctx, func() question { return clickLink(t, ctx, "click the docs link", 2, 2, native) }, func(q question) {
		if q.Site != strings.TrimPrefix(site.url, "http://") || q.Address != href {
			t.Fatalf("the question = %+v, want site %s and address %s", q, strings.TrimPrefix(site.url, "http://"), href)
		}
	})
	run(t, ctx, "Escape on the question", chromedp.KeyEvent(kb.Escape))
	waitAnswered(t, ctx, "Escape on the question")
	typeLine(t, ctx, "typing after Escape", "after-escape")

	// Cancel clicked: nothing opens.
	clickLink(t, ctx, "click the docs link again", 2, 2, native)
	run(t, ctx, "Cancel", chromedp.Click(chromedp.ID("link-ask-cancel")))
	waitAnswered(t, ctx, "Cancel")
	typeLine(t, ctx, "typing after Cancel", "after-cancel")

	// Open clicked: the link opens once, in a new tab with no opener or
	// referrer (a tab Escape or Cancel had opened would be counted here too).
	clickLink(t, ctx, "click the docs link to open it", 2, 2, native)
	run(t, ctx, "Open", chromedp.WaitEnabled(chromedp.ID("link-ask-open")), chromedp.Click(chromedp.ID("link-ask-open")))
	site.landedOnce(t, ctx, href)
	waitAnswered(t, ctx, "Open")
	typeLine(t, ctx, "typing after Open", "after-open")
}
