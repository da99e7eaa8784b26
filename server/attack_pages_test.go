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

// TestAPIAnswersAreNotStored: API answers carry secrets shown once (a new agent token, an
// invitation link, a ticket, the CSRF token) and are one person's: none may be kept by a cache,
// errors included.
func TestAPIAnswersAreNotStored(t *testing.T) {
	w := newOAuthWorld(t, storetest.SQLite)
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/api/workspaces/" + w.ws + "/tokens", `{"name":"cached?"}`, 201}, {"POST", "/api/invitations", `{}`, 201},
		{"POST", "/api/tickets", "", 201}, {"GET", "/api/auth/csrf", "", 200}, {"GET", "/api/workspaces", "", 200},
		{"GET", "/api/no-such-thing", "", 404}, {"GET", "/api/agent/workspace", "", 401},
	} {
		req, _ := http.NewRequest(tc.method, w.env.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", w.alice.CSRF)
		resp, err := w.alice.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Cache-Control"); got != "no-store" || resp.StatusCode != tc.status {
			t.Errorf("%s %s (%d): Cache-Control %q, want no-store on a %d", tc.method, tc.path, resp.StatusCode, got, tc.status)
		}
	}
}
