package server_test

import (
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestWebAppModulesLoad: the web app's scripts are ES modules. A browser runs
// one only with a JavaScript MIME type (the answers say nosniff), and only
// when the page's CSP lets scripts come from the server itself; so every
// module the pages load, and every module those import, is served as
// JavaScript, and the pages' script-src is 'self'.
func TestWebAppModulesLoad(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	resp, err := http.Get(env.URL + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q does not let the page's modules load", csp)
	}
	if !strings.Contains(string(page), `<script type="module" src="/static/app.js">`) {
		t.Fatalf("the page does not load app.js as a module:\n%s", page)
	}
	imports := regexp.MustCompile(`(?m)^import .* from '\./(lib/[a-z]+\.js)';$`)
	seen := map[string]bool{}
	todo := []string{"app.js", "terminal.js"}
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		r, err := http.Get(env.URL + "/static/" + name)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if r.StatusCode != 200 || (mt != "text/javascript" && mt != "application/javascript") {
			t.Errorf("/static/%s: %d %q, want 200 and a JavaScript type", name, r.StatusCode, mt)
			continue
		}
		for _, m := range imports.FindAllStringSubmatch(string(body), -1) {
			// lib/ modules import one another as './x.js'; the pages' own as './lib/x.js'.
			todo = append(todo, m[1])
		}
	}
	if !seen["lib/backoff.js"] || !seen["lib/frames.js"] || !seen["lib/live.js"] {
		t.Errorf("modules reached: %v", seen)
	}
}
