package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// ownerInExtensionBrowser starts the live server and a browser with the extension pointed at it,
// makes alice the first-run owner in a tab of that browser (so the browser holds her sign-in),
// and returns the server, the browser, that tab and a signed-in API client of hers.
func ownerInExtensionBrowser(t *testing.T) (*servertest.Env, *ExtensionBrowser, context.Context, *servertest.Client) {
	t.Helper()
	env := startLive(t).env
	b := startExtensionBrowser(t, ChromiumOptions{})
	b.SetServer(t, env.URL)
	app := b.Tab(t, env.URL+"/")
	setUpOwner(t, app)
	person := env.NewClient(t)
	person.MustJSON("POST", "/api/auth/signin", map[string]string{"email": "alice@example.com", "password": password}, 200, nil)
	return env, b, app, person
}

// setUpOwner makes alice the owner in app, a tab at the server's first-run
// setup, as a person does: the browser then holds her sign-in.
func setUpOwner(t *testing.T, app context.Context) {
	t.Helper()
	run(t, app, "first-run setup in the browser",
		chromedp.WaitVisible(chromedp.CSS(`form[action="/setup"]`)),
		chromedp.SendKeys(chromedp.ID("name"), "Alice"),
		chromedp.SendKeys(chromedp.ID("email"), "alice@example.com"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.CSS(`form[action="/setup"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("ws-name")),
	)
}

// openPopup opens the extension's popup at its size (440 × 600) and returns it once it frames
// the web app, with the app's frame at "/".
func openPopup(t *testing.T, b *ExtensionBrowser, env *servertest.Env) (popup, frame context.Context) {
	t.Helper()
	popup = b.Tab(t, fmt.Sprintf("chrome-extension://%s/popup/popup.html", ExtensionID))
	run(t, popup, "the popup frames the app", viewport(440, 600, "light"), chromedp.WaitVisible(chromedp.ID("app")))
	return popup, b.appFrame(t, env.URL, "/")
}
