package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestTerminalSaysExitStatusZero: a program that ends well (status 0, which
// the exit message leaves out as its zero value) reads "Exited with status 0"
// on the terminal page, not "Exited with status undefined" (issue 19).
func TestTerminalSaysExitStatusZero(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	m := connectMachine(t, env, person, "laptop")
	id := m.start(100, 30, testProg(t), "colours")
	ctx := startBrowser(t)
	signIn(t, ctx, env, "ada@example.com")
	run(t, ctx, "open the terminal", viewport(1280, 800, "light"),
		chromedp.Navigate(env.URL+"/sessions/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"]`)))
	waitScreen(t, ctx, "the program waiting", "COLOURS READY")
	// Ctrl+D at the start of a line: the program reads end of input and exits 0.
	run(t, ctx, "end its input", chromedp.KeyEvent("d", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	run(t, ctx, "the exit status", chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="exited"]`)))
	if s := get(t, ctx, "state", chromedp.Text(chromedp.ID("term-state"))); s != "Exited with status 0" {
		t.Fatalf("state %q", s)
	}
	if on := get(t, ctx, "the mode toggle", chromedp.Evaluate[string](
		`['mode-watch', 'mode-type'].filter(id => !document.getElementById(id).disabled).join(' ')`)); on != "" {
		t.Errorf("the ended session's Type/Watch toggle is still active: %s", on)
	}
	// Machines lists it with its status and an explicit button to its terminal.
	run(t, ctx, "the machines page", chromedp.Navigate(env.URL+"/machines"),
		chromedp.WaitVisible(chromedp.CSS(`a#session-`+id+`-open[href="/sessions/`+id+`"]`)))
	if s := get(t, ctx, "the session's badge", chromedp.Text(chromedp.CSS(`#session-`+id+`-link ~ .badge, li:has(#session-`+id+`-link) .badge`))); s != "Exited 0" {
		t.Errorf("machines badge %q", s)
	}
	layoutRules(t, ctx, "machines with an ended session", 1280)
}
