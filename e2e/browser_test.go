package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// startBrowser starts one headless Chromium with a fresh profile for the
// test and returns a tab's context; everything ends with the test. extra
// adds flags.
func startBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		browserOutput(t),
	}
	opts = append(opts, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser (no deadline: it would end the browser)
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs steps with a deadline, failing the test with what was being done.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for i, step := range steps {
		if err := chromedp.Do(ctx, step); err != nil {
			t.Fatalf("%s (step %d): %v%s", what, i+1, err, pageState(ctx))
		}
	}
}

// pageState describes where the tab is, for failure messages.
func pageState(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText.slice(0, 1500)`))
	if err != nil {
		return ""
	}
	return "\npage: " + state
}

// get runs one action with a deadline and returns its value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// viewport sizes the page like the popup (440×600) or a window, in a colour
// scheme ("light" or "dark").
func viewport(w, h int64, scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.EmulateViewport(w, h),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
			})
			return err
		}),
	)
}

// colorScheme emulates the light or dark preference alone, for a frame of
// the popup (whose size its parent sets).
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
}

// noHorizontalScroll fails unless the page fits its width.
func noHorizontalScroll(t *testing.T, ctx context.Context, where string, width int64) {
	t.Helper()
	sw := get(t, ctx, "measure "+where, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
	if sw > width {
		t.Errorf("%s scrolls sideways at %dpx: scrollWidth %d", where, width, sw)
	}
	// A request's arguments must be readable whole: none may hide past the right edge of its box.
	hidden := get(t, ctx, "measure the arguments on "+where, chromedp.Evaluate[int64](`[...document.querySelectorAll('pre.args')].filter(e => e.scrollWidth > e.clientWidth).length`))
	if hidden > 0 {
		t.Errorf("%s: %d argument boxes scroll sideways at %dpx, hiding part of what the person approves", where, hidden, width)
	}
}

// layoutRules checks, in the DOM, what issue 19 asks of every page at every
// width: the page never scrolls sideways, the navigation is one row whose
// entries all lie inside the window (none clipped or wrapped), every visible
// control can be reached with Tab, and no command or code is set to break
// inside a word.
func layoutRules(t *testing.T, ctx context.Context, where string, width int64) {
	t.Helper()
	sw := get(t, ctx, "measure "+where, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
	if sw > width {
		t.Errorf("%s scrolls sideways at %dpx: scrollWidth %d", where, width, sw)
	}
	nav := get(t, ctx, "measure the navigation on "+where, chromedp.Evaluate[string](`(() => {
		const nav = document.getElementById('nav');
		if (!nav) return '';
		const items = [...nav.querySelectorAll(':scope > a, :scope > details > summary')];
		const who = document.querySelector('#user-menu > summary');
		if (who) items.push(who);
		const bad = [];
		const top = items[0].getBoundingClientRect().top;
		for (const el of items) {
			const r = el.getBoundingClientRect();
			if (r.right > innerWidth + 0.5 || r.left < -0.5) bad.push(el.textContent.trim() + ' outside the window');
			if (el !== who && Math.abs(r.top - top) > 2) bad.push(el.textContent.trim() + ' on another row');
			if (el.scrollWidth > el.clientWidth + 1) bad.push(el.textContent.trim() + ' clipped');
		}
		if (nav.scrollWidth > nav.clientWidth + 1) bad.push('the navigation scrolls');
		return bad.join('; ');
	})()`))
	if nav != "" {
		t.Errorf("%s at %dpx: navigation does not fit: %s", where, width, nav)
	}
	if width <= 440 {
		// Framed in the popup (app.js sets html.framed), the header is one
		// row: at most 48 px, every entry inside the frame.
		framed := get(t, ctx, "measure the framed header on "+where, chromedp.Evaluate[string](`(() => {
			const top = document.querySelector('header.top');
			if (!top || !document.getElementById('nav')) return '';
			const was = document.documentElement.classList.contains('framed');
			document.documentElement.classList.add('framed');
			const h = top.getBoundingClientRect().height;
			const out = [...top.querySelectorAll('#nav > a, #nav > details > summary, #user-menu > summary')]
				.filter(el => el.getBoundingClientRect().right > innerWidth + 0.5).map(el => el.textContent.trim());
			if (!was) document.documentElement.classList.remove('framed'); // a page really framed stays so
			return (h > 48 ? 'header ' + h + 'px tall; ' : '') + (out.length ? 'outside: ' + out.join(', ') : '');
		})()`))
		if framed != "" {
			t.Errorf("%s framed at %dpx: %s", where, width, framed)
		}
	}
	unreachable := get(t, ctx, "find controls out of keyboard reach on "+where, chromedp.Evaluate[string](`(() => {
		const sel = 'a[href], button, input:not([type=hidden]), select, textarea, summary';
		return [...document.querySelectorAll(sel)].filter(el => {
			const r = el.getBoundingClientRect();
			if (r.width === 0 || r.height === 0 || el.disabled) return false;
			return el.tabIndex < 0;
		}).map(el => el.outerHTML.slice(0, 80)).join('; ');
	})()`))
	if unreachable != "" {
		t.Errorf("%s: controls Tab never reaches: %s", where, unreachable)
	}
	breaking := get(t, ctx, "find code set to break words on "+where, chromedp.Evaluate[string](`(() => {
		return [...document.querySelectorAll('code, pre, .cmd, .command')].filter(el => {
			const s = getComputedStyle(el);
			return s.wordBreak === 'break-all' || s.overflowWrap === 'anywhere';
		}).filter(el => !el.classList.contains('args')).map(el => el.outerHTML.slice(0, 80)).join('; ');
	})()`))
	if breaking != "" {
		t.Errorf("%s: code set to break inside words: %s", where, breaking)
	}
}
