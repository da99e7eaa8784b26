package e2e

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/server/servertest"
)

// machineShots captures the machines page empty, with a connected machine
// running real programs (one exited) beside one never connected, a live
// terminal, and a new machine's token and command.
func machineShots(t *testing.T, ctx context.Context, env *servertest.Env, owner *servertest.Client, capture func(shot)) {
	capture(shot{"machines-empty", "Machines, before the first", visit(env.URL+"/machines", `#machines-empty`)})
	run(t, ctx, "popup size", viewport(440, 600, "light"), chromedp.Navigate(env.URL+"/machines"), chromedp.WaitVisible(chromedp.ID("nav")))
	if over := get(t, ctx, "measure the navigation", chromedp.Evaluate[int](`(() => { const n = document.getElementById('nav'); return n.scrollWidth - n.clientWidth; })()`)); over > 0 {
		t.Errorf("the navigation needs %d px more than the popup's 440: an entry is hidden", over)
	}

	owner.MustJSON("POST", "/api/machines", map[string]string{"name": "cloud vm"}, 201, nil)
	m := connectMachine(t, env, owner, "laptop")
	prog := testProg(t)
	term := m.start(100, 30, prog, "alt")
	m.start(100, 30, prog, "colours")
	done := m.start(80, 24, "sh", "-c", "echo tests passed; exit 1")
	m.awaitExit(done)
	capture(shot{"machines", "Machines: one connected with its sessions, one never connected",
		visit(env.URL+"/machines", `a[href="/sessions/`+term+`"]`)})
	capture(shot{"session", "A live terminal (xterm.js); in the popup it fills the space below a slim header", func() []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			chromedp.Evaluate[chromedp.Void](`localStorage.removeItem('tabbridge.watchOnly')`),
			chromedp.Navigate(env.URL + "/sessions/" + term),
			chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"]`)),
			chromedp.Poll[chromedp.Void](`window.__term && ` + screenJS + `.includes('ALT READY')`),
		}
	}})
	capture(shot{"machine-created", "A new machine: its token, shown once, with the command that enrols the daemon (never a command line holding the token)", func() []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			chromedp.Navigate(env.URL + "/machines"),
			chromedp.SendKeys(chromedp.ID("machine-name"), "build box"),
			chromedp.Submit(chromedp.ID("machine-name")),
			chromedp.WaitVisible(chromedp.ID("daemon-command")),
		}
	}})
}

// awaitExit waits until the daemon's session has ended.
func (m *machineRig) awaitExit(id string) {
	m.t.Helper()
	s, ok := m.d.Session(id)
	if !ok {
		m.t.Fatalf("no session %s", id)
	}
	<-s.Done()
}
