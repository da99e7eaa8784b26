package server_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestEveryAPIRouteIsDocumented: each route of the JSON API, the agents'
// API, OAuth and MCP that the app serves is named in docs/API.md (as
// "`METHOD /path`", parameters as `:name` or `{name}`), and each one
// docs/API.md names under those prefixes is served: the reference cannot
// drift from the routes.
func TestEveryAPIRouteIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	// normal writes a path with every parameter as ":" and no query.
	param := regexp.MustCompile(`\{[^}/]+\}|:[A-Za-z]+`)
	normal := func(p string) string {
		p, _, _ = strings.Cut(p, "?")
		p, _, _ = strings.Cut(p, "[")
		return strings.TrimRight(param.ReplaceAllString(p, ":"), "/")
	}
	api := func(p string) bool {
		for _, prefix := range []string{"/api/", "/oauth/", "/mcp", "/.well-known/", "/healthz", "/readyz", "/metrics"} {
			if strings.HasPrefix(p, prefix) {
				return true
			}
		}
		return false
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(GET|POST|PUT|PATCH|DELETE) (/[^` ]*)").FindAllStringSubmatch(string(doc), -1) {
		if api(m[2]) {
			documented[m[1]+" "+normal(m[2])] = true
		}
	}
	// "`POST /mcp` (and `GET`, `DELETE`)" names three.
	if strings.Contains(string(doc), "`POST /mcp` (and `GET`, `DELETE`)") {
		documented["GET /mcp"], documented["DELETE /mcp"] = true, true
	}

	env := servertest.Start(t, storetest.SQLite, nil)
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE"} // HEAD follows GET
	served := map[string]bool{}
	byPath := map[string][]string{}
	for _, r := range env.Server.App().GetRoutes(true) {
		if !api(r.Path) || !slices.Contains(methods, r.Method) {
			continue
		}
		served[r.Method+" "+normal(r.Path)] = true
		byPath[normal(r.Path)] = append(byPath[normal(r.Path)], r.Method)
	}
	for path, ms := range byPath {
		// A path mounted for every method (the MCP endpoint, the OAuth
		// metadata) hands the method to a handler that answers the ones it
		// does not take with 405: the methods it takes are documented, at
		// least one.
		every := len(ms) == len(methods)
		some := false
		for _, m := range ms {
			if documented[m+" "+path] {
				some = true
			} else if !every {
				t.Errorf("%s %s is served but not in docs/API.md", m, path)
			}
		}
		if every && !some {
			t.Errorf("%s is served for every method and docs/API.md names none", path)
		}
	}
	for route := range documented {
		if !served[route] {
			t.Errorf("docs/API.md names %s, which the server does not serve", route)
		}
	}
}
