package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestEveryAnswerSaysNosniff: JSON answers and errors, pages, static files,
// the agent endpoints and the socket doors all carry
// X-Content-Type-Options: nosniff, so no answer is ever sniffed into a
// script or a page.
func TestEveryAnswerSaysNosniff(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	ws := person.Workspace("Home")
	token := person.AgentToken(ws, "laptop")
	for _, r := range []struct {
		method, path, accept, bearer string
		body                         string
		status                       int
	}{
		{"GET", "/healthz", "", "", "", 200},
		{"GET", "/api/auth/csrf", "", "", "", 200},
		{"GET", "/api/auth/me", "", "", "", 401},
		{"POST", "/api/workspaces", "", "", `{"name":"x"}`, 403}, // no CSRF token
		{"GET", "/api/nope", "", "", "", 404},
		{"GET", "/nope", "text/html", "", "", 404},
		{"GET", "/signin", "text/html", "", "", 200},
		{"GET", "/static/app.js", "", "", "", 200},
		{"GET", "/ws/viewer?ticket=tbt_x", "", "", "", 426},
		{"GET", "/ws/extension", "", "", "", 426},
		{"GET", "/api/agent/workspace", "", token, "", 200},
		{"POST", "/mcp", "application/json, text/event-stream", "", `{}`, 401},
		{"POST", "/mcp", "application/json, text/event-stream", token, `{"jsonrpc":"2.0","id":1,"method":"initialize",` +
			`"params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, 200},
	} {
		req, err := http.NewRequest(r.method, env.URL+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		if r.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if r.accept != "" {
			req.Header.Set("Accept", r.accept)
		}
		if r.bearer != "" {
			req.Header.Set("Authorization", "Bearer "+r.bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != r.status {
			t.Errorf("%s %s: status %d, want %d", r.method, r.path, resp.StatusCode, r.status)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d, %s): X-Content-Type-Options %q, want nosniff", r.method, r.path, resp.StatusCode, resp.Header.Get("Content-Type"), got)
		}
	}
}
