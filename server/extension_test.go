package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testbin"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store/storetest"
	"github.com/tabbridge/tabbridge/tickets"
)

var extOrigin = bridgetest.Origin(servertest.ExtensionID)

func ticketFor(t testing.TB, c *servertest.Client) string {
	t.Helper()
	var out struct {
		Ticket    string    `json:"ticket"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	c.MustJSON("POST", "/api/tickets", nil, 201, &out)
	if !strings.HasPrefix(out.Ticket, "tbt_") || out.ExpiresAt.IsZero() {
		t.Fatalf("ticket %q expires %v", out.Ticket, out.ExpiresAt)
	}
	return out.Ticket
}

// browser dials the extension socket for c and says hello as browserID.
func extBrowser(t testing.TB, env *servertest.Env, c *servertest.Client, browserID string) (*bridgetest.Browser, *bridgetest.Message) {
	t.Helper()
	return extBrowserWith(t, env, ticketFor(t, c), browserID)
}

// extBrowserWith is extBrowser with a ticket in hand.
func extBrowserWith(t testing.TB, env *servertest.Env, ticket, browserID string) (*bridgetest.Browser, *bridgetest.Message) {
	t.Helper()
	b, resp, err := bridgetest.Dial(context.Background(), env.URL, ticket, extOrigin)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	t.Cleanup(func() { b.Conn.Close() })
	w, err := b.Hello(browserID, "Chrome "+browserID, "1.2.3", testutil.WaitShort)
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	// Right after the welcome the server gives the badge count. A site
	// shared through another instance just before the dial may be pushed
	// again in between, as that instance's signal arrives: the same list
	// the welcome held.
	for {
		m, err := b.Next(testutil.WaitShort)
		if err == nil && m.Type == "sites" && reflect.DeepEqual(m.SharedSites, w.SharedSites) {
			continue
		}
		if err != nil || m.Type != "approvals" {
			t.Fatalf("after the welcome: %+v %v, want the approvals count", m, err)
		}
		return b, w
	}
}

// refused dials and returns the HTTP status and error code of the refusal.
func refused(t *testing.T, env *servertest.Env, ticket, origin string) (int, string) {
	t.Helper()
	b, resp, err := bridgetest.Dial(context.Background(), env.URL, ticket, origin)
	if err == nil {
		b.Conn.Close()
		t.Fatalf("dial with ticket %q origin %q was accepted", ticket, origin)
	}
	if resp == nil {
		t.Fatalf("dial: %v", err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	return resp.StatusCode, servertest.ErrorCode(body.Bytes())
}

func TestExtensionSocketWelcome(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		a := env.Person(t, "a@example.com")
		ws := a.Workspace("Work")
		a.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://App.Example.com:443/", "workspaceId": ws}, 201, nil)
		b, w := extBrowser(t, env, a, "browser-one")
		if w.Protocol != bridge.ProtocolVersion || w.BrowserID != "browser-one" || w.Name != "Chrome browser-one" || w.ID != "h1" {
			t.Fatalf("welcome = %s", w.Raw)
		}
		if len(w.SharedSites) != 1 || w.SharedSites[0].Origin != "https://app.example.com" || w.SharedSites[0].WorkspaceName != "Work" {
			t.Fatalf("welcome sites = %+v", w.SharedSites)
		}
		// The extension enforces what the welcome says, so it must be the
		// server's own numbers (the call timeout the server gives its calls).
		want := bridge.Limits{MaxMessageBytes: 1 << 20, PingSeconds: 20, IdleSeconds: 60, CallTimeoutMs: 60000,
			MaxResultBytes: sitetools.MaxResultBytes, MaxToolsPerSite: sitetools.MaxToolsPerSite,
			MaxDescriptorBytes: sitetools.MaxDescriptorBytes, MaxAnnouncementBytes: sitetools.MaxAnnouncementBytes,
			MaxTitleBytes: sitetools.MaxTitleBytes, MaxDescriptionBytes: sitetools.MaxDescriptionBytes}
		if w.Limits != want {
			t.Fatalf("limits = %+v, want %+v", w.Limits, want)
		}
		if _, err := b.Ping("p1", testutil.WaitShort); err != nil {
			t.Fatal(err)
		}
		var list struct {
			Browsers []struct {
				ID             string     `json:"id"`
				Name           string     `json:"name"`
				Version        string     `json:"version"`
				Connected      bool       `json:"connected"`
				ConnectedSince *time.Time `json:"connectedSince"`
				LastPing       *time.Time `json:"lastPing"`
			} `json:"browsers"`
		}
		a.MustJSON("GET", "/api/browsers", nil, 200, &list)
		if len(list.Browsers) != 1 || !list.Browsers[0].Connected || list.Browsers[0].LastPing == nil ||
			list.Browsers[0].ConnectedSince == nil || list.Browsers[0].Version != "1.2.3" {
			t.Fatalf("browsers = %+v", list)
		}
		b.Close()
	})
}

func TestExtensionSocketRefusals(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		clk := &clock{}
		env := servertest.Start(t, k, func(o *server.Options) { o.Now = clk.now })
		a := env.Person(t, "a@example.com")

		if status, code := refused(t, env, "", extOrigin); status != 401 || code != "ticket_required" {
			t.Errorf("no ticket: %d %s", status, code)
		}
		if status, code := refused(t, env, "tbt_made-up", extOrigin); status != 401 || code != "ticket_invalid" {
			t.Errorf("unknown ticket: %d %s", status, code)
		}
		// Replay: the first use wins, the second is refused.
		tk := ticketFor(t, a)
		b, _, err := bridgetest.Dial(context.Background(), env.URL, tk, extOrigin)
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		if status, code := refused(t, env, tk, extOrigin); status != 401 || code != "ticket_invalid" {
			t.Errorf("replayed ticket: %d %s", status, code)
		}
		// Expired.
		tk = ticketFor(t, a)
		clk.advance(61 * time.Second)
		if status, code := refused(t, env, tk, extOrigin); status != 401 || code != "ticket_invalid" {
			t.Errorf("expired ticket: %d %s", status, code)
		}
		// Foreign: a terminal viewer's ticket does not open the extension socket.
		uid := userIDOf(t, a)
		viewer, _, err := tickets.New(env.DB, nil).Issue(context.Background(), uid, "", tickets.PurposeViewer, "session-1")
		if err != nil {
			t.Fatal(err)
		}
		if status, code := refused(t, env, viewer, extOrigin); status != 401 || code != "ticket_invalid" {
			t.Errorf("viewer ticket: %d %s", status, code)
		}
		// Origins: none, a web page, another extension. The ticket is not spent.
		clk.advance(-61 * time.Second)
		tk = ticketFor(t, a)
		for _, origin := range []string{"", env.URL, "https://evil.example", "chrome-extension://otherextensionidotherextensionid"} {
			if status, code := refused(t, env, tk, origin); status != 403 || code != "origin_not_allowed" {
				t.Errorf("origin %q: %d %s", origin, status, code)
			}
		}
		b, _, err = bridgetest.Dial(context.Background(), env.URL, tk, extOrigin)
		if err != nil {
			t.Fatalf("ticket spent by a refused origin: %v", err)
		}
		b.Close()
		// Not a WebSocket at all.
		status, body := a.Do("GET", "/ws/extension?ticket=x", nil)
		if status != 426 || servertest.ErrorCode(body) != "websocket_required" {
			t.Errorf("plain GET: %d %s", status, body)
		}
	})
}

func TestAnyExtensionSwitch(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.AnyExtension = true })
	a := env.Person(t, "a@example.com")
	b, _, err := bridgetest.Dial(context.Background(), env.URL, ticketFor(t, a), "chrome-extension://someotherid")
	if err != nil {
		t.Fatalf("development switch on: %v", err)
	}
	b.Close()
	if status, code := refused(t, env, ticketFor(t, a), "https://example.com"); status != 403 || code != "origin_not_allowed" {
		t.Errorf("web origin with the switch on: %d %s", status, code)
	}
}

func userIDOf(t *testing.T, c *servertest.Client) string {
	t.Helper()
	var me struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	c.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	return me.User.ID
}

// TestTicketWithExpiredAccess runs the documented flow: an expired access
// token is refused, one refresh, then the ticket, then the socket.
func TestTicketWithExpiredAccess(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		clk := &clock{}
		env := servertest.Start(t, k, func(o *server.Options) { o.Now = clk.now })
		a := env.Person(t, "a@example.com")
		clk.advance(16 * time.Minute)
		a.Origin = extOrigin // as the service worker sends it
		status, body := a.Do("POST", "/api/tickets", nil)
		if status != 401 || servertest.ErrorCode(body) != "access_expired" {
			t.Fatalf("ticket with an expired access token: %d %s", status, body)
		}
		a.MustJSON("POST", "/api/auth/refresh", nil, 200, nil)
		extBrowser(t, env, a, "after-refresh")
	})
}

func TestTicketEndpointChecks(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	a := env.Person(t, "a@example.com")
	if status, body := a.Do("POST", "/api/tickets", map[string]string{"purpose": "viewer"}); status != 400 || servertest.ErrorCode(body) != "invalid_field" {
		t.Errorf("viewer purpose: %d %s", status, body)
	}
	var out struct {
		Ticket    string    `json:"ticket"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	a.MustJSON("POST", "/api/tickets", map[string]string{"purpose": "extension"}, 201, &out)
	if left := time.Until(out.ExpiresAt); left > tickets.TTL+time.Second || left < tickets.TTL-10*time.Second || len(out.Ticket) < 32 {
		t.Errorf("ticket %q valid for %v", out.Ticket, left)
	}
	anon := env.NewClient(t)
	if status, body := anon.Do("POST", "/api/tickets", nil); status != 401 || servertest.ErrorCode(body) != "signed_out" {
		t.Errorf("signed out: %d %s", status, body)
	}
	csrf := a.CSRF
	a.CSRF = ""
	if status, _ := a.Do("POST", "/api/tickets", nil); status != 403 {
		t.Errorf("no CSRF token: %d", status)
	}
	a.CSRF = csrf
}

func TestPingKeepsAliveAndSilenceCloses(t *testing.T) {
	idle := time.Second // pings at a third of it keep a margin on a loaded machine
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.Bridge.Idle = idle })
	a := env.Person(t, "a@example.com")
	b, _ := extBrowser(t, env, a, "pinger-01")
	// Pinging at a third of the idle timeout for three timeouts keeps it open.
	tick := time.NewTicker(idle / 3)
	defer tick.Stop()
	end := time.Now().Add(3 * idle)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		if _, err := b.Ping(fmt.Sprint("k", i), testutil.WaitShort); err != nil {
			t.Fatalf("ping %d after %v: %v", i, time.Since(end.Add(-3*idle)), err)
		}
	}
	start := time.Now()
	code, reason, err := b.Closed(testutil.WaitShort)
	if err != nil || code != bridge.CloseIdle {
		t.Fatalf("silent socket: code %d %q, %v", code, reason, err)
	}
	if took := time.Since(start); took < idle-50*time.Millisecond {
		t.Fatalf("closed after %v of silence, before the %v timeout", took, idle)
	}
}

// connectedIDs lists the ids of the person's connected browsers.
func connectedIDs(env *servertest.Env, c *servertest.Client, t *testing.T) []string {
	var ids []string
	for _, b := range env.Server.Hub().Connected(userIDOf(t, c)) {
		ids = append(ids, b.BrowserID)
	}
	return ids
}

func TestShareReachesEveryBrowserOfThePersonOnly(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
		a := env.Person(t, "a@example.com")
		bob := env.Person(t, "b@example.com")
		home, work := a.Workspace("Home"), a.Workspace("Work")
		laptop, _ := extBrowser(t, env, a, "laptop-01")
		desktop, _ := extBrowser(t, env, a, "desktop-01")
		other, _ := extBrowser(t, env, bob, "laptop-01") // the same id, another person

		var shared struct {
			Site struct {
				ID          string `json:"id"`
				Origin      string `json:"origin"`
				WorkspaceID string `json:"workspaceId"`
			} `json:"site"`
			Moved bool `json:"moved"`
		}
		a.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://mail.example.com", "workspaceId": home}, 201, &shared)
		for _, b := range []*bridgetest.Browser{laptop, desktop} {
			m, err := b.Expect(bridge.TypeSites, testutil.WaitShort)
			if err != nil || len(m.SharedSites) != 1 || m.SharedSites[0].Origin != "https://mail.example.com" || m.SharedSites[0].WorkspaceID != home {
				t.Fatalf("%s: %v %+v", b.ID, err, m)
			}
		}
		// Sharing it with another workspace moves it, and says so.
		a.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://MAIL.example.com/", "workspaceId": work}, 200, &shared)
		if !shared.Moved || shared.Site.WorkspaceID != work {
			t.Fatalf("move: %+v", shared)
		}
		for _, b := range []*bridgetest.Browser{laptop, desktop} {
			m, err := b.Expect(bridge.TypeSites, testutil.WaitShort)
			if err != nil || len(m.SharedSites) != 1 || m.SharedSites[0].WorkspaceID != work || m.SharedSites[0].WorkspaceName != "Work" {
				t.Fatalf("%s after move: %v %+v", b.ID, err, m)
			}
		}
		// Stopping sharing pushes the empty list.
		if status, body := a.Do("DELETE", "/api/sites/"+shared.Site.ID, nil); status != 204 {
			t.Fatalf("unshare: %d %s", status, body)
		}
		for _, b := range []*bridgetest.Browser{laptop, desktop} {
			if m, err := b.Expect(bridge.TypeSites, testutil.WaitShort); err != nil || len(m.SharedSites) != 0 {
				t.Fatalf("%s after unshare: %v %+v", b.ID, err, m)
			}
		}
		// Bob's browser got none of it: the first thing it reads is its pong.
		m, err := other.Next(0)
		if err == nil {
			t.Fatalf("bob's browser received %s", m.Raw)
		}
		other2, w := extBrowser(t, env, bob, "laptop-02")
		if len(w.SharedSites) != 0 {
			t.Fatalf("bob's welcome lists a's sites: %+v", w.SharedSites)
		}
		if _, err := other2.Ping("x", testutil.WaitShort); err != nil {
			t.Fatal(err)
		}
		// Bob cannot see or remove a's sites or browsers.
		var bobs struct {
			Sites    []any `json:"sites"`
			Browsers []struct {
				ID string `json:"id"`
			} `json:"browsers"`
		}
		bob.MustJSON("GET", "/api/sites", nil, 200, &bobs)
		bob.MustJSON("GET", "/api/browsers", nil, 200, &bobs)
		if len(bobs.Sites) != 0 || len(bobs.Browsers) != 2 {
			t.Fatalf("bob sees %+v", bobs)
		}
		if status, body := bob.Do("POST", "/api/sites", map[string]string{"origin": "https://x.example", "workspaceId": home}); status != 404 || servertest.ErrorCode(body) != "not_found" {
			t.Fatalf("share into another's workspace: %d %s", status, body)
		}
		if status, _ := bob.Do("PATCH", "/api/browsers/desktop-01", map[string]string{"name": "mine"}); status != 404 {
			t.Fatalf("rename another's browser: %d", status)
		}
	})
}

// TestBobSeesNothingOfAlice is the stricter form of "a second person's
// browser receives nothing": Bob's socket reads only its own pong while Alice
// shares, moves and unshares.
func TestBobSeesNothingOfAlice(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.OpenSignup = true })
	alice := env.Person(t, "alice@example.com")
	bob := env.Person(t, "bob@example.com")
	ws := alice.Workspace("W")
	bb, _ := extBrowser(t, env, bob, "bob-browser")
	ab, _ := extBrowser(t, env, alice, "alice-browser")
	var out struct {
		Site struct {
			ID string `json:"id"`
		} `json:"site"`
	}
	alice.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://a.example", "workspaceId": ws}, 201, &out)
	alice.Do("DELETE", "/api/sites/"+out.Site.ID, nil)
	if _, err := ab.Expect(bridge.TypeSites, testutil.WaitShort); err != nil {
		t.Fatal(err)
	}
	if err := bb.Send(map[string]string{"type": "ping", "id": "only"}); err != nil {
		t.Fatal(err)
	}
	m, err := bb.Next(testutil.WaitShort)
	if err != nil || m.Type != bridge.TypePong || m.ID != "only" {
		t.Fatalf("bob's first message: %v %+v", err, m)
	}
}

func TestAgentTokenRefusedOnSharingEndpoints(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	a := env.Person(t, "a@example.com")
	ws := a.Workspace("W")
	token := a.AgentToken(ws, "bot")
	plain := env.Agent(t, token)
	// Even with a valid CSRF pair the agent token is refused.
	withCSRF := env.NewClient(t)
	withCSRF.Bearer = token
	for _, r := range []struct{ method, path string }{
		{"POST", "/api/sites"}, {"GET", "/api/sites"}, {"DELETE", "/api/sites/x"},
		{"POST", "/api/tickets"}, {"GET", "/api/browsers"}, {"PATCH", "/api/browsers/x"},
	} {
		body := map[string]string{"origin": "https://a.example", "workspaceId": ws}
		if status, _ := plain.Do(r.method, r.path, body); status != 401 && status != 403 {
			t.Errorf("%s %s with an agent token: %d", r.method, r.path, status)
		}
		status, resp := withCSRF.Do(r.method, r.path, body)
		if status != 401 || servertest.ErrorCode(resp) != "agent_token_not_allowed" {
			t.Errorf("%s %s with an agent token and CSRF token: %d %s", r.method, r.path, status, resp)
		}
	}
	var sites struct{ Sites []any }
	a.MustJSON("GET", "/api/sites", nil, 200, &sites)
	if len(sites.Sites) != 0 {
		t.Fatal("an agent token shared a site")
	}
}

func TestShareRefusesWhatIsNotAnOrigin(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	a := env.Person(t, "a@example.com")
	ws := a.Workspace("W")
	for _, origin := range []string{"chrome://extensions", "file:///etc/passwd", "https://a.example/path", "https://a.example/?q", "example.com", ""} {
		status, body := a.Do("POST", "/api/sites", map[string]string{"origin": origin, "workspaceId": ws})
		if status != 400 || servertest.ErrorCode(body) != "invalid_origin" {
			t.Errorf("origin %q: %d %s", origin, status, body)
		}
	}
	if status, body := a.Do("POST", "/api/sites", map[string]string{"origin": "https://a.example"}); status != 400 {
		t.Errorf("no workspace: %d %s", status, body)
	}
	if status, _ := a.Do("POST", "/api/sites", map[string]string{"origin": "https://a.example", "workspaceId": "nope"}); status != 404 {
		t.Errorf("unknown workspace: %d", status)
	}
	if status, _ := a.Do("DELETE", "/api/sites/nope", nil); status != 404 {
		t.Errorf("unshare unknown: %d", status)
	}
}

func TestDeletingAWorkspacePushesItsSitesAway(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	a := env.Person(t, "a@example.com")
	ws := a.Workspace("W")
	a.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://a.example", "workspaceId": ws}, 201, nil)
	b, _ := extBrowser(t, env, a, "browser-1")
	a.MustJSON("DELETE", "/api/workspaces/"+ws, nil, 204, nil)
	if m, err := b.Expect(bridge.TypeSites, testutil.WaitShort); err != nil || len(m.SharedSites) != 0 {
		t.Fatalf("after deleting the workspace: %v %+v", err, m)
	}
}

func TestMalformedFrames(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.Bridge.MaxMessage = 4096 })
	a := env.Person(t, "a@example.com")
	ws := a.Workspace("W")
	a.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://shared.example", "workspaceId": ws}, 201, nil)
	b, _ := extBrowser(t, env, a, "malformed-1")

	for _, c := range []struct{ frame, code, ref string }{
		{`not json`, bridge.ErrCodeInvalidMessage, ""},
		{`{"type":"ping",`, bridge.ErrCodeInvalidJSON, ""},
		{`[1,2]`, bridge.ErrCodeInvalidMessage, ""},
		{`{"id":"m1"}`, bridge.ErrCodeInvalidMessage, "m1"},
		{`{"type":"launch","id":"m2"}`, bridge.ErrCodeUnknownType, "m2"},
		{`{"type":7}`, bridge.ErrCodeInvalidJSON, ""},
		{`{"type":"sites.open","id":"m3"}`, bridge.ErrCodeInvalidField, "m3"},
		{`{"type":"sites.open","id":"m4","sites":[{"origin":"chrome://settings","lastUsed":1}]}`, bridge.ErrCodeInvalidField, "m4"},
		{`{"type":"sites.open","id":"m5","sites":[{"origin":"https://other.example","lastUsed":1}]}`, bridge.ErrCodeSiteNotShared, "m5"},
		{`{"type":"sites.open","id":"m6","sites":[{"origin":"https://shared.example","lastUsed":"x"}]}`, bridge.ErrCodeInvalidField, "m6"},
		{`{"type":"hello","id":"m7","protocol":1,"browserId":"malformed-1","name":"x","version":"1"}`, bridge.ErrCodeHelloRepeated, "m7"},
		{`{"type":"ping","id":123}`, bridge.ErrCodeInvalidField, ""},
		{"\xff\xfe", bridge.ErrCodeInvalidJSON, ""},
	} {
		if err := b.SendRaw(websocket.TextMessage, []byte(c.frame)); err != nil {
			t.Fatal(err)
		}
		m, err := b.Expect(bridge.TypeError, testutil.WaitShort)
		if err != nil || m.Code != c.code || m.Ref != c.ref || m.Message == "" {
			t.Errorf("%s: %v %+v", c.frame, err, m)
		}
	}
	// Still alive after all that.
	if _, err := b.Ping("alive", testutil.WaitShort); err != nil {
		t.Fatal(err)
	}
	// A binary frame closes with 1003.
	b.SendRaw(websocket.BinaryMessage, []byte{1, 2, 3})
	if code, _, err := b.Closed(testutil.WaitShort); err != nil || code != bridge.CloseUnsupportedData {
		t.Fatalf("binary frame: %d %v", code, err)
	}
	// Oversized: 1009.
	big, _ := extBrowser(t, env, a, "malformed-2")
	big.SendRaw(websocket.TextMessage, []byte(`{"type":"ping","pad":"`+strings.Repeat("x", 5000)+`"}`))
	if code, _, err := big.Closed(testutil.WaitShort); err != nil || code != bridge.CloseTooBig {
		t.Fatalf("oversized frame: %d %v", code, err)
	}
}

func TestHelloIsRequiredAndChecked(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	a := env.Person(t, "a@example.com")
	for _, c := range []struct {
		frame     string
		errCode   string
		closeCode int
	}{
		{`{"type":"ping","id":"p"}`, bridge.ErrCodeHelloExpected, bridge.CloseHelloExpected},
		{`garbage`, bridge.ErrCodeInvalidMessage, bridge.CloseHelloExpected},
		{`{"type":"hello","protocol":1,"browserId":"short","name":"x","version":"1"}`, bridge.ErrCodeInvalidField, bridge.CloseHelloExpected},
		{`{"type":"hello","protocol":1,"browserId":"good-browser","name":"","version":"1"}`, bridge.ErrCodeInvalidField, bridge.CloseHelloExpected},
		{`{"type":"hello","protocol":1,"browserId":"good-browser","name":"` + strings.Repeat("n", 101) + `","version":"1"}`, bridge.ErrCodeInvalidField, bridge.CloseHelloExpected},
		{`{"type":"hello","protocol":1,"browserId":"good-browser","name":"x","version":"1 2"}`, bridge.ErrCodeInvalidField, bridge.CloseHelloExpected},
		{`{"type":"hello","browserId":"good-browser","name":"x","version":"1"}`, bridge.ErrCodeInvalidField, bridge.CloseHelloExpected},
		{`{"type":"hello","protocol":9,"minProtocol":2,"browserId":"good-browser","name":"x","version":"1"}`, bridge.ErrCodeUnsupported, bridge.CloseUnsupportedProtocol},
	} {
		b, _, err := bridgetest.Dial(context.Background(), env.URL, ticketFor(t, a), extOrigin)
		if err != nil {
			t.Fatal(err)
		}
		b.SendRaw(websocket.TextMessage, []byte(c.frame))
		m, err := b.Next(testutil.WaitShort)
		if err != nil || m.Type != bridge.TypeError || m.Code != c.errCode {
			t.Errorf("%s: %v %+v", c.frame, err, m)
		}
		if code, _, err := b.Closed(testutil.WaitShort); err != nil || code != c.closeCode {
			t.Errorf("%s: closed %d %v", c.frame, code, err)
		}
		b.Conn.Close()
	}
	// A newer extension that still speaks 1 is welcomed in 1.
	b, _, err := bridgetest.Dial(context.Background(), env.URL, ticketFor(t, a), extOrigin)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.Send(map[string]any{"type": "hello", "protocol": 3, "minProtocol": 1, "browserId": "newer-browser", "name": "N", "version": "9.0.0", "future": true})
	if m, err := b.Next(testutil.WaitShort); err != nil || m.Type != bridge.TypeWelcome || m.Protocol != 1 {
		t.Fatalf("newer extension: %v %+v", err, m)
	}
}

func TestReconnectReplacesAndRenameSticks(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		a := env.Person(t, "a@example.com")
		old, _ := extBrowser(t, env, a, "same-browser")
		fresh, _ := extBrowser(t, env, a, "same-browser")
		if code, _, err := old.Closed(testutil.WaitShort); err != nil || code != bridge.CloseReplaced {
			t.Fatalf("replaced socket: %d %v", code, err)
		}
		if ids := connectedIDs(env, a, t); len(ids) != 1 || ids[0] != "same-browser" {
			t.Fatalf("connected = %v", ids)
		}
		if _, err := fresh.Ping("still", testutil.WaitShort); err != nil {
			t.Fatal(err)
		}
		var out struct {
			Browser struct {
				Name string `json:"name"`
			} `json:"browser"`
		}
		a.MustJSON("PATCH", "/api/browsers/same-browser", map[string]string{"name": "  Work laptop "}, 200, &out)
		if out.Browser.Name != "Work laptop" {
			t.Fatalf("rename: %+v", out)
		}
		if m, err := fresh.Expect(bridge.TypeBrowser, testutil.WaitShort); err != nil || m.Name != "Work laptop" {
			t.Fatalf("rename push: %v %+v", err, m)
		}
		if status, body := a.Do("PATCH", "/api/browsers/same-browser", map[string]string{"name": "bad\x07"}); status != 400 {
			t.Fatalf("control characters: %d %s", status, body)
		}
		fresh.Close()
		// The name survives a reconnect that suggests another.
		_, w := extBrowser(t, env, a, "same-browser")
		if w.Name != "Work laptop" {
			t.Fatalf("name after reconnect = %q", w.Name)
		}
	})
}

func TestOpenSitesAreRecorded(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	a := env.Person(t, "a@example.com")
	ws := a.Workspace("W")
	a.MustJSON("POST", "/api/sites", map[string]string{"origin": "https://a.example", "workspaceId": ws}, 201, nil)
	one, _ := extBrowser(t, env, a, "browser-1")
	two, _ := extBrowser(t, env, a, "browser-2")
	now := time.Now()
	one.Send(map[string]any{"type": "sites.open", "id": "o1", "sites": []map[string]any{{"origin": "https://A.example:443", "lastUsed": now.Add(-time.Minute).UnixMilli(), "tabs": 2}}})
	two.Send(map[string]any{"type": "sites.open", "id": "o2", "sites": []map[string]any{{"origin": "https://a.example", "lastUsed": now.UnixMilli(), "tabs": 1}}})
	// A ping answered means the sites.open before it was handled.
	one.Ping("sync", testutil.WaitShort)
	two.Ping("sync", testutil.WaitShort)
	id, used, ok := env.Server.Hub().Pick(userIDOf(t, a), "https://a.example")
	if !ok || id != "browser-2" || used.UnixMilli() != now.UnixMilli() {
		t.Fatalf("pick = %s %v %v", id, used, ok)
	}
	var sites struct {
		Sites []struct {
			Origin string `json:"origin"`
			OpenIn []struct {
				BrowserID string `json:"browserId"`
				Tabs      int    `json:"tabs"`
			} `json:"openIn"`
		} `json:"sites"`
	}
	a.MustJSON("GET", "/api/sites", nil, 200, &sites)
	if len(sites.Sites) != 1 || len(sites.Sites[0].OpenIn) != 2 {
		t.Fatalf("sites = %+v", sites)
	}
}

func TestSlowConsumerIsClosedWithoutBlockingOthers(t *testing.T) {
	logs := testbin.NewLog() // read while the server writes
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) {
		o.Bridge.QueueSize = 4
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	a := env.Person(t, "a@example.com")
	slow, _ := extBrowser(t, env, a, "slow-reader")
	fast, _ := extBrowser(t, env, a, "fast-reader")
	uid := userIDOf(t, a)
	hub := env.Server.Hub()

	// The slow browser never reads. Sends to it never block: they fill the
	// socket buffers, then the queue, and then it is closed.
	payload := map[string]string{"type": "test.bulk", "data": strings.Repeat("x", 64<<10)}
	start := time.Now()
	var err error
	for i := 0; i < 2000 && err == nil; i++ {
		err = hub.Send(uid, "slow-reader", payload)
	}
	if !errors.Is(err, bridge.ErrNotConnected) {
		t.Fatalf("2000 sends of 64 KiB to a browser that does not read: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("sending to a slow consumer blocked for %v", took)
	}
	// The other browser is unaffected, during and after.
	if _, err := fast.Ping("during", testutil.WaitShort); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testutil.WaitShort)
	for {
		ids := connectedIDs(env, a, t)
		if len(ids) == 1 && ids[0] == "fast-reader" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow consumer still connected: %v", ids)
		}
		if _, err := fast.Ping("poll", testutil.WaitShort); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(logs.String(), "slow consumer") || !strings.Contains(logs.String(), "slow-reader") {
		t.Fatalf("slow consumer not logged:\n%s", logs)
	}
	slow.Conn.Close()
}

func TestShutdownClosesEverySocket(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	a := env.Person(t, "a@example.com")
	var bs []*bridgetest.Browser
	for i := 0; i < 5; i++ {
		b, _ := extBrowser(t, env, a, fmt.Sprintf("browser-%d", i))
		bs = append(bs, b)
	}
	// One socket that never said hello is closed too.
	pending, _, err := bridgetest.Dial(context.Background(), env.URL, ticketFor(t, a), extOrigin)
	if err != nil {
		t.Fatal(err)
	}
	bs = append(bs, pending)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitShort)
		defer cancel()
		done <- env.Server.Shutdown(ctx)
	}()
	for _, b := range bs {
		if code, _, err := b.Closed(testutil.WaitShort); err != nil || code != bridge.CloseGoingAway {
			t.Errorf("at shutdown: %d %v", code, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(env.Server.Hub().Connected(userIDOf2(env))); n != 0 {
		t.Fatalf("%d browsers still connected after shutdown", n)
	}
}

func userIDOf2(env *servertest.Env) string {
	var id string
	env.DB.Table("users").Select("id").Limit(1).Scan(&id)
	return id
}

// TestOneTicketOpensOneSocket dials 20 sockets at once with one ticket: the
// redeem is one atomic statement, so exactly one is admitted.
func TestOneTicketOpensOneSocket(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		a := env.Person(t, "a@example.com")
		tk := ticketFor(t, a)
		var wg sync.WaitGroup
		var mu sync.Mutex
		admitted, refusedN := 0, 0
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, resp, err := bridgetest.Dial(context.Background(), env.URL, tk, extOrigin)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					admitted++
					b.Close()
				case resp != nil && resp.StatusCode == 401:
					refusedN++
				default:
					t.Errorf("dial: %v", err)
				}
			}()
		}
		wg.Wait()
		if admitted != 1 || refusedN != 19 {
			t.Fatalf("one ticket, 20 dials: %d admitted, %d refused", admitted, refusedN)
		}
	})
}
