package server_test

import (
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

type ids struct{ workspace, token, task string }

// aliceWorld builds a workspace with a token and a task for a fresh owner.
func aliceWorld(t *testing.T, env *servertest.Env) (*servertest.Client, ids, string) {
	t.Helper()
	alice := env.Person(t, "alice@example.com")
	ws := alice.Workspace("Alice's")
	secret := alice.AgentToken(ws, "laptop")
	var toks struct {
		Tokens []struct {
			ID string `json:"id"`
		} `json:"tokens"`
	}
	alice.MustJSON("GET", "/api/workspaces/"+ws+"/tokens", nil, 200, &toks)
	var task struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	alice.MustJSON("POST", "/api/workspaces/"+ws+"/tasks", map[string]string{"title": "Ship it"}, 201, &task)
	return alice, ids{ws, toks.Tokens[0].ID, task.Task.ID}, secret
}

func TestWorkspaceTokenTaskLifecycle(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		alice, id, secret := aliceWorld(t, env)
		var created struct {
			MCPCommand string `json:"mcpCommand"`
		}
		alice.MustJSON("POST", "/api/workspaces/"+id.workspace+"/tokens", map[string]string{"name": "build box"}, 201, &created)
		want := "claude mcp add --transport http tabbridge-build-box " + env.Opts.PublicURL + "/mcp --header 'Authorization: Bearer tba_"
		if !strings.HasPrefix(created.MCPCommand, want) {
			t.Errorf("mcp command %q, want prefix %q", created.MCPCommand, want)
		}
		// The listing never shows a secret.
		_, body := alice.Do("GET", "/api/workspaces/"+id.workspace+"/tokens", nil)
		if strings.Contains(string(body), secret) || strings.Contains(string(body), "tba_") {
			t.Fatalf("token listing leaks a secret: %s", body)
		}
		alice.MustJSON("PATCH", "/api/workspaces/"+id.workspace, map[string]string{"name": "Renamed"}, 200, nil)
		var task struct {
			Task struct{ Status, Title string } `json:"task"`
		}
		alice.MustJSON("PATCH", "/api/tasks/"+id.task, map[string]string{"status": "ongoing"}, 200, &task)
		if task.Task.Status != "ongoing" || task.Task.Title != "Ship it" {
			t.Fatalf("task after status change: %+v", task.Task)
		}
		if status, body := alice.Do("PATCH", "/api/tasks/"+id.task, map[string]string{"status": "done"}); status != 400 || !strings.Contains(string(body), "notstarted") {
			t.Fatalf("unknown status: %d %s", status, body)
		}
		agent := env.Agent(t, secret)
		agent.MustJSON("GET", "/api/agent/workspace", nil, 200, nil)
		alice.MustJSON("DELETE", "/api/workspaces/"+id.workspace+"/tokens/"+id.token, nil, 204, nil)
		if status, body := agent.Do("GET", "/api/agent/workspace", nil); status != 401 || servertest.ErrorCode(body) != "agent_token_invalid" {
			t.Fatalf("revoked token: %d %s", status, body)
		}
		alice.MustJSON("DELETE", "/api/workspaces/"+id.workspace, nil, 204, nil)
		if status, _ := alice.Do("GET", "/api/tasks/"+id.task, nil); status != 404 {
			t.Fatalf("task outlived its workspace: %d", status)
		}
	})
}

// TestOtherPeopleSeeNotFound walks every endpoint that takes an id of
// Alice's, as Bob: each answers 404 and changes nothing.
func TestOtherPeopleSeeNotFound(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
		alice, id, _ := aliceWorld(t, env)
		bob := env.Person(t, "bob@example.com")
		name := map[string]string{"name": "mine now"}
		cases := []struct {
			method, path string
			body         any
		}{
			{"GET", "/api/workspaces/" + id.workspace, nil},
			{"PATCH", "/api/workspaces/" + id.workspace, name},
			{"DELETE", "/api/workspaces/" + id.workspace, nil},
			{"GET", "/api/workspaces/" + id.workspace + "/tokens", nil},
			{"POST", "/api/workspaces/" + id.workspace + "/tokens", name},
			{"DELETE", "/api/workspaces/" + id.workspace + "/tokens/" + id.token, nil},
			{"GET", "/api/workspaces/" + id.workspace + "/tasks", nil},
			{"POST", "/api/workspaces/" + id.workspace + "/tasks", map[string]string{"title": "x"}},
			{"GET", "/api/tasks/" + id.task, nil},
			{"PATCH", "/api/tasks/" + id.task, map[string]string{"title": "x"}},
		}
		for _, c := range cases {
			status, body := bob.Do(c.method, c.path, c.body)
			if status != 404 || servertest.ErrorCode(body) != "not_found" {
				t.Errorf("bob %s %s: %d %s, want 404 not_found", c.method, c.path, status, body)
			}
		}
		var ws struct {
			Workspaces []struct{ Name string } `json:"workspaces"`
		}
		bob.MustJSON("GET", "/api/workspaces", nil, 200, &ws)
		if len(ws.Workspaces) != 0 {
			t.Errorf("bob lists %d workspaces", len(ws.Workspaces))
		}
		// Nothing of Alice's changed.
		var w struct {
			Workspace struct{ Name string } `json:"workspace"`
		}
		alice.MustJSON("GET", "/api/workspaces/"+id.workspace, nil, 200, &w)
		var toks struct {
			Tokens []any `json:"tokens"`
		}
		alice.MustJSON("GET", "/api/workspaces/"+id.workspace+"/tokens", nil, 200, &toks)
		var task struct {
			Task struct{ Title string } `json:"task"`
		}
		alice.MustJSON("GET", "/api/tasks/"+id.task, nil, 200, &task)
		if w.Workspace.Name != "Alice's" || len(toks.Tokens) != 1 || task.Task.Title != "Ship it" {
			t.Fatalf("alice's data changed: %q, %d tokens, task %q", w.Workspace.Name, len(toks.Tokens), task.Task.Title)
		}
	})
}

func TestAgentTokenRefusedOnPersonEndpoints(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, secret := aliceWorld(t, env)
	agent := env.Agent(t, secret)
	agent.CSRF = alice.CSRF
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/auth/me"}, {"GET", "/api/workspaces"}, {"POST", "/api/workspaces"},
		{"GET", "/api/workspaces/" + id.workspace + "/tokens"}, {"POST", "/api/workspaces/" + id.workspace + "/tokens"},
		{"GET", "/api/tasks/" + id.task}, {"POST", "/api/invitations"},
	} {
		status, body := agent.Do(c.method, c.path, map[string]string{"name": "x"})
		if status != 401 && status != 403 {
			t.Errorf("agent token on %s %s: %d %s", c.method, c.path, status, body)
		}
	}
	// Even with a valid cookie alongside, the bearer token is refused.
	alice.Bearer = secret
	if status, body := alice.Do("GET", "/api/workspaces", nil); status != 401 || servertest.ErrorCode(body) != "agent_token_not_allowed" {
		t.Errorf("cookie plus agent token: %d %s", status, body)
	}
	alice.Bearer = ""
	// And a cookie session is no key to agent endpoints.
	if status, body := alice.Do("GET", "/api/agent/workspace", nil); status != 401 || servertest.ErrorCode(body) != "cookie_not_allowed" {
		t.Errorf("cookie on agent endpoint: %d %s", status, body)
	}
}

func TestCSRFRefusals(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, _ := aliceWorld(t, env)
	csrf := alice.CSRF

	alice.CSRF = ""
	if status, body := alice.Do("POST", "/api/workspaces", map[string]string{"name": "x"}); status != 403 || servertest.ErrorCode(body) != "csrf_token" {
		t.Errorf("no token: %d %s", status, body)
	}
	alice.CSRF = "forged-forged-forged-forged-forged-forged"
	if status, body := alice.Do("DELETE", "/api/workspaces/"+id.workspace, nil); status != 403 || servertest.ErrorCode(body) != "csrf_token" {
		t.Errorf("wrong token: %d %s", status, body)
	}
	alice.CSRF = csrf
	alice.Origin = "https://evil.example"
	if status, body := alice.Do("POST", "/api/workspaces", map[string]string{"name": "x"}); status != 403 || servertest.ErrorCode(body) != "csrf_origin" {
		t.Errorf("foreign origin: %d %s", status, body)
	}
	alice.Origin = "chrome-extension://someotherextensionidxxxxxxxxxxxx"
	if status, body := alice.Do("POST", "/api/workspaces", map[string]string{"name": "x"}); status != 403 {
		t.Errorf("untrusted extension origin: %d %s", status, body)
	}
	// Nothing was created or deleted by the refused requests.
	alice.Origin = ""
	var ws struct {
		Workspaces []any `json:"workspaces"`
	}
	alice.MustJSON("GET", "/api/workspaces", nil, 200, &ws)
	if len(ws.Workspaces) != 1 {
		t.Fatalf("refused requests changed state: %d workspaces", len(ws.Workspaces))
	}
	// The trusted extension passes on its Origin alone, and the server's own origin with the token.
	alice.CSRF = ""
	alice.Origin = "chrome-extension://" + servertest.ExtensionID
	alice.MustJSON("POST", "/api/workspaces", map[string]string{"name": "from the extension"}, 201, nil)
	alice.CSRF = csrf
	alice.Origin = env.Opts.PublicURL
	alice.MustJSON("POST", "/api/workspaces", map[string]string{"name": "from the app"}, 201, nil)
}

func TestBadInputGets400AndChangesNothing(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, id, _ := aliceWorld(t, env)
	long := strings.Repeat("x", 201)
	cases := []struct {
		name, path string
		body       any
		code, says string
	}{
		{"malformed", "/api/workspaces", `{"name": "x"`, "invalid_json", "ends in the middle"},
		{"not json", "/api/workspaces", `name=x`, "invalid_json", "not valid JSON"},
		{"empty", "/api/workspaces", ` `, "empty_body", "empty"},
		{"array", "/api/workspaces", `[1]`, "invalid_json", "must be a JSON object"},
		{"unknown field", "/api/workspaces", `{"name":"x","owner":"bob"}`, "invalid_json", `"owner"`},
		{"wrong type", "/api/workspaces", `{"name":5}`, "invalid_json", `"name" must be a string`},
		{"trailing", "/api/workspaces", `{"name":"x"} {"name":"y"}`, "invalid_json", "exactly one"},
		{"blank", "/api/workspaces", `{"name":"   "}`, "invalid_field", "blank"},
		{"too long", "/api/workspaces", `{"name":"` + long + `"}`, "invalid_field", "201 characters"},
		{"control chars", "/api/workspaces", `{"name":"a\u0007b"}`, "invalid_field", "control"},
		{"oversized", "/api/workspaces", `{"name":"` + strings.Repeat("y", 70000) + `"}`, "body_too_large", "at most"},
		{"task title type", "/api/workspaces/" + id.workspace + "/tasks", `{"title":["x"]}`, "invalid_json", `"title" must be a string`},
		{"task status", "/api/workspaces/" + id.workspace + "/tasks", `{"title":"x","status":"whenever"}`, "invalid_field", "status"},
		{"bad email", "/api/auth/signin", `{"email":1,"password":"x"}`, "invalid_json", `"email"`},
	}
	for _, c := range cases {
		status, body := alice.Do("POST", c.path, c.body)
		code, msg := servertest.ErrorOf(body)
		if status != 400 || code != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %d %s, want 400 %s mentioning %q", c.name, status, body, c.code, c.says)
		}
	}
	var ws struct {
		Workspaces []any `json:"workspaces"`
	}
	alice.MustJSON("GET", "/api/workspaces", nil, 200, &ws)
	var ts struct {
		Tasks []any `json:"tasks"`
	}
	alice.MustJSON("GET", "/api/workspaces/"+id.workspace+"/tasks", nil, 200, &ts)
	if len(ws.Workspaces) != 1 || len(ts.Tasks) != 1 {
		t.Fatalf("bad input changed state: %d workspaces, %d tasks", len(ws.Workspaces), len(ts.Tasks))
	}
	// A body over the transport limit is refused from its Content-Length,
	// before it is read, with the one error shape.
	status, body := rawRequest(t, env.URL, "POST /api/workspaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5242880\r\n\r\n")
	if status != 413 || servertest.ErrorCode(body) != "body_too_large" {
		t.Errorf("huge body: %d %s", status, body)
	}
	if status, body := alice.Do("GET", "/api/nope", nil); status != 404 || servertest.ErrorCode(body) != "no_route" {
		t.Errorf("unknown route: %d %s", status, body)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	c := env.NewClient(t)
	c.MustJSON("GET", "/healthz", nil, 200, nil)
	c.MustJSON("GET", "/readyz", nil, 200, nil)
	env.DB.Close()
	if status, body := c.Do("GET", "/readyz", nil); status != 503 || servertest.ErrorCode(body) != "database_unreachable" {
		t.Fatalf("readyz with the database closed: %d %s", status, body)
	}
	c.MustJSON("GET", "/healthz", nil, 200, nil)
}
