package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// extensionShots are the extension's own pages in docs/screenshots/: written by
// TestScreenshotsExtension, listed by TestScreenshots' index.
var extensionShots = []struct{ name, caption string }{
	{"extension-options-welcome", "The extension's welcome page on install: it asks for the server's address"},
	{"extension-options", "The extension's options: signed in, server reachable, a test button and a link to the app"},
	{"extension-popup-blank", "The popup on a new tab: no site, in words, and the detection switch"},
	{"extension-popup-site", "The popup on a site: its tools by name before Share, over the app's compact header"},
	{"extension-popup-request", "The popup with a request waiting: the card first, its answers (keys Y, A, N) inside the 600 px"},
	{"extension-popup-answered", "The popup after an answer: the card says what the call did"},
}

var popupVariants = []variant{{440, 600, "light"}, {440, 600, "dark"}}

// TestScreenshotsExtension renders the extension's popup strip and options page
// (real Chromium, the real extension, a live server), light and dark, and
// checks what issue 19 asks of them: install opens a welcome page that asks for
// the address; the options say who is signed in and that the server answers;
// on a blank tab the strip never reads "No site · 0 tools"; on a site it names
// the tools before Share; the detection switch is always there; nothing scrolls
// sideways. With -screenshots it writes the PNGs.
func TestScreenshotsExtension(t *testing.T) {
	write := *writeScreenshots || os.Getenv("TABBRIDGE_SCREENSHOTS") == "1"
	w := newWorld(t)
	b := w.b
	// Install opened the welcome page by itself, before anything was set.
	b.waitJS(t, w.worker, 20*time.Second, `chrome.tabs.query({}).then(ts => ts.some(t => (t.pendingUrl || t.url || '').endsWith('options/options.html?welcome=1')))`, nil)
	save := func(ctx context.Context, name string, v variant) {
		t.Helper()
		png := get(t, ctx, "capture "+name, chromedp.FullScreenshot(100))
		if write {
			if err := os.WriteFile(filepath.Join(screenshotDir, name+"-"+v.suffix()+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The welcome page as on install: no address saved yet, so none is shown as if chosen.
	b.eval(t, w.worker, `chrome.storage.local.remove('server').then(() => true)`, nil)
	opts := b.Tab(t, fmt.Sprintf("chrome-extension://%s/options/options.html?welcome=1", ExtensionID))
	for _, v := range variants {
		run(t, opts, "welcome "+v.suffix(), viewport(v.w, v.h, v.scheme), chromedp.Reload(),
			chromedp.WaitVisible(chromedp.ID("welcome")),
			chromedp.Poll[chromedp.Void](`document.getElementById('server-status').dataset.state === 'unset'`))
		if addr := get(t, opts, "the address field", chromedp.Evaluate[string](`document.getElementById('server').value`)); addr != "" {
			t.Errorf("the welcome page shows the address %q before the person typed one", addr)
		}
		layoutRules(t, opts, "welcome", v.w)
		save(opts, "extension-options-welcome", v)
	}
	b.eval(t, w.worker, fmt.Sprintf(`chrome.storage.local.set({server: %q}).then(() => true)`, w.live.env.URL), nil)
	run(t, opts, "test the saved server", chromedp.Click(chromedp.ID("test")),
		chromedp.Poll[chromedp.Void](`document.getElementById('server-status').dataset.state === 'signed-in'`))
	var status string
	b.eval(t, opts, `document.getElementById('server-status').textContent`, &status)
	if status != "Signed in as Alice (alice@example.com) · server reachable" {
		t.Errorf("options status %q", status)
	}
	var appLink string
	b.eval(t, opts, `document.getElementById('open-app').href`, &appLink)
	if appLink != w.live.env.URL+"/" {
		t.Errorf("options link to the app %q, want %q", appLink, w.live.env.URL+"/")
	}
	w.live.stop()
	run(t, opts, "test with the server down", chromedp.Click(chromedp.ID("test")),
		chromedp.Poll[chromedp.Void](`document.getElementById('server-status').dataset.state === 'unreachable'`))
	w.live.restart()
	plain := b.Tab(t, fmt.Sprintf("chrome-extension://%s/options/options.html", ExtensionID))
	for _, v := range variants {
		run(t, plain, "options "+v.suffix(), viewport(v.w, v.h, v.scheme), chromedp.Reload(),
			chromedp.Poll[chromedp.Void](`document.getElementById('server-status').dataset.state === 'signed-in'`))
		if hidden := get(t, plain, "welcome hidden", chromedp.Evaluate[bool](`document.getElementById('welcome').hidden`)); !hidden {
			t.Error("with a server saved, the options page still greets as on install")
		}
		layoutRules(t, plain, "options", v.w)
		save(plain, "extension-options", v)
	}

	b.Tab(t, "about:blank")
	var blankID int64
	b.waitJS(t, w.worker, 10*time.Second, `chrome.tabs.query({url: 'about:blank'}).then(ts => ts.length > 0 && ts[0].id)`, &blankID)
	site := w.site + "/"
	b.Tab(t, site)
	d := waitDocument(t, b, w.worker, site, "search", "addItem", "goTo", "slow")
	for _, c := range []struct {
		name string
		tab  int64
	}{{"extension-popup-blank", blankID}, {"extension-popup-site", int64(d.TabID)}} {
		popup := b.Tab(t, fmt.Sprintf("chrome-extension://%s/popup/popup.html?tab=%d", ExtensionID, c.tab))
		for _, v := range popupVariants {
			run(t, popup, c.name+" "+v.suffix(), viewport(v.w, v.h, v.scheme), chromedp.Reload(),
				chromedp.WaitVisible(chromedp.ID("app")), chromedp.WaitVisible(chromedp.ID("detection")))
			if c.name == "extension-popup-site" {
				run(t, popup, "see the tools", chromedp.Poll[chromedp.Void](`document.getElementById('tool-names').textContent === 'search, addItem, goTo, slow'`),
					chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="unshared"] #share`)))
			}
			layoutRules(t, popup, c.name, v.w)
			save(popup, c.name, v)
		}
		var strip string
		b.eval(t, popup, `document.getElementById('strip').innerText`, &strip)
		if c.name == "extension-popup-blank" && (strings.Contains(strip, "0 tools") || strings.Contains(strip, "No site") || !strings.Contains(strip, "New tab")) {
			t.Errorf("blank tab strip reads %q", strip)
		}
	}
	popupRequestShots(t, w, d.TabID, save)
}

// popupRequestShots shares the site, has the agent ask to write, and renders
// the real popup.html with the request waiting: the answer buttons must lie
// inside its first 600 px (the frame's top in the popup plus the buttons'
// bottom in the frame). Then it answers and renders what the card says.
func popupRequestShots(t *testing.T, w *world, tabID int, save func(context.Context, string, variant)) {
	w.agent = w.live.env.MCP(t, w.token, nil) // the server was restarted since: a new MCP session
	w.shareFromPopup(tabID, "search", "addItem", "goTo", "slow")
	popup := w.b.Tab(t, fmt.Sprintf("chrome-extension://%s/popup/popup.html?tab=%d", ExtensionID, tabID))
	run(t, popup, "the popup", viewport(440, 600, "light"), chromedp.WaitVisible(chromedp.ID("app")))
	frame := w.b.appFrameOf(t, popup, w.live.env.URL, "/")
	run(t, frame, "the inbox live", chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)))
	ch, cancel := w.callAsync(w.agent, "addItem", map[string]any{"text": "Earl Grey, loose leaf, 250 g"}, true)
	defer cancel()
	run(t, frame, "the request, its answers counting", answersCount())
	for _, v := range popupVariants {
		run(t, popup, "popup "+v.suffix(), viewport(v.w, v.h, v.scheme))
		run(t, frame, "frame "+v.suffix(), colorScheme(v.scheme), chromedp.WaitVisible(chromedp.CSS(`#inbox .request .answer button`)))
		top := get(t, popup, "the frame's top", chromedp.Evaluate[float64](`document.getElementById('app').getBoundingClientRect().top`))
		bottom := get(t, frame, "the answers' bottom", chromedp.Evaluate[float64](
			`Math.max(...[...document.querySelectorAll('#inbox .request .answer button')].map(b => b.getBoundingClientRect().bottom))`))
		if top+bottom > 600 {
			t.Errorf("%s: the answer buttons end %.0f px down the real popup, below its 600 px", v.suffix(), top+bottom)
		}
		layoutRules(t, frame, "the inbox in the popup", 440)
		save(popup, "extension-popup-request", v)
	}
	run(t, frame, "allow once", chromedp.Click(chromedp.CSS(`#inbox .request button[data-key="y"]`)))
	if res := w.await(ch); res.IsError {
		t.Fatalf("allowed, the call failed: %v", res)
	}
	run(t, frame, "what it did", chromedp.Poll[chromedp.Void](`(() => { const o = document.querySelector('#answered .outcome'); return !!o && o.textContent.includes('returned'); })()`))
	for _, v := range popupVariants {
		run(t, popup, "popup "+v.suffix(), viewport(v.w, v.h, v.scheme))
		run(t, frame, "frame "+v.suffix(), colorScheme(v.scheme))
		save(popup, "extension-popup-answered", v)
	}
}
