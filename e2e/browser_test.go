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
