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
}
