package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/server/servertest"
)

// TestPopupApprovalFirst opens the real popup.html (the extension's strip over
// the framed app, 440×600) while an agent's write waits, and checks what issue
// 19 asks of it: the app's header is one compact row, the request comes first
// as a card whose answer buttons lie inside the popup's 600 px; the card reads
// as the site's tool (its description, the argument as a labelled field, the
// agent's token by name, a live countdown); one key answers (Y, A, N, shown
// on the buttons); and after an answer the inbox says what it did: the
// tool's result, the page's error, or that the agent was told no.
func TestPopupApprovalFirst(t *testing.T) {
	w := newWorld(t)
	b := w.b
	index := w.site + "/"
	siteTab := b.Tab(t, index)
	d := waitDocument(t, b, w.worker, index, "search", "addItem", "goTo", "slow")
	w.shareFromPopup(d.TabID, "search", "addItem", "goTo", "slow")

	popup := b.Tab(t, fmt.Sprintf("chrome-extension://%s/popup/popup.html?tab=%d", ExtensionID, d.TabID))
	run(t, popup, "the popup at its size", viewport(440, 600, "light"), chromedp.WaitVisible(chromedp.ID("app")))
	frame := b.appFrameOf(t, popup, w.live.env.URL, "/")
	run(t, frame, "the inbox in the frame", chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)))

	ask := func(text string) <-chan asyncCall {
		t.Helper()
		ch, cancel := w.callAsync(w.agent, "addItem", map[string]any{"text": text}, true)
		t.Cleanup(cancel)
		run(t, frame, "the request arrives live", chromedp.WaitVisible(chromedp.CSS(`#inbox .request`)))
		return ch
	}
	answerByKey := func(key rune) {
		t.Helper()
		run(t, popup, "focus the app's frame", chromedp.Click(chromedp.ID("app")))
		// A card's keys count a moment after the window gains focus and the card appears
		// (keyjacking); the card says when.
		run(t, frame, "answer with a key", chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement.blur()`),
			chromedp.WaitVisible(chromedp.CSS(`#inbox .request[data-keys="ready"]`)), typeKey(key))
	}

	ch := ask("tea")
	// The answers lie inside the real popup: the frame's top in popup.html
	// plus the lowest answer button's bottom inside the frame.
	frameTop := get(t, popup, "the frame's top", chromedp.Evaluate[float64](`document.getElementById('app').getBoundingClientRect().top`))
	lowest := get(t, frame, "the answer buttons", chromedp.Evaluate[float64](
		`Math.max(...[...document.querySelectorAll('#inbox .request .answer button')].map(b => b.getBoundingClientRect().bottom))`))
	if frameTop+lowest > 600 {
		t.Errorf("the answer buttons end %.0f px down the popup (frame at %.0f px), below its 600 px", frameTop+lowest, frameTop)
	}
	header := get(t, frame, "the framed header", chromedp.Evaluate[float64](
		`document.documentElement.classList.contains('framed') ? document.querySelector('header.top').getBoundingClientRect().height : -1`))
	if header < 0 || header > 48 {
		t.Errorf("framed, the app's header is %.0f px tall (or not compact), want one row of at most 48", header)
	}
	card := get(t, frame, "the card", chromedp.Evaluate[string](`document.querySelector('#inbox .request').innerText`))
	for _, want := range []string{"addItem", "Adds an item to the page's list.", "Asked by token “laptop”", "text", "tea", "Buy tea", "Raw JSON"} {
		if !strings.Contains(card, want) {
			t.Errorf("the card lacks %q:\n%s", want, card)
		}
	}
	run(t, frame, "the countdown runs", chromedp.Poll[chromedp.Void](`/^expires in [0-9]+:[0-5][0-9]$/.test(document.querySelector('#inbox .countdown').textContent)`))
	keys := get(t, frame, "the keys on the buttons", chromedp.Evaluate[string](
		`[...document.querySelectorAll('#inbox .request .answer button')].map(b => b.getAttribute('aria-keyshortcuts') + ':' + b.querySelector('kbd').textContent).join(' ')`))
	if keys != "Y:Y A:A N:N" {
		t.Errorf("keys on the buttons %q, want Y, A and N", keys)
	}

	answerByKey('y')
	if res := w.await(ch); res.IsError {
		t.Fatalf("allowed once by key, the call failed: %s", servertest.ResultText(res))
	}
	outcome := func(want string) {
		t.Helper()
		run(t, frame, "the answered card says what happened", chromedp.Poll[chromedp.Void](
			fmt.Sprintf(`(() => { const o = document.querySelector('#answered .outcome'); return !!o && o.textContent.startsWith(%q); })()`, want)))
	}
	outcome(`Allowed once — addItem returned {"items":["tea"]}`)

	ch = ask("fail")
	answerByKey('y')
	if res := w.await(ch); !res.IsError {
		t.Fatalf("the page refused, but the agent read %s", servertest.ResultText(res))
	}
	outcome(`Allowed once — Failed: `)
	if o := get(t, frame, "the error", chromedp.Evaluate[string](`document.querySelector('#answered .outcome').textContent`)); !regexp.MustCompile(`refuses to add "fail"`).MatchString(o) {
		t.Errorf("the failed call's card reads %q, want the page's error", o)
	}

	ch = ask("coffee")
	answerByKey('n')
	if res := w.await(ch); !res.IsError || !strings.Contains(servertest.ResultText(res), "denied") {
		t.Fatalf("denied by key, the agent read %s", servertest.ResultText(res))
	}
	outcome("Denied — the agent was told no")
	layoutRules(t, frame, "the inbox framed in the popup", 440)

	// Another page of the shared site: the strip counts that page's tools,
	// not the site's; back on the first page it counts its four again.
	for _, c := range []struct{ url, count, n string }{
		{w.site + "/away.html", "No WebMCP tools on this page", "0"},
		{index + "?again", "4 tools", "4"},
	} {
		run(t, siteTab, "to "+c.url, chromedp.Navigate(c.url))
		if c.n != "0" {
			waitDocument(t, b, w.worker, c.url, "search", "addItem", "goTo", "slow")
		}
		run(t, popup, "the strip on "+c.url, chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="shared"] #unshare`)),
			chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.getElementById('tool-count').textContent === %q && document.getElementById('tool-count').dataset.count === %q`, c.count, c.n)))
	}
}

// appFrameOf is appFrame for the frame of one popup tab: several popups
// may be open, each framing the app at the same address.
func (b *ExtensionBrowser) appFrameOf(t testing.TB, popup context.Context, server, path string) context.Context {
	t.Helper()
	return b.frameIn(t, chromedp.FromContext(popup).Target.TargetID, server, path)
}
