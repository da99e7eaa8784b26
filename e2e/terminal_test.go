package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/daemon/daemontest"
	"github.com/tabbridge/tabbridge/internal/testbin"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// testProg is the relay tests' program (relay/testdata/prog), built once per
// run: "keys" puts the terminal in raw mode and prints every read as hex.
func testProg(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, repoPath(t, "relay/testdata/prog"))
}

// machineRig is a person's machine with a real daemon connected to the
// server in-process, running real programs in real PTYs.
type machineRig struct {
	t         *testing.T
	env       *servertest.Env
	person    *servertest.Client
	machineID string
	d         *daemon.Daemon
	link      *daemontest.Link // holds the daemon's link down when a test needs the machine offline
}

// connectMachine creates a machine for person and runs its daemon until the
// test ends.
func connectMachine(t *testing.T, env *servertest.Env, person *servertest.Client, name string) *machineRig {
	t.Helper()
	var out struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
	}
	person.MustJSON("POST", "/api/machines", map[string]string{"name": name}, 201, &out)
	l := daemontest.StartLink(t, env.URL, out.Token, 10*time.Millisecond)
	return &machineRig{t: t, env: env, person: person, machineID: out.Machine.ID, d: l.D, link: l}
}

// start runs argv in a new session and waits until the server lists it.
func (m *machineRig) start(cols, rows int, argv ...string) string {
	m.t.Helper()
	id, err := m.d.Start(daemon.Spec{Argv: argv, Cols: cols, Rows: rows,
		Env: []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "LANG=C.UTF-8"}})
	if err != nil {
		m.t.Fatal(err)
	}
	testutil.Eventually(m.t, testutil.WaitMedium, func() bool { // polling an HTTP listing: there is no event to wait on here
		var out struct{ Sessions []struct{ ID string } }
		m.person.MustJSON("GET", "/api/machines/"+m.machineID+"/sessions", nil, 200, &out)
		for _, s := range out.Sessions {
			if s.ID == id {
				return true
			}
		}
		return false
	}, "session "+id+" never listed")
	return id
}

// screenJS reads xterm.js's own buffer: every line, scrollback included.
const screenJS = `(() => { const b = window.__term.buffer.active, out = [];
  for (let i = 0; i < b.length; i++) { const l = b.getLine(i); out.push(l ? l.translateToString(true) : ''); }
  return out.join('\n'); })()`

// waitScreen waits until the terminal shows text.
func waitScreen(t *testing.T, ctx context.Context, what, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.__term && `+screenJS+`.includes(`+jsString(text)+`)`, chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		screen, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string](screenJS))
		t.Fatalf("%s: the terminal never showed %q (%v); it shows:\n%s", what, text, err, screen)
	}
}

// TestTerminalInTheWebApp opens a real program's live terminal in the web
// app, in real Chromium, full size and popup size: xterm.js shows the
// program's screen, fills its frame and has the keyboard; keystrokes (Esc
// and an arrow included) and a paste reach the program as the exact bytes
// xterm.js makes; watch-only mode cannot type; after a server restart the
// page dials again with a new ticket and the terminal works on. The
// machines page shows the session as it starts, without a reload.
func TestTerminalInTheWebApp(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	m := connectMachine(t, env, person, "laptop")
	ctx := startBrowser(t)
	signIn(t, ctx, env, "ada@example.com")
	run(t, ctx, "machines page",
		viewport(440, 600, "light"),
		chromedp.Navigate(env.URL+"/machines"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"] #machines .state-online`)),
	)
	id := m.start(80, 24, testProg(t), "keys")
	run(t, ctx, "the session appears live, and opens",
		chromedp.WaitVisible(chromedp.CSS(`a[href="/sessions/`+id+`"]`)),
		chromedp.Click(chromedp.CSS(`a[href="/sessions/`+id+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"]`)),
	)

	for _, size := range []struct{ w, h int64 }{{1280, 800}, {440, 600}} {
		run(t, ctx, "open the terminal",
			viewport(size.w, size.h, "light"),
			chromedp.Evaluate[chromedp.Void](`localStorage.removeItem('tabbridge.watchOnly')`),
			chromedp.Navigate(env.URL+"/sessions/"+id),
			chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"][data-mode="type"]`)),
		)
		waitScreen(t, ctx, "the program's screen", "KEYS READY")
		if r := renderer(t, ctx); r != "webgl" && r != "dom" {
			t.Fatalf("renderer %q", r)
		}
		focused := get(t, ctx, "focus", chromedp.Evaluate[bool](`document.activeElement === document.querySelector('#term-host .xterm-helper-textarea')`))
		if !focused {
			t.Fatalf("%d×%d: keyboard focus is not on the terminal", size.w, size.h)
		}
		// The terminal fills its frame: it ends near the bottom of the window.
		bottom := get(t, ctx, "frame", chromedp.Evaluate[float64](`document.querySelector('.term-frame').getBoundingClientRect().bottom`))
		if bottom < float64(size.h)-2 || bottom > float64(size.h)+1 {
			t.Fatalf("%d×%d: the terminal's frame ends at %v", size.w, size.h, bottom)
		}
		noHorizontalScroll(t, ctx, "terminal", size.w)
	}

	// The popup-sized viewer typed nothing yet; the session took its size.
	cols := get(t, ctx, "cols", chromedp.Evaluate[int](`window.__term.cols`))
	if cols > 60 || cols < 30 {
		t.Fatalf("in the popup the terminal has %d columns, want it fitted to 440 px", cols)
	}

	run(t, ctx, "type", chromedp.KeyEvent("a"))
	waitScreen(t, ctx, "a letter", "got 61")
	// chromedp's KeyEvent types a letter twice; the echo of the first comes
	// at once, so a marker makes sure the second was read before Esc.
	run(t, ctx, "marker", chromedp.Evaluate[chromedp.Void](`window.__term.paste('m')`))
	waitScreen(t, ctx, "the marker", "6d\n")
	run(t, ctx, "Esc", chromedp.KeyEvent(kb.Escape))
	waitScreen(t, ctx, "Esc alone", "got 1b\n")
	run(t, ctx, "up arrow", chromedp.KeyEvent(kb.ArrowUp))
	waitScreen(t, ctx, "up arrow", "got 1b5b41")

	// The window grows: the page says so and the session follows it.
	run(t, ctx, "a bigger window", viewport(1280, 800, "light"),
		chromedp.Poll[chromedp.Void](`window.__term.cols > 100`, chromedp.WithPollingTimeout(10*time.Second)))

	// Paste goes through as typed (one frame, the exact text).
	run(t, ctx, "paste", chromedp.Evaluate[chromedp.Void](`window.__term.paste('xyz')`))
	waitScreen(t, ctx, "paste", "got 78797a")

	// Watch only: the same keys go nowhere.
	run(t, ctx, "watch only",
		chromedp.Click(chromedp.ID("mode-watch")),
		chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"][data-mode="watch"]`)),
	)
	waitScreen(t, ctx, "history after reconnecting", "got 78797a")
	run(t, ctx, "type while watching", chromedp.KeyEvent("q"))
	run(t, ctx, "back to typing",
		chromedp.Click(chromedp.ID("mode-type")),
		chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"][data-mode="type"]`)),
		chromedp.KeyEvent("z"),
	)
	waitScreen(t, ctx, "typing again", "got 7a")
	screen := get(t, ctx, "screen", chromedp.Evaluate[string](screenJS))
	if strings.Contains(screen, "got 71") {
		t.Fatalf("a key typed while watching reached the program:\n%s", screen)
	}

	// Ctrl+F6 gives the keyboard back to the page; the program gets nothing.
	run(t, ctx, "leave the terminal", chromedp.KeyEvent(kb.F6, chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.Poll[chromedp.Void](`document.activeElement && document.activeElement.classList.contains('term-back')`))
	run(t, ctx, "a key on the page", chromedp.KeyEvent("w"))
	if screen := get(t, ctx, "screen", chromedp.Evaluate[string](screenJS)); strings.Contains(screen, "got 77") || strings.Contains(screen, "1b5b31373b357") {
		t.Fatalf("keys reached the program after leaving the terminal:\n%s", screen)
	}
	run(t, ctx, "back into the terminal", chromedp.Evaluate[chromedp.Void](`window.__term.focus()`))

	// A deploy: the socket drops, the page asks for a new ticket and dials
	// again; until the daemon is back the session is unknown and the page
	// says its machine is offline rather than giving up. Then typing works on.
	// The daemon is held back until the page has said so, as a daemon
	// reconnecting more slowly than the page would be in life.
	n := get(t, ctx, "connections", chromedp.Evaluate[string](`document.getElementById('term-page').dataset.connections`))
	m.link.Hold()
	env.Restart(t)
	run(t, ctx, "waiting for the machine", chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="offline"]`)))
	m.link.Release()
	ctx2, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx2, chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"]:not([data-connections="`+n+`"])`))); err != nil {
		t.Fatalf("the page never reconnected after a server restart: %v%s", err, pageState(ctx))
	}
	run(t, ctx, "type after the restart", chromedp.KeyEvent("r"))
	waitScreen(t, ctx, "typing after the restart", "got 72")

	// Revoking the machine ends the session for good: the page says so.
	person.MustJSON("DELETE", "/api/machines/"+m.machineID, nil, 204, nil)
	run(t, ctx, "the session is gone", chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="gone"]`)))
}

func renderer(t *testing.T, ctx context.Context) string {
	t.Helper()
	return get(t, ctx, "renderer", chromedp.Evaluate[string](`document.getElementById('term-host').dataset.renderer`))
}

// loseContextJS loses the WebGL renderer's context the way a driver reset
// does (WEBGL_lose_context); getContext hands back the canvas's own context.
const loseContextJS = `(() => { for (const c of document.querySelectorAll('#term-host canvas')) {
  const gl = c.getContext('webgl2'); const ext = gl && gl.getExtension('WEBGL_lose_context');
  if (ext && !gl.isContextLost()) { ext.loseContext(); return true; } } return false; })()`

// TestTerminalRenderers: where WebGL cannot start (here: Chromium with its
// 3D APIs off), loading the WebGL add-on fails in activate and the DOM
// renderer takes over; where it starts, a lost context is rebuilt once and
// a second loss drops to the DOM renderer for good — and the terminal keeps
// showing the program and taking keys through all of it.
func TestTerminalRenderers(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	m := connectMachine(t, env, person, "laptop")
	id := m.start(80, 24, testProg(t), "keys")

	t.Run("no WebGL", func(t *testing.T) {
		ctx := startBrowser(t, chromedp.Flag("disable-3d-apis", true))
		signIn(t, ctx, env, "ada@example.com")
		run(t, ctx, "open the terminal", chromedp.Navigate(env.URL+"/sessions/"+id),
			chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"]`)))
		waitScreen(t, ctx, "the program's screen", "KEYS READY")
		if r := renderer(t, ctx); r != "dom" {
			t.Fatalf("without WebGL the renderer is %q, want the DOM fallback", r)
		}
		run(t, ctx, "type", chromedp.KeyEvent("d"))
		waitScreen(t, ctx, "a key", "got 64")
	})

	t.Run("context lost twice", func(t *testing.T) {
		ctx := startBrowser(t)
		signIn(t, ctx, env, "ada@example.com")
		run(t, ctx, "open the terminal", chromedp.Navigate(env.URL+"/sessions/"+id),
			chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"]`)))
		waitScreen(t, ctx, "the program's screen", "KEYS READY")
		if r := renderer(t, ctx); r != "webgl" {
			if os.Getenv("CI") != "" {
				t.Fatalf("this Chromium gives no WebGL2 context (renderer %q): the lost-context path cannot be tested", r)
			}
			t.Skipf("this Chromium gives no WebGL2 context (renderer %q): nothing to lose", r)
		}
		for _, want := range []struct{ renderer, losses string }{{"webgl", "1"}, {"dom", "2"}} {
			if !get(t, ctx, "lose the context", chromedp.Evaluate[bool](loseContextJS)) {
				t.Fatal("no WebGL context to lose")
			}
			// xterm.js waits 3 s for the context to come back before it
			// reports the loss.
			sel := `#term-host[data-renderer="` + want.renderer + `"][data-webgl-losses="` + want.losses + `"]`
			ctx2, cancel := context.WithTimeout(ctx, 15*time.Second)
			if _, err := chromedp.Run(ctx2, chromedp.WaitReady(chromedp.CSS(sel))); err != nil {
				cancel()
				t.Fatalf("after loss %s: %v (renderer %q)", want.losses, err, renderer(t, ctx))
			}
			cancel()
		}
		run(t, ctx, "type after falling back", chromedp.KeyEvent("e"))
		waitScreen(t, ctx, "a key after the fallback", "got 65")
		if n := get(t, ctx, "canvases", chromedp.Evaluate[int](`document.querySelectorAll('#term-host canvas').length`)); n != 0 {
			t.Fatalf("the DOM renderer left %d WebGL canvases behind", n)
		}
	})
}

// TestTerminalKeepsUpWithAFlood: a program writes 2 MB after the page
// attached and exits. The page acknowledges what xterm.js has written, so
// the server's window keeps opening: the last line and the exit status
// arrive (a page that did not acknowledge would stall at the high mark).
func TestTerminalKeepsUpWithAFlood(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	m := connectMachine(t, env, person, "laptop")
	id := m.start(100, 30, testProg(t), "burst", "2000000")
	ctx := startBrowser(t)
	signIn(t, ctx, env, "ada@example.com")
	run(t, ctx, "open the terminal", viewport(1280, 800, "light"),
		chromedp.Navigate(env.URL+"/sessions/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"]`)))
	waitScreen(t, ctx, "the program waiting", "BURST READY")
	run(t, ctx, "start the flood", chromedp.KeyEvent(kb.Enter))
	waitScreen(t, ctx, "the flood's end", "BURST END")
	run(t, ctx, "the exit status", chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="exited"]`)))
	if s := get(t, ctx, "state", chromedp.Text(chromedp.ID("term-state"))); s != "Exited with status 3" {
		t.Fatalf("state %q", s)
	}
}

// TestTerminalQueriesAnsweredOnce: a program asks for a cursor report and
// device attributes while a viewer watches. The daemon (the terminal of
// record) answers each once; the viewer's xterm.js, which would answer too,
// is silenced, so the program reads exactly two replies before the key
// typed after them.
// typingTerminal signs email in to a fresh browser and opens session id's
// page, live and taking keys.
func typingTerminal(t *testing.T, env *servertest.Env, email, id string) context.Context {
	t.Helper()
	ctx := startBrowser(t)
	signIn(t, ctx, env, email)
	run(t, ctx, "open the terminal", chromedp.Navigate(env.URL+"/sessions/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"][data-mode="type"]`)))
	return ctx
}

func TestTerminalQueriesAnsweredOnce(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	m := connectMachine(t, env, person, "laptop")
	id := m.start(80, 24, testProg(t), "queries")
	ctx := typingTerminal(t, env, "ada@example.com", id)
	waitScreen(t, ctx, "the program's screen", "KEYS READY")
	// One "q" exactly (a key event can type it twice).
	run(t, ctx, "ask", chromedp.Evaluate[chromedp.Void](`window.__term.paste('q')`))
	waitScreen(t, ctx, "a cursor report", "got 1b5b")
	if got := get(t, ctx, "unicode", chromedp.Evaluate[string](`window.__term.unicode.activeVersion`)); got != "11" {
		t.Fatalf("the viewer counts widths by Unicode %q, want 11 as the daemon", got)
	}
	run(t, ctx, "marker", chromedp.Evaluate[chromedp.Void](`window.__term.paste('z')`))
	waitScreen(t, ctx, "the marker", "got 7a")
	screen := get(t, ctx, "screen", chromedp.Evaluate[string](screenJS))
	before, _, _ := strings.Cut(screen, "got 7a")
	// Each reply starts with CSI (1b5b), whether the program read the two
	// in one read or two; the status string's with DCS (1b50).
	if n := strings.Count(before, "1b5b"); n != 2 {
		t.Fatalf("the program read %d replies, want one cursor report and one device attributes reply:\n%s", n, screen)
	}
	if n := strings.Count(before, "1b50"); n != 1 {
		t.Fatalf("the program read %d DECRQSS replies, want one (the daemon's; the viewer's xterm.js is silenced):\n%s", n, screen)
	}
}
