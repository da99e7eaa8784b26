package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/live"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

type sseEvent struct {
	typ, data string
	comment   string
}

// stream is an open GET /api/events read by a real HTTP client.
type stream struct {
	resp   *http.Response
	events chan sseEvent
	cancel context.CancelFunc
}

func openStream(t *testing.T, env *servertest.Env, c *servertest.Client, header http.Header) *stream {
	t.Helper()
	return openStreamAt(t, env, c, "/api/events", header)
}

// openStreamAt opens the stream at path (with its query).
func openStreamAt(t *testing.T, env *servertest.Env, c *servertest.Client, path string, header http.Header) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", env.URL+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	hc := *c.HTTP
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{resp: resp, events: make(chan sseEvent, 100), cancel: cancel}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 {
		return s
	}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var e sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e != (sseEvent{}) {
					s.events <- e
				}
				e = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				e.typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, ": "):
				e.comment = strings.TrimPrefix(line, ": ")
			}
		}
	}()
	return s
}

// next returns the next event (skipping comments unless wantComment).
func (s *stream) next(t *testing.T, wantComment bool) sseEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				t.Fatal("stream ended")
			}
			if (e.typ != "") != wantComment {
				return e
			}
		case <-deadline:
			t.Fatal("no event within 10s")
		}
	}
}

// ended waits for the stream to end.
func (s *stream) ended(t *testing.T) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("stream still open after 10s")
		}
	}
}

func TestEventStreamCarriesEveryChangeFromAPIAndPages(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
		alice := env.Person(t, "alice@example.com")
		s := openStream(t, env, alice, nil)
		if s.resp.StatusCode != 200 || s.resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream: %d %q", s.resp.StatusCode, s.resp.Header.Get("Content-Type"))
		}
		if e := s.next(t, true); e.comment != "connected" {
			t.Fatalf("first frame %+v", e)
		}
		bob := env.Person(t, "bob@example.com")
		bob.Workspace("Bob's") // never reaches alice

		expect := func(typ, contains string) {
			t.Helper()
			e := s.next(t, false)
			if e.typ != typ || !strings.Contains(e.data, contains) || !json.Valid([]byte(e.data)) {
				t.Fatalf("got %s %s, want %s containing %q", e.typ, e.data, typ, contains)
			}
		}
		ws := alice.Workspace("Alpha")
		expect("workspace.created", `"name":"Alpha"`)
		alice.MustJSON("PATCH", "/api/workspaces/"+ws, map[string]string{"name": "Beta"}, 200, nil)
		expect("workspace.updated", `"name":"Beta"`)
		secret := alice.AgentToken(ws, "laptop")
		e := s.next(t, false)
		if e.typ != "token.created" || !strings.Contains(e.data, `"name":"laptop"`) || strings.Contains(e.data, secret) {
			t.Fatalf("token.created: %s %s", e.typ, e.data)
		}
		var tok struct {
			Token struct{ ID string } `json:"token"`
		}
		json.Unmarshal([]byte(e.data), &tok)
		alice.MustJSON("DELETE", "/api/workspaces/"+ws+"/tokens/"+tok.Token.ID, nil, 204, nil)
		expect("token.revoked", tok.Token.ID)
		var task struct {
			Task struct{ ID string } `json:"task"`
		}
		alice.MustJSON("POST", "/api/workspaces/"+ws+"/tasks", map[string]string{"title": "T1"}, 201, &task)
		expect("task.created", `"title":"T1"`)
		alice.MustJSON("PATCH", "/api/tasks/"+task.Task.ID, map[string]string{"status": "ongoing"}, 200, nil)
		expect("task.updated", `"status":"ongoing"`)

		// An agent's tasks reach the person's pages too.
		agent := env.MCP(t, alice.AgentToken(ws, "agent"), nil)
		expect("token.created", `"name":"agent"`)
		expect("token.used", `"token":{"id":`) // its first request: the first-run checklist stops waiting
		res := servertest.CallTool(t, agent, "createTask", map[string]any{"title": "From the agent"})
		expect("task.created", `"title":"From the agent"`)
		var agentTask struct{ TaskID string }
		servertest.Structured(t, res, &agentTask)
		servertest.CallTool(t, agent, "updateTask", map[string]any{"taskId": agentTask.TaskID, "status": "blocked"})
		expect("task.updated", `"status":"blocked"`)

		// The page forms publish the same events.
		b := newBrowser(t, env, alice)
		b.post("/workspaces/"+ws+"/rename", url.Values{"name": {"Gamma"}})
		expect("workspace.updated", `"name":"Gamma"`)
		b.post("/workspaces/"+ws+"/tokens", url.Values{"tokenName": {"box"}})
		expect("token.created", `"name":"box"`)
		b.post("/workspaces/"+ws+"/tasks", url.Values{"title": {"T2"}})
		expect("task.created", `"title":"T2"`)
		b.post("/tasks/"+task.Task.ID, url.Values{"status": {"completed"}})
		expect("task.updated", `"status":"completed"`)
		b.post("/workspaces", url.Values{"name": {"Delta"}})
		expect("workspace.created", `"name":"Delta"`)
		b.post("/workspaces/"+ws+"/delete", nil)
		expect("workspace.deleted", ws)
	})
}

func TestEventStreamHeartbeatAndEnds(t *testing.T) {
	defer server.SetEventHeartbeat(20 * time.Millisecond)()
	env := servertest.Start(t, storetest.SQLite, nil)
	alice := env.Person(t, "alice@example.com")
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	alice.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	hub := env.Server.Live()

	s := openStream(t, env, alice, nil)
	s.next(t, true) // connected
	if e := s.next(t, true); e.comment != "heartbeat" {
		t.Fatalf("want a heartbeat, got %+v", e)
	}
	if n := hub.Subscribers(me.User.ID); n != 1 {
		t.Fatalf("%d subscribers, want 1", n)
	}
	// The client going away ends the stream's subscription: the next
	// heartbeat write fails.
	s.cancel()
	s.resp.Body.Close()
	testutil.Eventually(t, testutil.WaitShort, func() bool { return hub.Subscribers(me.User.ID) == 0 }, "subscription outlived its client")

	// Shutdown ends open streams instead of waiting on them.
	s2 := openStream(t, env, alice, nil)
	s2.next(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go env.Server.Shutdown(ctx)
	s2.ended(t)
	testutil.Eventually(t, testutil.WaitShort, func() bool { return hub.Subscribers(me.User.ID) == 0 }, "subscription outlived shutdown")
}

func TestEventStreamRefusesStrangersAndAgentTokens(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice, _, secret := aliceWorld(t, env)
	if s := openStream(t, env, env.NewClient(t), nil); s.resp.StatusCode != 401 {
		t.Fatalf("signed out: %d", s.resp.StatusCode)
	}
	if s := openStream(t, env, alice, http.Header{"Authorization": {"Bearer " + secret}}); s.resp.StatusCode != 401 {
		t.Fatalf("agent token: %d", s.resp.StatusCode)
	}
}

// TestEventStreamRefreshesAnExpiredSession: a browser's EventSource cannot
// refresh first, so the stream does it.
func TestEventStreamRefreshesAnExpiredSession(t *testing.T) {
	var clk clock
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.Now = clk.now })
	alice := env.Person(t, "alice@example.com")
	clk.advance(20 * time.Minute)
	s := openStream(t, env, alice, nil)
	if s.resp.StatusCode != 200 {
		t.Fatalf("stream after access expiry: %d", s.resp.StatusCode)
	}
	alice.MustJSON("GET", "/api/workspaces", nil, 200, nil) // the jar took the new cookies
}

// TestAStreamOpenedLateSaysWhatItsPageMissed: a page carries the mark of
// the person's events as they stood when its request came, and the stream
// it opens with that mark starts with "missed" when anything was published
// for the person in between — an approval asked while the inbox loaded
// would otherwise reach neither the page nor its stream. A mark taken after
// the event, another person's events, and a stream opened without a mark
// start with no "missed".
func TestAStreamOpenedLateSaysWhatItsPageMissed(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.OpenSignup = true })
	alice := env.Person(t, "alice@example.com")
	bob := env.Person(t, "bob@example.com")
	b := newBrowser(t, env, alice)
	markOf := func() string {
		t.Helper()
		p := b.get("/")
		m := regexp.MustCompile(`<body[^>]* data-live-mark="([^"]+)"`).FindStringSubmatch(p.body)
		if p.status != 200 || m == nil {
			t.Fatalf("the inbox page (%d) carries no data-live-mark: %.300s", p.status, p.body)
		}
		return m[1]
	}
	// first is the stream's first event after "connected", with a task
	// created after opening as the event that follows when nothing was missed.
	first := func(path string) sseEvent {
		t.Helper()
		s := openStreamAt(t, env, alice, path, nil)
		if s.resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, s.resp.StatusCode)
		}
		if e := s.next(t, true); e.comment != "connected" {
			t.Fatalf("first frame %+v", e)
		}
		alice.Workspace("After " + path)
		return s.next(t, false)
	}

	before := markOf()
	alice.Workspace("While the page loaded")
	if e := first("/api/events?since=" + url.QueryEscape(before)); e.typ != "missed" {
		t.Fatalf("a stream opened after an event its page missed starts with %s %s, want missed", e.typ, e.data)
	}
	after := markOf()
	bob.Workspace("Bob's") // not alice's
	if e := first("/api/events?since=" + url.QueryEscape(after)); e.typ != "workspace.created" {
		t.Fatalf("a stream whose page missed nothing starts with %s %s, want the next workspace.created", e.typ, e.data)
	}
	if e := first("/api/events"); e.typ != "workspace.created" {
		t.Fatalf("a stream opened without a mark starts with %s %s", e.typ, e.data)
	}
	if e := first("/api/events?since=forged.1"); e.typ != "missed" {
		t.Fatalf("a mark this server never gave starts the stream with %s, want missed (refresh once)", e.typ)
	}
}

// TestAPersonsEventStreamsAreBounded: a person (or a stolen sign-in) opening
// streams without end held a connection, a goroutine and a buffer for each,
// and every event was offered to all of them. Past live.MaxStreams the
// oldest stream ends (its page reconnects, as after being dropped as slow),
// and the rest carry events.
func TestAPersonsEventStreamsAreBounded(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice := env.Person(t, "alice@example.com")
	var streams []*stream
	for range live.MaxStreams + 1 {
		s := openStream(t, env, alice, nil)
		if e := s.next(t, true); e.comment != "connected" {
			t.Fatalf("first frame %+v", e)
		}
		streams = append(streams, s)
	}
	streams[0].ended(t)
	alice.Workspace("Garden")
	for _, s := range streams[1:] {
		if e := s.next(t, false); e.typ != "workspace.created" {
			t.Fatalf("a stream within the bound got %+v", e)
		}
	}
}
