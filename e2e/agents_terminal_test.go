//go:build !windows

package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestRealAgentsInTheTerminal runs the real Claude Code and the real Codex,
// interactive, each in a real PTY under the real daemon, and the person
// works with them from the web app's terminal in real Chromium: the agent's
// own screen arrives (its prompt), a prompt typed in xterm.js reaches the
// agent as typed and is sent to its model (a stand-in), and the streamed
// answer shows in the viewer. A viewer that opens the session afterwards
// sees the prompt and the answer in the redraw.
func TestRealAgentsInTheTerminal(t *testing.T) {
	agents := []struct {
		name, bin string
		args      []string
		home      func(t *testing.T, model string) (work string, env []string)
		ready     string // what the agent's first screen shows once it takes input
	}{
		{"Claude Code", "claude", nil, func(t *testing.T, model string) (string, []string) {
			_, work, env := claudeHome(t, model)
			return work, env
		}, "for shortcuts"},
		// Codex's TUI otherwise starts a managed app-server daemon that outlives the session
		// (setsid, so ending the session's process group does not reach it).
		{"Codex", "codex", []string{"--no-daemon"}, func(t *testing.T, model string) (string, []string) {
			_, work, env := codexHome(t, model, "")
			return work, env
		}, "for shortcuts"},
	}
	for _, a := range agents {
		agentBin(t, a.bin)
	}
	srv := servertest.Start(t, storetest.SQLite, nil)
	person := srv.Person(t, "ada@example.com")
	m := connectMachine(t, srv, person, "laptop")
	ctx := startBrowser(t)
	signIn(t, ctx, srv, "ada@example.com")
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			model := newScriptedModel(t)
			answer := "Stand-in model here: " + a.bin + " in the terminal works."
			model.Chat = answer
			work, env := a.home(t, model.URL)
			env = append(env, "TERM=xterm-256color", "COLORTERM=truecolor", "LANG=C.UTF-8", "NO_COLOR=")
			id, err := m.d.Start(daemon.Spec{Argv: append([]string{agentBin(t, a.bin)}, a.args...), Dir: work, Env: env, Cols: 100, Rows: 30})
			if err != nil {
				t.Fatal(err)
			}
			open := func(what string) {
				run(t, ctx, what,
					viewport(1280, 800, "dark"),
					chromedp.Navigate(srv.URL+"/sessions/"+id),
					chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"][data-mode="type"]`)),
				)
			}
			open("open the agent's terminal")
			waitScreen(t, ctx, a.name+"'s prompt", a.ready)

			prompt := "Say hello from the terminal to " + a.bin
			run(t, ctx, "type a prompt", chromedp.Evaluate[chromedp.Void](`window.__term.paste(`+jsString(prompt)+`)`))
			waitScreen(t, ctx, "the prompt as typed", prompt)
			run(t, ctx, "send it", chromedp.KeyEvent(kb.Enter))
			waitScreen(t, ctx, "the model's streamed answer", answer)
			if !slices.ContainsFunc(model.Prompts(), func(p string) bool { return strings.Contains(p, prompt) }) {
				t.Fatalf("the model never got the typed prompt; it got %q", model.Prompts())
			}

			// A viewer that opens the session now gets the redraw of the same screen.
			open("open it again")
			waitScreen(t, ctx, "the answer in the redraw", answer)
			waitScreen(t, ctx, "the prompt in the redraw", prompt)
		})
	}
}
