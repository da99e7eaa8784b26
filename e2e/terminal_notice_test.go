package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// waitNotice waits until the terminal page's notice (#term-notice, an
// alert) is shown holding every one of texts, and returns what it says.
func waitNotice(t *testing.T, ctx context.Context, what string, texts ...string) string {
	t.Helper()
	cond := `(() => { const n = document.getElementById('term-notice');
  return !!n && !n.hidden && n.getAttribute('role') === 'alert'`
	for _, s := range texts {
		cond += ` && n.textContent.includes(` + jsString(s) + `)`
	}
	cond += `; })()`
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		shown, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string](`document.getElementById('term-notice').textContent`))
		t.Fatalf("%s: the notice never said %q (%v); it says %q", what, texts, err, shown)
	}
	return get(t, ctx, what, chromedp.Evaluate[string](`document.getElementById('term-notice').textContent`))
}

// TestTerminalTellsWhatInputWasNotDelivered: in real Chromium, the person
// who pastes into a live terminal is told, in the page's alert, of input
// that did not reach the program, with how much: a paste over the input
// limit, which the page does not send; and a paste the machine could not
// hand to a program that reads none of its input, which the daemon refuses
// and the server words. The terminal stays live through both.
func TestTerminalTellsWhatInputWasNotDelivered(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	m := connectMachine(t, env, person, "laptop")
	ctx := startBrowser(t)
	signIn(t, ctx, env, "ada@example.com")
	id := m.start(80, 24, "sh", "-c", "stty raw -echo && printf 'READ''Y\\r\\n' && exec sleep 600")
	run(t, ctx, "open the terminal",
		viewport(1280, 800, "light"),
		chromedp.Navigate(env.URL+"/sessions/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="live"][data-mode="type"]`)),
	)
	waitScreen(t, ctx, "the program's screen", "READY")

	paste := func(n int) {
		t.Helper()
		run(t, ctx, fmt.Sprintf("paste %d bytes", n), chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`window.__term.paste('a'.repeat(%d))`, n)))
	}
	paste(wire.MaxInput + 1)
	waitNotice(t, ctx, "a paste over the limit", "Paste not sent", fmt.Sprint(wire.MaxInput+1)+" bytes", fmt.Sprint(wire.MaxInput)+" bytes")

	// The program reads nothing: the first paste of the limit fills what
	// the machine holds for it, the second cannot be delivered.
	paste(wire.MaxInput)
	paste(wire.MaxInput)
	said := waitNotice(t, ctx, "input the program does not read", fmt.Sprint(wire.MaxInput)+" bytes of input were not delivered", "not reading")
	if strings.Contains(said, "Paste not sent") {
		t.Fatalf("the notice still shows the page's own refusal: %q", said)
	}
	if state := get(t, ctx, "state", chromedp.Evaluate[string](`document.getElementById('term-page').dataset.state`)); state != "live" {
		t.Fatalf("the terminal is %q after the refusals, want live", state)
	}
}
