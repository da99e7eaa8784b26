package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// ExtensionID is the id Chrome gives the unpacked extension: the manifest's "key" fixes it (see
// extension/README.md for how it was derived). The server must trust this origin.
const ExtensionID = "lknealedcnkkiahlealamioaolnbckeb"

// ExtensionBrowser is a headless Chromium with the real unpacked extension loaded (the tests'
// build of it, testExtension: its worker under the tests' hook).
type ExtensionBrowser struct {
	ctx context.Context // the browser's first tab
}

// startExtensionBrowser starts Chromium with the tests' build of extension/ loaded.
func startExtensionBrowser(t testing.TB, o ChromiumOptions) *ExtensionBrowser {
	t.Helper()
	o.Extension = testExtension(t)
	return &ExtensionBrowser{ctx: startChromium(t, o)}
}

// Tab opens a new tab at url and waits for it to load; it is closed when the test ends.
func (b *ExtensionBrowser) Tab(t testing.TB, url string) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return ctx
}

// Worker attaches to the extension's service worker once its module has run and the tests' hook
// is in place (Chrome reports the target, and even answers evaluations, before the worker's scope
// is set up).
func (b *ExtensionBrowser) Worker(t testing.TB) context.Context {
	t.Helper()
	want := fmt.Sprintf("chrome-extension://%s/%s", ExtensionID, hookWorker)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if ctx := b.findWorker(t, want); ctx != nil {
			var ok bool
			if evalJS(ctx, `typeof setTimeout === 'function' && typeof self.__tabbridgeTest === 'object'`, &ok) == nil && ok {
				return ctx
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the extension's service worker %s never started", want)
		}
	}
}

// findWorker attaches to the worker target at url, or returns nil when there is none yet.
func (b *ExtensionBrowser) findWorker(t testing.TB, url string) context.Context {
	infos, err := chromedp.Targets(b.ctx)
	if err != nil {
		t.Fatalf("list targets: %v", err)
	}
	for _, info := range infos {
		if info.Type == "service_worker" && info.URL == url {
			return b.attach(t, info)
		}
	}
	return nil
}

func (b *ExtensionBrowser) attach(t testing.TB, info *target.Info) context.Context {
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithTargetID(info.TargetID))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("attach to the service worker: %v", err)
	}
	return ctx
}

// eval evaluates a JavaScript expression in ctx's target, awaiting a promise, and decodes its
// JSON value into out (when out is not nil).
func (b *ExtensionBrowser) eval(t testing.TB, ctx context.Context, expr string, out any) {
	t.Helper()
	if err := evalJS(ctx, expr, out); err != nil {
		t.Fatalf("evaluate %s: %v", clip(expr), err)
	}
}

func evalJS(ctx context.Context, expr string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		return err
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// waitJS waits, within timeout, until expr (which may be a promise) is truthy in ctx's target and
// decodes that value into out. The waiting happens in the browser, between its own events.
func (b *ExtensionBrowser) waitJS(t testing.TB, ctx context.Context, timeout time.Duration, expr string, out any) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	loop := fmt.Sprintf(`(async () => { for (;;) { const v = await (async () => (%s))(); if (v) return v; await new Promise(r => setTimeout(r, 25)); } })()`, expr)
	if err := evalJS(wctx, loop, out); err != nil {
		t.Fatalf("waiting for %s: %v", clip(expr), err)
	}
}

// GrantAllURLs grants the extension's optional "<all_urls>" host permission the way a test can
// in headless Chromium (which cannot answer a permission prompt): through
// chrome.developerPrivate on chrome://extensions. The extension's own permissions.request then
// resolves true without a prompt.
func (b *ExtensionBrowser) GrantAllURLs(t testing.TB) {
	t.Helper()
	b.GrantHost(t, "<all_urls>")
}

// GrantHost lets the extension's next permissions.request for one host pattern (e.g.
// "http://127.0.0.1:8080/*") resolve without a prompt. Unlike "<all_urls>", a single host does
// not show in chrome.permissions.getAll() until the extension's own request (in a click) asks
// for it.
func (b *ExtensionBrowser) GrantHost(t testing.TB, pattern string) {
	t.Helper()
	ctx := b.Tab(t, "chrome://extensions")
	b.eval(t, ctx, fmt.Sprintf(`new Promise((resolve, reject) => {
		const p = chrome.developerPrivate.addHostPermission(%q, %q, () => resolve(true));
		if (p && p.then) p.then(() => resolve(true), reject);
	})`, ExtensionID, pattern), nil)
}

// EnableDetection turns detection on as a person would: grant, then click the switch on the
// options page, whose real permissions.request resolves. It waits until the page shows it on.
func (b *ExtensionBrowser) EnableDetection(t testing.TB) {
	t.Helper()
	b.GrantAllURLs(t)
	ctx := b.Tab(t, fmt.Sprintf("chrome-extension://%s/options/options.html", ExtensionID))
	// The switch is visible before the page's module has wired it: click once it shows its state.
	b.waitJS(t, ctx, 10*time.Second, `document.getElementById('detection').dataset.state === 'off'`, nil)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("detection"))); err != nil {
		t.Fatalf("click the detection switch: %v", err)
	}
	// The switch shows on, or its note says why not (a refused permission, the worker's error).
	var got struct{ State, Note string }
	b.waitJS(t, ctx, 10*time.Second, `(() => {
		const state = document.getElementById('detection').dataset.state, note = document.getElementById('detection-note').textContent;
		return (state === 'on' || note !== '') && { state, note };
	})()`, &got)
	if got.State != "on" {
		t.Fatalf("detection did not turn on: %q", got.Note)
	}
}

// SetServer saves the server address on the options page as a person does: the host permission
// is granted first (see GrantHost), then Save asks for it and stores the address.
func (b *ExtensionBrowser) SetServer(t testing.TB, server string) {
	t.Helper()
	b.GrantHost(t, server+"/*")
	ctx := b.Tab(t, fmt.Sprintf("chrome-extension://%s/options/options.html", ExtensionID))
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.ID("server")),
		chromedp.SetValue(chromedp.ID("server"), server),
		chromedp.Click(chromedp.ID("save")),
	); err != nil {
		t.Fatalf("save the server address: %v", err)
	}
	b.waitJS(t, ctx, 10*time.Second, `document.getElementById('server-note').textContent.startsWith('Saved.')`, nil)
}

// serveTestSite serves e2e/testsite on a loopback port and returns its origin.
func serveTestSite(t testing.TB) string {
	t.Helper()
	return serveDir(t, repoPath(t, "e2e/testsite"))
}

// serveDir serves the files of dir on a loopback port of its own until the test ends, and
// returns its origin.
func serveDir(t testing.TB, dir string) string {
	t.Helper()
	return serve(t, http.FileServer(http.Dir(dir)))
}

// serve serves h on a loopback port of its own until the test ends, and returns its origin.
func serve(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return "http://" + ln.Addr().String()
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
