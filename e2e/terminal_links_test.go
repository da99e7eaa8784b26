package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// linkProgram prints one hyperlink (OSC 8) per pair of uri and text, each
// on its own row from the top, then READY, and waits.
func linkProgram(links ...[2]string) []string {
	script := `printf '\033[H\033[2J'; while [ $# -gt 0 ]; do printf '\033]8;;%s\033\\%s\033]8;;\033\\\r\n' "$1" "$2"; shift 2; done; printf 'READ''Y\r\n'; exec sleep 600`
	argv := []string{"sh", "-c", script, "sh"}
	for _, l := range links {
		argv = append(argv, l[0], l[1])
	}
	return argv
}

// clickCell moves the mouse over the cell at col, row of the terminal's
// screen and clicks it, as a person clicks a link there. It reports
// whether xterm.js found a link under the pointer before the click.
func clickCell(t *testing.T, ctx context.Context, what string, col, row int) bool {
	t.Helper()
	at := get(t, ctx, what+": where", chromedp.Evaluate[[]float64](fmt.Sprintf(`(() => {
  const r = document.querySelector('#term-host .xterm-screen').getBoundingClientRect();
  const c = window.__term._core._renderService.dimensions.css.cell;
  return [r.left + c.width * (%d + 0.5), r.top + c.height * (%d + 0.5)]; })()`, col, row)))
	run(t, ctx, what+": point at it", chromedp.MouseEvent(chromedp.MouseMoved, 1, 1), chromedp.MouseEvent(chromedp.MouseMoved, at[0], at[1]))
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

// clickLink clicks the link at col, row until its question comes, and
// returns the question. A click can miss: xterm.js forgets the link under
// the pointer whenever it renders the link's rows again, as it does when
// the page gets its focus back from the previous question; a person
// clicks again.
func clickLink(t *testing.T, ctx context.Context, what string, col, row int, dialogs <-chan string) string {
	t.Helper()
	for range 5 {
		if !clickCell(t, ctx, what, col, row) {
			continue
		}
		select {
		case msg := <-dialogs:
			return msg
		case <-time.After(2 * time.Second):
		}
	}
	t.Fatalf("%s: no question came after five clicks", what)
	return ""
}

// TestTerminalLinksSayWhereTheyLead: in real Chromium, a hyperlink a
// program writes opens only after a question that names the site the
// browser would reach, in its ASCII form, never as the program spelled it;
// a link that hides its site behind a user name is not opened, and the
// page says which site it really was. xterm.js's own question showed the
// program's spelling: "https://accounts.google.com@evil.example/" and a
// host in Cyrillic look-alike letters read as Google.
func TestTerminalLinksSayWhereTheyLead(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	m := connectMachine(t, env, person, "laptop")
	id := m.start(80, 24, linkProgram(
		[2]string{"https://accounts.google.com@evil.example/login", "https://accounts.google.com/login"},
		[2]string{"https://\u0430ccounts.google.com/login", "https://accounts.google.com/login"},
		[2]string{"https://example.com/docs", "the docs"},
	)...)
	ctx := startBrowser(t)
	signIn(t, ctx, env, "ada@example.com")

	dialogs := make(chan string, 4)
	answers := make(chan bool, 4)
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs <- e.Message
			accept := false // a question the test did not expect is declined
			select {
			case accept = <-answers:
			default:
			}
			go func() {
				if err := chromedp.Do(ctx, chromedp.Func(func(c context.Context, tg *chromedp.Target) error {
					_, err := cdp.Call(c, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept})
					return err
				})); err != nil {
					t.Errorf("answering the question: %v", err)
				}
			}()
		}
	}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open the terminal", chromedp.Navigate(env.URL+"/sessions/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"][data-mode="type"]`)))
	waitScreen(t, ctx, "the program's screen", "READY")
	// What the page asks the browser to open, without opening it.
	run(t, ctx, "watch window.open", chromedp.Evaluate[chromedp.Void](`window.__opened = []; window.open = function (u, n, f) { window.__opened.push([String(u), String(n), String(f)]); return null; }`))
	opened := func() string {
		return get(t, ctx, "what was opened", chromedp.Evaluate[string](`JSON.stringify(window.__opened)`))
	}

	// A user name in front of the site: no question, nothing opened, and the
	// notice names the real site.
	// (A question is answered before the click ends: it blocks the click's
	// handler.)
	if !clickCell(t, ctx, "click the link with a user name", 3, 0) {
		t.Fatal("xterm.js found no link under the pointer")
	}
	select {
	case msg := <-dialogs:
		t.Fatalf("a link with a user name in it was offered to open: %q", msg)
	default:
	}
	waitNotice(t, ctx, "the refused link", "evil.example is the real site", "not opened")
	if got := opened(); got != "[]" {
		t.Fatalf("a link with a user name in it was opened: %s", got)
	}

	// Look-alike letters: the question names the site in its ASCII form;
	// declined, nothing opens.
	answers <- false
	msg := clickLink(t, ctx, "click the look-alike link", 3, 1, dialogs)
	if !strings.Contains(msg, "Site: xn--ccounts-") || strings.Contains(msg, "\u0430") {
		t.Fatalf("the question does not show the look-alike site in its ASCII form: %q", msg)
	}
	if got := opened(); got != "[]" {
		t.Fatalf("a declined link was opened: %s", got)
	}

	// An honest link, accepted: opened in a new tab with no opener or referrer.
	answers <- true
	msg = clickLink(t, ctx, "click the docs link", 2, 2, dialogs)
	if !strings.Contains(msg, "Site: example.com\n") || !strings.Contains(msg, "https://example.com/docs") {
		t.Fatalf("the question = %q", msg)
	}
	get(t, ctx, "the link opens", chromedp.Poll[bool](`window.__opened.length > 0`, chromedp.WithPollingInterval(20*time.Millisecond)))
	if got := opened(); got != `[["https://example.com/docs","_blank","noopener,noreferrer"]]` {
		t.Fatalf("opened %s, want the link in a new tab without opener or referrer", got)
	}
}
