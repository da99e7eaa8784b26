package server_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/tabbridge/tabbridge/oauth"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestOAuthDiscovery checks what a client with no token finds, read with
// the go-sdk's own discovery functions as the oracle.
func TestOAuthDiscovery(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	pub := env.Opts.PublicURL
	resp, err := http.Post(env.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	chal := resp.Header.Get("WWW-Authenticate")
	want := `Bearer resource_metadata="` + pub + `/.well-known/oauth-protected-resource/mcp", scope="mcp"`
	if resp.StatusCode != 401 || chal != want {
		t.Fatalf("unauthenticated /mcp: %d %q, want 401 %q", resp.StatusCode, chal, want)
	}
	cs, err := oauthex.ParseWWWAuthenticate([]string{chal})
	if err != nil || len(cs) != 1 || cs[0].Params["scope"] != "mcp" {
		t.Fatalf("parse challenge: %+v %v", cs, err)
	}
	ctx := context.Background()
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, cs[0].Params["resource_metadata"], pub+"/mcp", http.DefaultClient)
	if err != nil || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != pub {
		t.Fatalf("path-suffixed resource metadata: %+v %v", prm, err)
	}
	root, err := oauthex.GetProtectedResourceMetadata(ctx, pub+"/.well-known/oauth-protected-resource", pub, http.DefaultClient)
	if err != nil || root.AuthorizationServers[0] != pub {
		t.Fatalf("root resource metadata: %+v %v", root, err)
	}
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		asm, err := oauthex.GetAuthServerMeta(ctx, pub+p, pub, http.DefaultClient)
		if err != nil || asm == nil || asm.Issuer != pub || !asm.AuthorizationResponseIssParameterSupported ||
			!asm.ClientIDMetadataDocumentSupported || asm.RegistrationEndpoint != pub+"/oauth/register" ||
			strings.Join(asm.CodeChallengeMethodsSupported, ",") != "S256" {
			t.Fatalf("%s: %+v %v", p, asm, err)
		}
	}
	asm, err := auth.GetAuthServerMetadata(ctx, pub, http.DefaultClient)
	if err != nil || asm.TokenEndpoint != pub+"/oauth/token" {
		t.Fatalf("go-sdk discovery: %+v %v", asm, err)
	}
	// A pasted token that is wrong also gets the challenge, with the error.
	status, _ := env.Agent(t, "tba_forged").Do("POST", "/mcp", `{}`)
	if status != 401 {
		t.Fatalf("forged token: %d", status)
	}
}

// TestOAuthGoSDKClientFlow runs the go-sdk client's authorization-code
// handler against the server with no token: discovery, dynamic
// registration, consent, tools, refresh on every request (the access token
// lives less than the oauth2 package's expiry margin), and revocation.
func TestOAuthGoSDKClientFlow(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OAuthAccessTTL = 5 * time.Second })
		alice := env.Person(t, "alice@example.com")
		ws := alice.Workspace("Alice's")
		events := openStream(t, env, alice, nil)
		cs, agent, err := env.OAuthMCP(t, "", alice.Allow(ws))
		if err != nil {
			t.Fatalf("connect with oauth: %v", err)
		}
		// The workspace page's live region hears of the new connected app.
		created := awaitEvent(t, events, "token.created")
		res := servertest.CallTool(t, cs, "createTask", map[string]any{"title": "From an OAuth agent"})
		if res.IsError {
			t.Fatalf("createTask: %s", servertest.ResultText(res))
		}
		first := agent.LastToken()
		// Each call refreshes (the token is always within oauth2's 10 s
		// margin), so these run on rotated tokens in the same MCP session.
		for i := 0; i < 3; i++ {
			if res := servertest.CallTool(t, cs, "listTasks", map[string]any{}); res.IsError {
				t.Fatalf("listTasks %d: %s", i, servertest.ResultText(res))
			}
		}
		if agent.LastToken() == first || !strings.HasPrefix(first, "tbo_") || agent.Flows() != 1 {
			t.Fatalf("tokens did not rotate (%q then %q) or the flow ran %d times", first, agent.LastToken(), agent.Flows())
		}
		var list struct {
			Clients []struct {
				ID, ClientName, ClientHost string
				LastUsedAt                 *time.Time
			} `json:"clients"`
		}
		alice.MustJSON("GET", "/api/workspaces/"+ws+"/clients", nil, 200, &list)
		if len(list.Clients) != 1 || list.Clients[0].ClientName != "Go SDK test agent" || list.Clients[0].ClientHost != "127.0.0.1" || list.Clients[0].LastUsedAt == nil {
			t.Fatalf("connected clients: %+v", list.Clients)
		}
		if !strings.Contains(created, list.Clients[0].ID) {
			t.Errorf("token.created %s does not name the grant %s", created, list.Clients[0].ID)
		}
		if _, body := alice.Do("GET", "/workspaces/"+ws, nil); !strings.Contains(string(body), "Go SDK test agent") ||
			!strings.Contains(string(body), "claude mcp add --transport http tabbridge "+env.Opts.PublicURL+"/mcp") {
			t.Fatalf("workspace page does not list the client or the command")
		}
		last := agent.LastToken()
		alice.MustJSON("DELETE", "/api/workspaces/"+ws+"/clients/"+list.Clients[0].ID, nil, 204, nil)
		awaitEvent(t, events, "token.revoked")
		// Its MCP session ends at once: the server closes it, and the
		// client sees its event stream end.
		ended := make(chan error, 1)
		go func() { ended <- cs.Wait() }()
		select {
		case <-ended:
		case <-time.After(20 * time.Second):
			t.Fatal("the revoked client's MCP session is still open")
		}
		// The revoked token is refused with a challenge that starts the flow again.
		req, _ := http.NewRequest("POST", env.URL+"/mcp", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+last)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+env.Opts.PublicURL+`/.well-known/oauth-protected-resource/mcp"`) ||
			!strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Fatalf("revoked token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		alice.MustJSON("GET", "/api/workspaces/"+ws+"/clients", nil, 200, &list)
		if len(list.Clients) != 0 {
			t.Fatalf("revoked client still listed: %+v", list.Clients)
		}
	})
}

// oauthWorld is a person, a workspace and a dynamically registered client,
// for driving the endpoints by hand.
type oauthWorld struct {
	env      *servertest.Env
	alice    *servertest.Client
	ws       string
	clientID string
	offset   *atomic.Int64 // added to the server's clock
}

// advance moves the server's clock on.
func (w *oauthWorld) advance(d time.Duration) { w.offset.Add(int64(d)) }

const testRedirect = "http://127.0.0.1:7777/callback"

func newOAuthWorld(t *testing.T, k storetest.Kind) *oauthWorld {
	offset := new(atomic.Int64)
	env := servertest.Start(t, k, func(o *server.Options) {
		o.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})
	w := &oauthWorld{env: env, alice: env.Person(t, "alice@example.com"), offset: offset}
	w.ws = w.alice.Workspace("Alice's")
	reg, err := oauthex.RegisterClient(context.Background(), env.URL+"/oauth/register", &oauthex.ClientRegistrationMetadata{
		ClientName: "Hand client", RedirectURIs: []string{testRedirect}, TokenEndpointAuthMethod: "none"}, http.DefaultClient)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	w.clientID = reg.ClientID
	return w
}

func challengeOf(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

const verifier = "a-code-verifier-that-is-long-enough-0123456789"

// authURL builds an authorization request; set overrides parameters ("" deletes).
func (w *oauthWorld) authURL(set map[string]string) string {
	q := url.Values{"client_id": {w.clientID}, "redirect_uri": {testRedirect}, "response_type": {"code"}, "state": {"st"},
		"code_challenge": {challengeOf(verifier)}, "code_challenge_method": {"S256"}}
	for k, v := range set {
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
	}
	return w.env.URL + "/oauth/authorize?" + q.Encode()
}

// code runs the consent and returns the code.
func (w *oauthWorld) code(t *testing.T, set map[string]string) string {
	t.Helper()
	loc, status, body := w.alice.Consent(w.authURL(set), w.ws, "allow")
	if loc == nil || loc.Query().Get("code") == "" {
		t.Fatalf("consent: %v %d %s", loc, status, body)
	}
	if loc.Query().Get("iss") != w.env.Opts.PublicURL || loc.Query().Get("state") != "st" {
		t.Fatalf("authorization response %v lacks iss %s or state", loc, w.env.Opts.PublicURL)
	}
	return loc.Query().Get("code")
}

type tokenOut struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int    `json:"expires_in"`
	Error        string `json:"error"`
	Description  string `json:"error_description"`
	status       int
}

func (w *oauthWorld) token(t *testing.T, form url.Values) tokenOut {
	t.Helper()
	if form.Get("client_id") == "" {
		form.Set("client_id", w.clientID)
	}
	resp, err := http.PostForm(w.env.URL+"/oauth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out tokenOut
	json.Unmarshal(b, &out)
	out.status = resp.StatusCode
	return out
}

func (w *oauthWorld) exchange(t *testing.T, code, v string) tokenOut {
	return w.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {testRedirect}, "code_verifier": {v}})
}

// mcpStatus is the status of an MCP initialize with a bearer token.
func (w *oauthWorld) mcpStatus(t *testing.T, tok string) int {
	req, _ := http.NewRequest("POST", w.env.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// wantErrorLink checks that a faulty authorization request was shown to the
// person, not redirected (registration is open: a redirect URI is anyone's),
// with a link that takes the error, state and iss back to the client.
func wantErrorLink(t *testing.T, loc *url.URL, status int, body, code string) *url.URL {
	t.Helper()
	m := regexp.MustCompile(`id="error-return" href="([^"]+)"`).FindStringSubmatch(body)
	if loc != nil || status != 400 || m == nil {
		t.Fatalf("want the error shown with a link back, got %v %d %s", loc, status, body)
	}
	back, err := url.Parse(html.UnescapeString(m[1]))
	if err != nil || back.Host != "127.0.0.1:7777" || back.Query().Get("error") != code || back.Query().Get("iss") == "" || back.Query().Get("state") != "st" {
		t.Fatalf("link back %q, want error %s with iss and state", m[1], code)
	}
	return back
}

func wantRedirectError(t *testing.T, loc *url.URL, status int, body, code string) {
	t.Helper()
	if loc == nil || loc.Query().Get("error") != code || loc.Query().Get("iss") == "" {
		t.Fatalf("want redirect with error %s, got %v %d %s", code, loc, status, body)
	}
}

func TestOAuthAuthorizationRequestsAreChecked(t *testing.T) {
	w := newOAuthWorld(t, storetest.SQLite)
	// PKCE missing, or not S256.
	loc, st, body := w.alice.Consent(w.authURL(map[string]string{"code_challenge": "", "code_challenge_method": ""}), w.ws, "allow")
	if back := wantErrorLink(t, loc, st, body, "invalid_request"); !strings.Contains(back.Query().Get("error_description"), "PKCE") {
		t.Errorf("missing PKCE: %q", back.Query().Get("error_description"))
	}
	loc, st, body = w.alice.Consent(w.authURL(map[string]string{"code_challenge_method": "plain"}), w.ws, "allow")
	wantErrorLink(t, loc, st, body, "invalid_request")
	// A resource that is not this server.
	loc, st, body = w.alice.Consent(w.authURL(map[string]string{"resource": "https://elsewhere.example/mcp"}), w.ws, "allow")
	wantErrorLink(t, loc, st, body, "invalid_target")
	// An unregistered redirect URI is never redirected to.
	for _, r := range []string{"https://evil.example/callback", "http://127.0.0.1:7777/other"} {
		loc, st, body = w.alice.Consent(w.authURL(map[string]string{"redirect_uri": r}), w.ws, "allow")
		if loc != nil || st != 400 || !strings.Contains(body, "not one that client") {
			t.Errorf("redirect %s: %v %d", r, loc, st)
		}
	}
	// An unknown client is shown an error, not redirected.
	loc, st, _ = w.alice.Consent(w.authURL(map[string]string{"client_id": "tbcl_unknown"}), w.ws, "allow")
	if loc != nil || st != 401 {
		t.Errorf("unknown client: %v %d", loc, st)
	}
	// A loopback redirect URI matches on any port (RFC 8252 §7.3), and a
	// request without resource (Codex) works.
	loc, st, body = w.alice.Consent(w.authURL(map[string]string{"redirect_uri": "http://127.0.0.1:50123/callback"}), w.ws, "allow")
	if loc == nil || loc.Host != "127.0.0.1:50123" || loc.Query().Get("code") == "" {
		t.Errorf("loopback on another port: %v %d %s", loc, st, body)
	}
	// Denied.
	loc, st, body = w.alice.Consent(w.authURL(nil), w.ws, "deny")
	wantRedirectError(t, loc, st, body, "access_denied")
	// A workspace that is not hers.
	loc, st, _ = w.alice.Consent(w.authURL(nil), "not-a-workspace", "allow")
	if loc != nil || st != 400 {
		t.Errorf("foreign workspace: %v %d", loc, st)
	}
	// The page may be framed by the extension's popup (and nobody else), and
	// its form may lead to this client's redirect URI only.
	resp0, err := w.alice.HTTP.Get(w.authURL(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp0.Body.Close()
	csp := resp0.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-ancestors 'self' chrome-extension://"+servertest.ExtensionID) || !strings.Contains(csp, "form-action 'self' http://127.0.0.1:7777;") {
		t.Errorf("consent page CSP %q", csp)
	}
	// The consent form is CSRF-protected like every form.
	form := url.Values{"client_id": {w.clientID}, "redirect_uri": {testRedirect}, "response_type": {"code"},
		"code_challenge": {challengeOf(verifier)}, "code_challenge_method": {"S256"}, "decision": {"allow"}, "workspace": {w.ws}}
	req, _ := http.NewRequest("POST", w.env.URL+"/oauth/authorize", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	noFollow := *w.alice.HTTP
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("consent without CSRF token: %d", resp.StatusCode)
	}
}

func TestOAuthCodesAndRefreshTokens(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newOAuthWorld(t, k)
		// PKCE: no verifier, a wrong one.
		if out := w.exchange(t, w.code(t, nil), ""); out.status != 400 || out.Error != "invalid_request" {
			t.Errorf("no verifier: %+v", out)
		}
		if out := w.exchange(t, w.code(t, nil), strings.Repeat("x", 43)); out.status != 400 || out.Error != "invalid_grant" || !strings.Contains(out.Description, "PKCE") {
			t.Errorf("wrong verifier: %+v", out)
		}
		// Another client cannot use the code.
		code := w.code(t, nil)
		if out := w.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}, "client_id": {"tbcl_other"}}); out.Error != "invalid_grant" {
			t.Errorf("other client's code: %+v", out)
		}
		// A good exchange; then the code replayed revokes what it gave.
		code = w.code(t, map[string]string{"resource": w.env.Opts.PublicURL + "/mcp"})
		first := w.exchange(t, code, verifier)
		if first.status != 200 || !strings.HasPrefix(first.AccessToken, "tbo_") || !strings.HasPrefix(first.RefreshToken, "tbr_") || first.ExpiresIn != 900 {
			t.Fatalf("exchange: %+v", first)
		}
		if st := w.mcpStatus(t, first.AccessToken); st != 200 {
			t.Fatalf("access token on /mcp: %d", st)
		}
		if out := w.exchange(t, code, verifier); out.Error != "invalid_grant" || !strings.Contains(out.Description, "already used") {
			t.Errorf("replayed code: %+v", out)
		}
		if st := w.mcpStatus(t, first.AccessToken); st != 401 {
			t.Errorf("token of a replayed code still works: %d", st)
		}
		// Refresh rotation, and reuse revoking the family.
		tok := w.exchange(t, w.code(t, nil), verifier)
		next := w.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}})
		if next.status != 200 || next.RefreshToken == tok.RefreshToken || w.mcpStatus(t, next.AccessToken) != 200 {
			t.Fatalf("refresh: %+v", next)
		}
		if out := w.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {next.RefreshToken}, "client_id": {"tbcl_other"}}); out.Error != "invalid_grant" {
			t.Errorf("refresh by another client: %+v", out)
		}
		// Presented again at once (requests that refreshed together), the
		// spent token gets its rotation's answer; after the grace, it is a
		// replay and revokes the grant.
		if again := w.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}); again.AccessToken != next.AccessToken || again.RefreshToken != next.RefreshToken {
			t.Errorf("refresh within the grace: %+v, want the same answer %+v", again, next)
		}
		w.advance(11 * time.Second)
		if out := w.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}); out.Error != "invalid_grant" {
			t.Errorf("reused refresh token: %+v", out)
		}
		if st := w.mcpStatus(t, next.AccessToken); st != 401 {
			t.Errorf("access token after reuse: %d", st)
		}
		if out := w.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {next.RefreshToken}}); out.Error != "invalid_grant" {
			t.Errorf("newest refresh token after reuse: %+v", out)
		}
		// Concurrent refreshes with one token (a client's requests that all
		// saw the access token expire) share one rotation; the grant lives.
		tok = w.exchange(t, w.code(t, nil), verifier)
		answers := make(chan tokenOut, 5)
		for i := 0; i < 5; i++ {
			go func() {
				answers <- w.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}})
			}()
		}
		var shared string
		for i := 0; i < 5; i++ {
			a := <-answers
			if a.status != 200 || (shared != "" && a.AccessToken != shared) {
				t.Fatalf("concurrent refresh %d: %+v", i, a)
			}
			shared = a.AccessToken
		}
		if st := w.mcpStatus(t, shared); st != 200 {
			t.Fatalf("after concurrent refreshes: %d", st)
		}
		// RFC 7009 revocation by the client.
		tok = w.exchange(t, w.code(t, nil), verifier)
		resp, err := http.PostForm(w.env.URL+"/oauth/revoke", url.Values{"token": {tok.RefreshToken}, "client_id": {w.clientID}})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("revoke: %v %v", resp, err)
		}
		resp.Body.Close()
		if st := w.mcpStatus(t, tok.AccessToken); st != 401 {
			t.Errorf("access token after revocation: %d", st)
		}
		// Pasted tokens keep working beside OAuth.
		if st := w.mcpStatus(t, w.alice.AgentToken(w.ws, "pasted")); st != 200 {
			t.Errorf("pasted token: %d", st)
		}
	})
}

// TestOAuthTokenIsBoundToItsWorkspace: a client allowed for one workspace
// cannot reach a site shared with another of the person's workspaces.
func TestOAuthTokenIsBoundToItsWorkspace(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice := env.Person(t, "alice@example.com")
	mine := alice.Workspace("Mine")
	other := alice.Workspace("Other")
	alice.MustJSON("POST", "/api/sites", map[string]string{"origin": shop, "workspaceId": other}, 201, nil)
	cs, _, err := env.OAuthMCP(t, "", alice.Allow(mine))
	if err != nil {
		t.Fatal(err)
	}
	res := servertest.CallTool(t, cs, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
	wantError(t, res, "not shared with this workspace")
	res = servertest.CallTool(t, cs, "listSiteTools", map[string]any{})
	if strings.Contains(servertest.ResultText(res), shop) {
		t.Fatalf("listSiteTools shows another workspace's site: %s", servertest.ResultText(res))
	}
	// The same person's client for the other workspace does see it.
	cs2, _, err := env.OAuthMCP(t, "", alice.Allow(other))
	if err != nil {
		t.Fatal(err)
	}
	if res := servertest.CallTool(t, cs2, "listSiteTools", map[string]any{}); !strings.Contains(servertest.ResultText(res), shop) {
		t.Fatalf("listSiteTools for the site's workspace: %s", servertest.ResultText(res))
	}
}

// TestOAuthClientIDMetadataDocument: the go-sdk client identifies itself by
// a metadata document URL (preferred over registration when the server
// supports it); the server fetches the document from the test's own HTTPS
// server, the one address the test allows.
func TestOAuthClientIDMetadataDocument(t *testing.T) {
	var docURL string
	var hits atomic.Int64
	doc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		json.NewEncoder(w).Encode(map[string]any{"client_id": docURL, "client_name": "Metadata client",
			"redirect_uris": []string{servertest.OAuthRedirect}, "token_endpoint_auth_method": "none",
			"grant_types": []string{"authorization_code", "refresh_token"}})
	}))
	defer doc.Close()
	docURL = doc.URL + "/client.json"
	roots := x509.NewCertPool()
	roots.AddCert(doc.Certificate())
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) {
		o.OAuthMetadata = &oauth.FetcherOptions{AllowAddrs: []string{doc.Listener.Addr().String()}, RootCAs: roots}
	})
	alice := env.Person(t, "alice@example.com")
	ws := alice.Workspace("Alice's")
	var shown string
	cs, _, err := env.OAuthMCP(t, docURL, func(authURL string) (*url.URL, error) {
		if !strings.Contains(authURL, "client_id="+url.QueryEscape(docURL)) {
			t.Errorf("the client did not use its metadata URL: %s", authURL)
		}
		_, body := alice.Do("GET", strings.TrimPrefix(authURL, env.URL), nil)
		shown = string(body)
		return alice.Allow(ws)(authURL)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(shown, "Metadata client") || !strings.Contains(shown, doc.Listener.Addr().String()) {
		t.Fatalf("consent page does not show the client's name and host:\n%s", shown)
	}
	// The document's address is checked, but its redirect is a loopback one, which any app on
	// the computer can listen on while giving this client_id: the page does not call that checked.
	if !strings.Contains(shown, `id="consent-local-claim"`) || strings.Contains(shown, "(checked:") {
		t.Fatalf("consent page vouches for a metadata client whose answer goes to loopback:\n%s", shown)
	}
	if res := servertest.CallTool(t, cs, "listTasks", map[string]any{}); res.IsError {
		t.Fatal(servertest.ResultText(res))
	}
	var list struct {
		Clients []struct{ ClientID, ClientHost string } `json:"clients"`
	}
	alice.MustJSON("GET", "/api/workspaces/"+ws+"/clients", nil, 200, &list)
	if len(list.Clients) != 1 || list.Clients[0].ClientID != docURL || list.Clients[0].ClientHost != doc.Listener.Addr().String() {
		t.Fatalf("clients: %+v", list.Clients)
	}
}

// TestOAuthMetadataURLOnAPrivateAddress: with the default protection (no
// allowance), a client whose metadata URL points at a private address is
// refused on the consent page, and the server never connects to it.
func TestOAuthMetadataURLOnAPrivateAddress(t *testing.T) {
	var hits atomic.Int64
	doc := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer doc.Close()
	env := servertest.Start(t, storetest.SQLite, nil)
	alice := env.Person(t, "alice@example.com")
	ws := alice.Workspace("Alice's")
	_, port, _ := strings.Cut(doc.Listener.Addr().String(), ":")
	for _, id := range []string{doc.URL + "/client.json", "https://localhost:" + port + "/client.json"} {
		q := url.Values{"client_id": {id}, "redirect_uri": {servertest.OAuthRedirect}, "response_type": {"code"},
			"code_challenge": {challengeOf(verifier)}, "code_challenge_method": {"S256"}}
		loc, status, body := alice.Consent(env.URL+"/oauth/authorize?"+q.Encode(), ws, "allow")
		if loc != nil || status != 401 || !strings.Contains(body, "not public") {
			t.Errorf("%s: %v %d %s", id, loc, status, body)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("the server fetched from a private address")
	}
}

// TestOAuthIssuerInTheResponse: the server advertises RFC 9207, so the
// go-sdk client requires the authorization response's iss to be this
// issuer; a response with another or no iss (a mix-up attack) is refused.
func TestOAuthIssuerInTheResponse(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice := env.Person(t, "alice@example.com")
	ws := alice.Workspace("Alice's")
	for name, tamper := range map[string]func(url.Values){
		"another issuer": func(q url.Values) { q.Set("iss", "https://attacker.example") },
		"no issuer":      func(q url.Values) { q.Del("iss") },
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := env.OAuthMCP(t, "", func(u string) (*url.URL, error) {
				loc, err := alice.Allow(ws)(u)
				if err != nil {
					return nil, err
				}
				if loc.Query().Get("iss") != env.Opts.PublicURL {
					t.Errorf("the server sent iss %q", loc.Query().Get("iss"))
				}
				q := loc.Query()
				tamper(q)
				loc.RawQuery = q.Encode()
				return loc, nil
			})
			if err == nil || !strings.Contains(err.Error(), "iss") {
				t.Fatalf("connected with a tampered iss: %v", err)
			}
		})
	}
}

// awaitEvent returns the data of the next event of type typ on the stream.
func awaitEvent(t *testing.T, s *stream, typ string) string {
	t.Helper()
	for {
		if e := s.next(t, false); e.typ == typ {
			return e.data
		}
	}
}

// TestOAuthConsentWithoutAWorkspace: a person who has no workspace yet
// names one on the consent page, and the client acts for it.
func TestOAuthConsentWithoutAWorkspace(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice := env.Person(t, "alice@example.com")
	reg, err := oauthex.RegisterClient(context.Background(), env.URL+"/oauth/register", &oauthex.ClientRegistrationMetadata{
		ClientName: "Codex", RedirectURIs: []string{testRedirect}}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"client_id": {reg.ClientID}, "redirect_uri": {testRedirect}, "response_type": {"code"},
		"code_challenge": {challengeOf(verifier)}, "code_challenge_method": {"S256"}}
	authURL := env.URL + "/oauth/authorize?" + q.Encode()
	if _, body := alice.Do("GET", strings.TrimPrefix(authURL, env.URL), nil); !strings.Contains(string(body), `name="newWorkspace"`) {
		t.Fatalf("no way to name a workspace on the consent page:\n%s", body)
	}
	if loc, st, _ := alice.ConsentForm(authURL, url.Values{"decision": {"allow"}, "newWorkspace": {"  "}}); loc != nil || st != 400 {
		t.Fatalf("blank workspace name: %v %d", loc, st)
	}
	loc, st, body := alice.ConsentForm(authURL, url.Values{"decision": {"allow"}, "newWorkspace": {"Codex on the build box"}})
	if loc == nil || loc.Query().Get("code") == "" {
		t.Fatalf("consent with a new workspace: %v %d %s", loc, st, body)
	}
	var ws struct {
		Workspaces []struct{ ID, Name string } `json:"workspaces"`
	}
	alice.MustJSON("GET", "/api/workspaces", nil, 200, &ws)
	if len(ws.Workspaces) != 1 || ws.Workspaces[0].Name != "Codex on the build box" {
		t.Fatalf("workspaces %+v", ws.Workspaces)
	}
}

// TestOAuthMetadataDocumentsTurnedOff: a server that cannot reach the
// internet turns metadata documents off; the metadata stops offering them,
// URL client ids are refused, and a client that has both registers instead.
func TestOAuthMetadataDocumentsTurnedOff(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.OAuthNoMetadataDocuments = true })
	asm, err := oauthex.GetAuthServerMeta(context.Background(), env.URL+"/.well-known/oauth-authorization-server", env.Opts.PublicURL, http.DefaultClient)
	if err != nil || asm.ClientIDMetadataDocumentSupported {
		t.Fatalf("metadata %+v %v", asm, err)
	}
	alice := env.Person(t, "alice@example.com")
	ws := alice.Workspace("Alice's")
	cs, _, err := env.OAuthMCP(t, "https://client.example/client.json", alice.Allow(ws))
	if err != nil {
		t.Fatal(err)
	}
	if res := servertest.CallTool(t, cs, "listTasks", map[string]any{}); res.IsError {
		t.Fatal(servertest.ResultText(res))
	}
	var list struct {
		Clients []struct{ ClientID string } `json:"clients"`
	}
	alice.MustJSON("GET", "/api/workspaces/"+ws+"/clients", nil, 200, &list)
	if len(list.Clients) != 1 || !strings.HasPrefix(list.Clients[0].ClientID, "tbcl_") {
		t.Fatalf("clients %+v", list.Clients)
	}
	q := url.Values{"client_id": {"https://client.example/client.json"}, "redirect_uri": {servertest.OAuthRedirect}, "response_type": {"code"},
		"code_challenge": {challengeOf(verifier)}, "code_challenge_method": {"S256"}}
	if loc, st, body := alice.Consent(env.URL+"/oauth/authorize?"+q.Encode(), ws, "allow"); loc != nil || st != 401 || !strings.Contains(body, "register") {
		t.Fatalf("URL client id: %v %d %s", loc, st, body)
	}
}
