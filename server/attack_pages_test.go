package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestPagesSayWhenAnotherSiteSentTheBrowser: a page that another site navigated the browser to
// (Sec-Fetch-Site cross-site or same-site, a top-level document: headers the browser sets and no
// page can) is marked data-arrived="cross-site", so its script holds clicks on its buttons until
// the window has held focus a moment — the site may have placed it under the second click of a
// double-click (double-clickjacking). Typed addresses, the app's own links, fetches of live
// regions and the popup's frame are not marked.
func TestPagesSayWhenAnotherSiteSentTheBrowser(t *testing.T) {
	w := newOAuthWorld(t, storetest.SQLite)
	for _, path := range []string{w.env.URL + "/", w.authURL(nil), w.env.URL + "/workspaces/" + w.ws} {
		for _, tc := range []struct {
			site, dest string
			marked     bool
		}{
			{"cross-site", "document", true}, {"same-site", "document", true},
			{"none", "document", false}, {"same-origin", "document", false}, {"", "", false},
			{"cross-site", "iframe", false}, {"same-origin", "empty", false},
		} {
			req, _ := http.NewRequest("GET", path, nil)
			if tc.site != "" {
				req.Header.Set("Sec-Fetch-Site", tc.site)
				req.Header.Set("Sec-Fetch-Dest", tc.dest)
			}
			resp, err := w.alice.HTTP.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			page := readPage(resp)
			if resp.StatusCode != 200 || strings.Contains(page, `data-arrived="cross-site"`) != tc.marked {
				t.Errorf("%s with Sec-Fetch-Site %q, Dest %q: status %d, marked %v, want %v", path, tc.site, tc.dest, resp.StatusCode, !tc.marked, tc.marked)
			}
		}
	}
}
