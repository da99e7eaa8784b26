package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/server"
)

// TestSharingOverTheCapSaysWhyInThePopup: with the real extension in real Chromium, a person who
// already shares --shared-sites-max sites presses Share in the popup on one more. The server
// refuses it (409 limit_reached) and the popup shows its sentence, which names the limit and what
// to do; the site stays unshared and the agent does not see it.
func TestSharingOverTheCapSaysWhyInThePopup(t *testing.T) {
	w := newWorld(t, func(o *server.Options) { o.Caps.SharedSites = 1 })
	w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://other.example", "workspaceId": w.ws}, 201, nil)
	w.b.eval(t, w.worker, `__tabbridgeTest.ready().then(() => { __tabbridgeTest.link.kick(); return true; })`, nil)

	index := w.site + "/"
	w.b.Tab(t, index)
	d := waitDocument(t, w.b, w.worker, index, "search")
	popup := w.b.Tab(t, fmt.Sprintf("chrome-extension://%s/popup/popup.html?tab=%d", ExtensionID, d.TabID))
	run(t, popup, "press Share over the cap",
		chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="unshared"]`)),
		chromedp.Click(chromedp.ID("share")),
		chromedp.WaitVisible(chromedp.ID("share-note")),
	)
	said := get(t, popup, "read the note", chromedp.Text(chromedp.ID("share-note")))
	want := "Not shared: You have reached the limit of 1 shared site per person. Stop sharing sites you no longer use, then share this one."
	if strings.TrimSpace(said) != want {
		t.Fatalf("the popup says %q; want %q", said, want)
	}
	state := get(t, popup, "the share box after the refusal", chromedp.Evaluate[string](`document.getElementById('share-box').dataset.state`))
	if state != "unshared" {
		t.Errorf("the share box is %q after the refusal; want unshared", state)
	}
	for _, s := range w.listing(w.agent) {
		if s.Site == w.site {
			t.Errorf("the agent sees %s, which was not shared: %+v", w.site, s)
		}
	}
}
