package e2e

import (
	"context"
	"github.com/chromedp/cdproto/target"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// appFrame attaches to the web app framed in the extension's popup: a
// frame of another site than its chrome-extension:// parent, so Chromium
// runs it as a target of its own. It waits for the frame to show path.
func (b *ExtensionBrowser) appFrame(t testing.TB, server, path string) context.Context {
	t.Helper()
	return b.frameIn(t, "", server, path)
}

// frameIn attaches to the first frame target showing server+path whose
// parent is parent (any parent when parent is empty).
func (b *ExtensionBrowser) frameIn(t testing.TB, parent target.ID, server, path string) context.Context {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(25 * time.Millisecond) // polling the browser's target list: there is no event to wait on here
	defer tick.Stop()
	for {
		infos, err := chromedp.Targets(b.ctx)
		if err != nil {
			t.Fatalf("list targets: %v", err)
		}
		for _, info := range infos {
			if info.Type == "iframe" && (parent == "" || info.ParentID == parent) && strings.HasPrefix(info.URL, server+path) {
				return b.attach(t, info)
			}
		}
		if time.Now().After(deadline) {
			var seen []string
			for _, info := range infos {
				seen = append(seen, info.Type+" "+info.URL)
			}
			t.Fatalf("no frame of %s%s in popup %q; targets: %v", server, path, parent, seen)
		}
		<-tick.C
	}
}

// typeKey presses a printable key as a keyboard does: one keyDown that
// carries its text, so Chromium makes the keypress and input events only if
// the page lets the keydown through. (chromedp.KeyEvent sends the character
// as a separate "char" event, which arrives even when the page's keydown
// handler consumed the key: in a cross-site frame xterm.js then types the
// key twice, once from keydown and once from the input event.)
func typeKey(r rune) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		k := kb.Keys[r]
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: k.Key, Code: k.Code, Text: k.Text,
			UnmodifiedText: k.Unmodified, WindowsVirtualKeyCode: k.Windows, NativeVirtualKeyCode: k.Native}
		if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, down); err != nil {
			return err
		}
		up := down
		up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, up)
		return err
	})
}

// TestTerminalInThePopup opens a live terminal as a person does: the
// extension's popup frames the web app, and in that frame the person goes to
// Machines and opens the session. Framed, the page cannot read its cookies,
// yet it gets its viewer ticket (its CSRF token is in the page), shows the
// program and types into it. Signing out elsewhere ends the sign-in: the
// framed terminal stops at once and says so, instead of retrying.
func TestTerminalInThePopup(t *testing.T) {
	env, b, app, person := ownerInExtensionBrowser(t)
	m := connectMachine(t, env, person, "laptop")
	id := m.start(80, 24, testProg(t), "keys")

	popup, frame := openPopup(t, b, env)
	run(t, frame, "to the machine's session, in the frame",
		chromedp.WaitVisible(chromedp.ID("nav-machines")),
		chromedp.Click(chromedp.ID("nav-machines")),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/sessions/`+id+`"]`)),
	)
	cookies := get(t, frame, "cookies", chromedp.Evaluate[string](`document.cookie`))
	run(t, frame, "open the terminal", chromedp.Click(chromedp.CSS(`a[href="/sessions/`+id+`"]`)))
	frame = b.appFrame(t, env.URL, "/sessions/"+id)
	ctx, cancel := context.WithTimeout(frame, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"]`))); err != nil {
		t.Fatalf("the terminal in the popup never went live (the frame reads cookies %q): %v%s", cookies, err, pageState(frame))
	}
	waitScreen(t, frame, "the program's screen in the popup", "KEYS READY")

	// The person clicks into the frame and types; the keys reach the program.
	run(t, popup, "focus the app's frame", chromedp.Click(chromedp.ID("app")))
	run(t, frame, "focus the terminal", chromedp.Evaluate[chromedp.Void](`window.__term.focus()`))
	run(t, frame, "type", typeKey('a'))
	waitScreen(t, frame, "a letter typed in the popup", "got 61\n")
	run(t, frame, "an arrow", chromedp.KeyEvent(kb.ArrowUp))
	waitScreen(t, frame, "an arrow typed in the popup", "got 1b5b41")

	// A refusal that retrying will not fix is shown, not retried: here the
	// page's CSRF token is spoiled, and switching to watch-only asks for a
	// new ticket (what a framed page reading its cookie got every time).
	run(t, frame, "spoil the page's token, then ask for a ticket",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('meta[name="csrf-token"]').content = 'spoiled'`),
		chromedp.Click(chromedp.ID("mode-watch")),
		chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="refused"]`)))
	if s := get(t, frame, "state", chromedp.Text(chromedp.ID("term-state"))); !strings.HasPrefix(s, "Cannot connect: Missing or wrong CSRF token") {
		t.Fatalf("state %q", s)
	}
	run(t, frame, "reload the terminal",
		chromedp.Evaluate[chromedp.Void](`localStorage.removeItem('tabbridge.watchOnly'); location.reload()`))
	frame = b.appFrame(t, env.URL, "/sessions/"+id)
	run(t, frame, "live again", chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"][data-mode="type"]`)))

	// Signing out (here: the person's sign-in in the browser, from its tab)
	// ends the viewer the popup opened with that sign-in, and the page says
	// so rather than retrying.
	run(t, app, "sign out in the tab", chromedp.Navigate(env.URL+"/workspaces"),
		chromedp.Click(chromedp.ID("user-menu-button")), chromedp.Click(chromedp.ID("sign-out")),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/signin"]`)))
	ctx2, cancel2 := context.WithTimeout(frame, 20*time.Second)
	defer cancel2()
	if _, err := chromedp.Run(ctx2, chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="signedout"]`))); err != nil {
		t.Fatalf("after signing out the terminal in the popup does not say so: %v%s", err, pageState(frame))
	}
	if s := get(t, frame, "state", chromedp.Text(chromedp.ID("term-state"))); !strings.HasPrefix(s, "Signed out") {
		t.Fatalf("state %q", s)
	}
}

// TestTerminalLinkFromThePopup: a hyperlink in a terminal the extension's
// popup frames opens as it does in a tab. The question is asked inside the
// frame (a native dialog from a cross-site frame in an extension's popup
// reads "An embedded page at … says", may close the popup, and some Chrome
// versions do not show it at all); Open opens the link once, in a new tab
// without opener or referrer.
func TestTerminalLinkFromThePopup(t *testing.T) {
	env, b, _, person := ownerInExtensionBrowser(t)
	m := connectMachine(t, env, person, "laptop")
	site := startLanding(t)
	href := site.url + "/landed?from=popup"
	id := m.start(80, 24, linkProgram([2]string{href, "the docs"})...)

	popup, frame := openPopup(t, b, env)
	nativeDialogs(t, popup)
	run(t, frame, "open the terminal in the frame",
		chromedp.Evaluate[chromedp.Void](`localStorage.removeItem('tabbridge.watchOnly'); location.assign('/sessions/`+id+`')`))
	frame = b.appFrame(t, env.URL, "/sessions/"+id)
	native := nativeDialogs(t, frame)
	run(t, frame, "live", chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"][data-mode="type"]`)))
	waitScreen(t, frame, "the program's screen in the popup", "READY")

	q := clickLink(t, frame, "click the link in the popup", 2, 0, native)
	if q.Site != strings.TrimPrefix(site.url, "http://") || q.Address != href || q.Focused != "link-ask-cancel" {
		t.Fatalf("the question in the popup = %+v, want site %s, address %s and Cancel under the keyboard", q, strings.TrimPrefix(site.url, "http://"), href)
	}
	run(t, frame, "Open", chromedp.WaitEnabled(chromedp.ID("link-ask-open")), chromedp.Click(chromedp.ID("link-ask-open")))
	site.landedOnce(t, b.ctx, href)
	waitAnswered(t, frame, "Open in the popup")
}
