// Package servertest starts a real Tabbridge server on a loopback port for
// tests, on a fresh database of either kind, and gives them clients that act
// as a person (cookie jar and CSRF token) or as an agent (bearer token).
package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// ExtensionID is the extension id test servers trust.
const ExtensionID = "abcdefghijklmnopabcdefghijklmnop"

// Env is a running test server.
type Env struct {
	URL    string // where it listens (may differ from Opts.PublicURL)
	DB     *store.DB
	Server *server.Server
	Opts   server.Options
	// Transport, when set, carries the requests of the clients and agents
	// the Env makes (a proxy's TLS and its address, say); else Go's default.
	Transport http.RoundTripper
}

// Start runs a server on kind's fresh database until the test ends. tweak, if
// not nil, adjusts the options before the server is built.
func Start(t testing.TB, kind storetest.Kind, tweak func(*server.Options)) *Env {
	t.Helper()
	db := storetest.Open(t, kind)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := server.Options{
		PublicURL:             "http://" + ln.Addr().String(),
		DB:                    db,
		Key:                   []byte("test-signing-key-0123456789abcdef"),
		ExtensionIDs:          []string{ExtensionID},
		Logger:                testLogger(),
		AuthAttemptsPerMinute: 10000,
	}
	if tweak != nil {
		tweak(&opts)
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	return &Env{URL: "http://" + ln.Addr().String(), DB: db, Server: srv, Opts: opts}
}

func testLogger() *slog.Logger {
	if os.Getenv("TABBRIDGE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Client speaks HTTP to the test server as a browser would: it keeps cookies
// and sends the CSRF token on every request. While CSRF is the tb_csrf
// cookie's value it follows the cookie, as a page reading it would: signing
// in sets the sign-in's token there. A test that sets CSRF to anything else
// keeps its value.
type Client struct {
	t      testing.TB
	env    *Env
	HTTP   *http.Client
	CSRF   string
	Bearer string // when set, sent as Authorization: Bearer
	Origin string // when set, sent as Origin

	// mu guards CSRF while requests run: concurrent Do calls each read it
	// and follow the cookie into it. A test sets it only between requests.
	mu sync.Mutex
}

// NewClient returns a client with an empty cookie jar and a CSRF token.
func (e *Env) NewClient(t testing.TB) *Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &Client{t: t, env: e, HTTP: &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: e.Transport}}
	var out struct {
		CSRFToken string `json:"csrfToken"`
	}
	c.MustJSON("GET", "/api/auth/csrf", nil, 200, &out)
	c.CSRF = out.CSRFToken
	return c
}

// Person is a client signed in as a new account. The first person on a
// server becomes its owner; later ones sign up openly (the server must have
// OpenSignup) — use Invite for invitation flows.
func (e *Env) Person(t testing.TB, email string) *Client {
	t.Helper()
	c := e.NewClient(t)
	body := map[string]string{"email": email, "name": strings.Split(email, "@")[0], "password": "password-" + email}
	var setup struct {
		NeedsOwner bool `json:"needsOwner"`
	}
	c.MustJSON("GET", "/api/setup", nil, 200, &setup)
	if setup.NeedsOwner {
		c.MustJSON("POST", "/api/setup", body, 201, nil)
	} else {
		c.MustJSON("POST", "/api/auth/signup", body, 201, nil)
	}
	return c
}

// Do sends a request with a JSON body (nil for none; a string or []byte is
// sent raw) and returns the status and body.
func (c *Client) Do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.env.URL+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.mu.Lock()
	csrf := c.CSRF
	c.mu.Unlock()
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	if c.Bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.Bearer)
	}
	if c.Origin != "" {
		req.Header.Set("Origin", c.Origin)
	}
	following := csrf == c.Cookie("tb_csrf")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if now := c.Cookie("tb_csrf"); following && now != "" {
		c.mu.Lock()
		if c.CSRF == csrf {
			c.CSRF = now
		}
		c.mu.Unlock()
	}
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// MustJSON sends a request, fails the test unless the status is want, and
// decodes the answer into out (when not nil).
func (c *Client) MustJSON(method, path string, body any, want int, out any) {
	c.t.Helper()
	status, b := c.Do(method, path, body)
	if status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// Cookie returns the value of a cookie the client holds for the server.
func (c *Client) Cookie(name string) string {
	u, _ := url.Parse(c.env.URL)
	for _, ck := range c.HTTP.Jar.Cookies(u) {
		if ck.Name == name {
			return ck.Value
		}
	}
	return ""
}

// SetCookie replaces a cookie the client holds for the server.
func (c *Client) SetCookie(name, value string) {
	u, _ := url.Parse(c.env.URL)
	c.HTTP.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: "/"}})
}

// ErrorCode extracts the stable code from an error body.
func ErrorCode(body []byte) string {
	code, _ := ErrorOf(body)
	return code
}

// ErrorOf extracts the code and message from an error body.
func ErrorOf(body []byte) (code, message string) {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal(body, &e)
	return e.Error.Code, e.Error.Message
}

// Workspace creates a workspace and returns its id.
func (c *Client) Workspace(name string) string {
	c.t.Helper()
	var out struct {
		Workspace struct {
			ID string `json:"id"`
		} `json:"workspace"`
	}
	c.MustJSON("POST", "/api/workspaces", map[string]string{"name": name}, 201, &out)
	return out.Workspace.ID
}

// AgentToken creates an agent token in a workspace and returns its secret.
func (c *Client) AgentToken(workspaceID, name string) string {
	c.t.Helper()
	var out struct {
		Secret string `json:"secret"`
	}
	c.MustJSON("POST", "/api/workspaces/"+workspaceID+"/tokens", map[string]string{"name": name}, 201, &out)
	return out.Secret
}

// Agent returns a client that authenticates with an agent token only.
func (e *Env) Agent(t testing.TB, token string) *Client {
	jar, _ := cookiejar.New(nil)
	return &Client{t: t, env: e, HTTP: &http.Client{Jar: jar, Timeout: 30 * time.Second}, Bearer: token}
}
