package e2e

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/oauth"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// oauthAccessTTL is the server's access-token lifetime in these tests: short,
// so a second run meets an expired token and must refresh it.
const oauthAccessTTL = 3 * time.Second

// binaryServer runs the real tabbridge binary on a loopback port.
type binaryServer struct {
	URL string
	env *servertest.Env // for the person's API client
}

// startOAuthServer runs `tabbridge serve` (the real binary) with a short
// OAuth access-token lifetime, until the test ends.
func startOAuthServer(t *testing.T) *binaryServer {
	t.Helper()
	base := startServerBinary(t, "--extension-ids", servertest.ExtensionID, "--oauth-access-ttl", oauthAccessTTL.String())
	env := &servertest.Env{URL: base}
	env.Opts.PublicURL = base
	return &binaryServer{URL: base, env: env}
}

// oauthWorld is the binary server, a person with two workspaces (the site
// shared with the one the agent is allowed for), a Go test browser that
// answers the site's read-only tool, and a real Chromium for the consent page.
type oauthE2E struct {
	srv    *binaryServer
	person *servertest.Client
	ws     string
	site   string
	ctx    context.Context // Chromium tab
	signed bool
}

const oauthSite = "https://shop.example"

func newOAuthE2E(t *testing.T, srv *binaryServer) *oauthE2E {
	w := &oauthE2E{srv: srv, site: oauthSite}
	w.person = w.srv.env.Person(t, "alice@example.com")
	w.person.Workspace("Side project")
	w.ws = w.person.Workspace("Shopping")
	w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": w.site, "workspaceId": w.ws}, 201, nil)
	answeringBrowser(t, w.person, w.srv.URL, "oauth-browser", w.site,
		`[{"name":"search","description":"Search","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}]`,
		"results for ")
	w.ctx = startBrowser(t)
	return w
}

// consent does in Chromium what the person does when their agent opens the
// authorization URL: sign in (the first time), read who asks, pick the
// workspace, allow; it returns once the browser reached the client's
// loopback callback.
func (w *oauthE2E) consent(t *testing.T, authURL, wantClient string) {
	w.consentFrom(t, authURL, wantClient, "127.0.0.1")
}

// consentFrom is consent for a client the page should show as from wantHost.
func (w *oauthE2E) consentFrom(t *testing.T, authURL, wantClient, wantHost string) {
	t.Helper()
	w.allow(t, authURL, wantClient, wantHost)
	run(t, w.ctx, "reach the client's callback", chromedp.WaitVisible(chromedp.ID("done")))
}

// allow is consentFrom up to the click on Allow, for a client whose own
// callback page says it is done.
func (w *oauthE2E) allow(t *testing.T, authURL, wantClient, wantHost string) {
	t.Helper()
	run(t, w.ctx, "open the authorization URL in the popup's size", viewport(440, 600, "light"), chromedp.Navigate(authURL))
	if !w.signed {
		run(t, w.ctx, "sign in",
			chromedp.WaitVisible(chromedp.CSS(`form[action="/signin"]`)),
			chromedp.SendKeys(chromedp.ID("email"), "alice@example.com"),
			chromedp.SendKeys(chromedp.ID("password"), "password-alice@example.com"),
			chromedp.Click(chromedp.CSS(`form[action="/signin"] button[type=submit]`)),
		)
		w.signed = true
	}
	run(t, w.ctx, "see the consent page", chromedp.WaitVisible(chromedp.ID("consent-allow")))
	noHorizontalScroll(t, w.ctx, "consent page", 440)
	if name := get(t, w.ctx, "read the client", chromedp.Text(chromedp.ID("consent-client"))); name != wantClient {
		t.Fatalf("consent page names %q, want %q", name, wantClient)
	}
	if host := get(t, w.ctx, "read the host", chromedp.Text(chromedp.ID("consent-host"))); host != wantHost {
		t.Fatalf("consent page shows host %q", host)
	}
	run(t, w.ctx, "pick the workspace and allow",
		chromedp.SetValue(chromedp.ID("consent-workspace"), w.ws),
		chromedp.Click(chromedp.ID("consent-allow")),
	)
}

// mcpChallenge posts to /mcp with token and returns the status and challenge.
func (w *oauthE2E) mcpChallenge(t *testing.T, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", w.srv.URL+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// awaitExpiry waits until the server refuses token (its access TTL passed),
// asking the agent endpoint that takes the same tokens as /mcp.
func (w *oauthE2E) awaitExpiry(t *testing.T, token string) {
	t.Helper()
	testutil.Eventually(t, 10*oauthAccessTTL, func() bool {
		st, _ := w.srv.env.Agent(t, token).Do("GET", "/api/agent/workspace", nil)
		return st == http.StatusUnauthorized
	}, "the access token expires")
}

// revokeInWebApp disconnects the named client on the workspace page.
func (w *oauthE2E) revokeInWebApp(t *testing.T, name string) {
	t.Helper()
	var list struct {
		Clients []struct{ ID, ClientName string } `json:"clients"`
	}
	w.person.MustJSON("GET", "/api/workspaces/"+w.ws+"/clients", nil, 200, &list)
	id := ""
	for _, c := range list.Clients {
		if c.ClientName == name {
			id = c.ID
		}
	}
	if id == "" {
		t.Fatalf("%s is not listed among the workspace's clients: %+v", name, list.Clients)
	}
	run(t, w.ctx, "disconnect the client on the workspace page",
		chromedp.Navigate(w.srv.URL+"/workspaces/"+w.ws),
		chromedp.WaitVisible(chromedp.ID("client-"+id+"-revoke")),
	)
	if listed := get(t, w.ctx, "read the connected apps", chromedp.Text(chromedp.ID("clients"))); !strings.Contains(listed, name) || !strings.Contains(listed, "127.0.0.1") {
		t.Fatalf("connected apps %q", listed)
	}
	run(t, w.ctx, "click Disconnect", chromedp.Click(chromedp.ID("client-"+id+"-revoke")),
		chromedp.WaitNotPresent(chromedp.ID("client-"+id+"-revoke")))
}

type tsRun struct {
	Flows   int      `json:"flows"`
	Tools   []string `json:"tools"`
	Listing struct {
		Sites []struct{ Site string } `json:"sites"`
	} `json:"listing"`
	Result      string `json:"result"`
	IsError     bool   `json:"isError"`
	AccessToken string `json:"accessToken"`
	Authorize   string `json:"authorize"`
}

// tsClient runs oauth.mjs; onAuthorize handles an {"authorize"} line and
// says whether to go on (false kills the client).
func (w *oauthE2E) tsClient(t *testing.T, state string, onAuthorize func(string) bool, extra ...string) *tsRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"oauth.mjs", w.srv.URL, state, w.site, "search", `{"q":"tea"}`}, extra...)...)
	cmd.Dir = repoPath(t, "e2e/mcpclient")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		var r tsRun
		if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
			t.Fatalf("client printed %q: %v", lines.Text(), err)
		}
		if r.Authorize == "" {
			return &r
		}
		if !onAuthorize(r.Authorize) {
			cmd.Process.Kill()
			return nil
		}
	}
	cmd.Wait()
	t.Fatalf("the TypeScript client ended without a result: %s", stderr.String())
	return nil
}

// TestOAuthTypeScriptSDKClient: the TypeScript SDK's OAuth client provider
// (what Claude Code uses) connects with no token: discovery, dynamic
// registration, consent in Chromium, tools; a second run after the access
// token expired refreshes with no browser; disconnecting it in the web app
// makes the next request fail with a challenge that starts the flow again.
func TestOAuthTypeScriptSDKClient(t *testing.T) {
	tsClientDir(t)
	w := newOAuthE2E(t, startOAuthServer(t))
	state := filepath.Join(t.TempDir(), "state.json")
	first := w.tsClient(t, state, func(u string) bool {
		q, _ := url.Parse(u)
		if q.Query().Get("code_challenge_method") != "S256" || q.Query().Get("client_id") == "" {
			t.Errorf("authorization URL %s", u)
		}
		w.consent(t, u, "TypeScript SDK test agent")
		return true
	})
	w.checkRun(t, first, 1)

	w.awaitExpiry(t, first.AccessToken)
	second := w.tsClient(t, state, func(string) bool {
		t.Error("the second run asked the person again instead of refreshing")
		return false
	})
	w.checkRun(t, second, 0)
	if second.AccessToken == first.AccessToken {
		t.Fatal("the second run did not refresh its access token")
	}

	w.revokeInWebApp(t, "TypeScript SDK test agent")
	st, chal := w.mcpChallenge(t, second.AccessToken)
	if st != 401 || !strings.Contains(chal, `resource_metadata="`+w.srv.URL+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("revoked client: %d %q", st, chal)
	}
	restarted := false
	w.tsClient(t, state, func(string) bool { restarted = true; return false })
	if !restarted {
		t.Fatal("after revocation the client did not start the authorization again")
	}
}

func (w *oauthE2E) checkRun(t *testing.T, r *tsRun, flows int) {
	t.Helper()
	if r == nil {
		t.Fatal("no result")
	}
	if r.Flows != flows {
		t.Errorf("the client asked the person %d times, want %d", r.Flows, flows)
	}
	if strings.Join(r.Tools, ",") != "callSiteTool,createTask,getSiteToolDefinition,listSiteTools,listTasks,updateTask" {
		t.Errorf("tools %v", r.Tools)
	}
	if len(r.Listing.Sites) != 1 || r.Listing.Sites[0].Site != w.site {
		t.Errorf("listing %+v", r.Listing)
	}
	if r.IsError || r.Result != `results for {"q":"tea"}` {
		t.Errorf("call: %v %q", r.IsError, r.Result)
	}
	if !strings.HasPrefix(r.AccessToken, "tbo_") {
		t.Errorf("access token %q", r.AccessToken)
	}
}

// callbackServer is a native client's loopback redirect target.
type callbackServer struct {
	URL   string
	codes chan url.Values
}

func newCallback(t *testing.T) *callbackServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cb := &callbackServer{URL: "http://" + ln.Addr().String() + "/callback", codes: make(chan url.Values, 1)}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.WriteString(rw, "<p id=done>Signed in.</p>")
		select {
		case cb.codes <- r.URL.Query():
		default:
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return cb
}

// TestOAuthGoSDKClient: the go-sdk client's authorization-code handler
// connects with no token, the person allowing it in Chromium; a second
// client built from the saved token refreshes it after it expired; revoking
// in the web app makes the next call start the flow again.
func TestOAuthGoSDKClient(t *testing.T) {
	w := newOAuthE2E(t, startOAuthServer(t))
	cb := newCallback(t)
	var mu sync.Mutex
	var saved *oauth2.Token
	var savedCfg *oauth2.Config
	flows := 0
	allow := true
	fetch := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		mu.Lock()
		flows++
		ok := allow
		mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("the person is not asked again in this test")
		}
		w.consent(t, args.URL, "Go SDK agent")
		select {
		case q := <-cb.codes:
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// keep records the newest token the client holds, as a client that
	// stores its tokens between runs does.
	keep := func(ctx context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
		mu.Lock()
		saved, savedCfg = tok, cfg
		mu.Unlock()
		return recording{cfg.TokenSource(ctx, tok), func(t *oauth2.Token) { mu.Lock(); saved = t; mu.Unlock() }}, nil
	}
	connect := func(initial oauth2.TokenSource) (*mcp.ClientSession, error) {
		h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
			DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName: "Go SDK agent", RedirectURIs: []string{cb.URL}, TokenEndpointAuthMethod: "none",
				GrantTypes: []string{"authorization_code", "refresh_token"}}},
			AuthorizationCodeFetcher: fetch, NewTokenSource: keep, InitialTokenSource: initial, RequestRefreshToken: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "go-oauth-e2e", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.srv.URL + "/mcp", OAuthHandler: h, MaxRetries: -1}, nil)
	}
	call := func(cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "callSiteTool", Arguments: map[string]any{"site": w.site, "tool": "search", "arguments": map[string]any{"q": "tea"}}})
	}
	cs, err := connect(nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if res, err := call(cs); err != nil || res.IsError || servertest.ResultText(res) != `results for {"q":"tea"}` {
		t.Fatalf("callSiteTool: %v %+v", err, res)
	}
	cs.Close() // the first run ends; its newest token is what it kept
	mu.Lock()
	first := saved
	mu.Unlock()
	w.awaitExpiry(t, first.AccessToken)

	// A second run, from the saved token: it must refresh, not ask.
	mu.Lock()
	allow = false
	expired := *first
	expired.Expiry = time.Now().Add(-time.Second)
	ts := savedCfg.TokenSource(context.Background(), &expired)
	mu.Unlock()
	cs2, err := connect(ts)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	defer cs2.Close()
	if res, err := call(cs2); err != nil || res.IsError {
		t.Fatalf("second run's call: %v %+v", err, res)
	}
	tok, err := ts.Token()
	if err != nil || tok.AccessToken == first.AccessToken || tok.RefreshToken == first.RefreshToken || flows != 1 {
		t.Fatalf("second run: token %v (err %v), flows %d", tok, err, flows)
	}

	w.revokeInWebApp(t, "Go SDK agent")
	// The newest access token is refused with the challenge that starts the
	// flow again; the client itself, whose token is always within oauth2's
	// refresh margin here, finds out on its refresh, which is refused too.
	mu.Lock()
	newest := saved.AccessToken
	mu.Unlock()
	if st, chal := w.mcpChallenge(t, newest); st != 401 || !strings.Contains(chal, `resource_metadata="`+w.srv.URL+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("revoked client's token: %d %q", st, chal)
	}
	// Its open session ended at once.
	if _, err := call(cs2); err == nil || !strings.Contains(err.Error(), "connection closed") {
		t.Fatalf("a call on the revoked client's session: %v", err)
	}
	// A client still holding the access token meets the challenge, and its
	// handler runs the flow again (refused here by the person).
	if _, err := connect(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: newest, TokenType: "Bearer"})); err == nil {
		t.Fatal("connected with a revoked token")
	}
	mu.Lock()
	defer mu.Unlock()
	if flows < 2 {
		t.Fatalf("after revocation the client ran the flow %d times in all, want it to start again", flows)
	}
}

// recording is a token source that reports every token it hands out.
type recording struct {
	ts   oauth2.TokenSource
	seen func(*oauth2.Token)
}

func (r recording) Token() (*oauth2.Token, error) {
	t, err := r.ts.Token()
	if err == nil {
		r.seen(t)
	}
	return t, err
}

// TestOAuthTypeScriptSDKClientMetadataDocument: the TypeScript SDK client
// identifies itself by a client ID metadata document (the specification's
// preferred way) that the test serves over HTTPS; the server fetches it —
// from the one address the test allows — and the consent page names the
// document's host. The document's loopback redirect URI has no port, and
// matches the client's listener on whatever port it got (RFC 8252 §7.3).
func TestOAuthTypeScriptSDKClientMetadataDocument(t *testing.T) {
	tsClientDir(t)
	var docURL string
	doc := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		json.NewEncoder(rw).Encode(map[string]any{"client_id": docURL, "client_name": "TypeScript SDK (metadata document)",
			"redirect_uris": []string{"http://127.0.0.1/callback"}, "token_endpoint_auth_method": "none",
			"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}})
	}))
	defer doc.Close()
	docURL = doc.URL + "/client.json"
	roots := x509.NewCertPool()
	roots.AddCert(doc.Certificate())
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) {
		o.OAuthMetadata = &oauth.FetcherOptions{AllowAddrs: []string{doc.Listener.Addr().String()}, RootCAs: roots}
	})
	w := newOAuthE2E(t, &binaryServer{URL: env.URL, env: env})
	got := w.tsClient(t, filepath.Join(t.TempDir(), "state.json"), func(u string) bool {
		if q, _ := url.Parse(u); q.Query().Get("client_id") != docURL {
			t.Errorf("the client did not use its metadata document: %s", u)
		}
		w.consentFrom(t, u, "TypeScript SDK (metadata document)", doc.Listener.Addr().String())
		return true
	}, docURL)
	w.checkRun(t, got, 1)
	var list struct {
		Clients []struct{ ClientID string } `json:"clients"`
	}
	w.person.MustJSON("GET", "/api/workspaces/"+w.ws+"/clients", nil, 200, &list)
	if len(list.Clients) != 1 || list.Clients[0].ClientID != docURL {
		t.Fatalf("clients %+v", list.Clients)
	}
}
