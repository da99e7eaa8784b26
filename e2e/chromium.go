package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// chromiumPath finds the browser: $TABBRIDGE_CHROMIUM, else /usr/bin/chromium, else chromium on
// the PATH. Without one the test is skipped, unless CI is set: there a missing browser fails.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("TABBRIDGE_CHROMIUM"), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found: set TABBRIDGE_CHROMIUM or apt-get install -y chromium")
	}
	t.Skip("chromium not found (set TABBRIDGE_CHROMIUM); skipped outside CI")
	return ""
}

// ChromiumOptions says how to start a browser.
type ChromiumOptions struct {
	Extension string // absolute path of an unpacked extension to load, or empty
	NoWebMCP  bool   // leave the WebMCP feature off
}

// startChromium starts a fresh headless Chromium with its own profile and returns its browser
// context; the browser is stopped when the test ends. Each start costs about 2 s and 400 MB, so a
// scenario group shares one.
func startChromium(t testing.TB, o ChromiumOptions) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", "new"),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(1280, 800),
		browserOutput(t),
	}
	if !o.NoWebMCP {
		opts = append(opts, chromedp.Flag("enable-features", "WebMCP"))
	}
	if o.Extension != "" {
		opts = append(opts,
			chromedp.Flag("load-extension", o.Extension),
			chromedp.Flag("disable-extensions-except", o.Extension))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// repoPath returns the absolute path of a file or folder of this repository.
func repoPath(t testing.TB, rel string) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("repo path: no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", rel)
}

// browserOutput keeps the last 16 KiB of what the browser prints and logs it when the test fails:
// a browser that dies (a CI run once saw "browser process exited: signal: illegal instruction",
// Chromium's own CHECK failing) says why only there.
func browserOutput(t testing.TB) chromedp.ExecAllocatorOption {
	tail := &outputTail{max: 16 << 10}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the browser's last output (its D-Bus complaints left out):\n%s", tail.String())
		}
	})
	return chromedp.CombinedOutput(tail)
}

// outputTail is an io.Writer that keeps only the last max bytes written to it.
type outputTail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (o *outputTail) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, p...)
	if over := len(o.buf) - o.max; over > 0 {
		o.buf = append(o.buf[:0], o.buf[over:]...)
	}
	return len(p), nil
}

// String returns the kept output without the lines about D-Bus, which headless Chromium prints by
// the dozen on a machine without one.
func (o *outputTail) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var kept [][]byte
	for _, line := range bytes.Split(o.buf, []byte("\n")) {
		if !bytes.Contains(line, []byte(":ERROR:dbus/")) {
			kept = append(kept, line)
		}
	}
	return string(bytes.TrimSpace(bytes.Join(kept, []byte("\n"))))
}
