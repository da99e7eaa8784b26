package servertest

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// Consent opens an authorization URL as this signed-in person and answers
// the consent form as they would: decision "allow" (for workspaceID) or
// "deny". It returns where the server redirects the browser, or the status
// and body of a page that did not redirect (an error shown to the person).
func (c *Client) Consent(authURL, workspaceID, decision string) (*url.URL, int, string) {
	c.t.Helper()
	return c.ConsentForm(authURL, url.Values{"decision": {decision}, "workspace": {workspaceID}})
}

// ConsentForm is Consent with the answer's fields given whole (decision,
// workspace or newWorkspace).
func (c *Client) ConsentForm(authURL string, answer url.Values) (*url.URL, int, string) {
	c.t.Helper()
	noFollow := *c.HTTP
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Get(authURL)
	if err != nil {
		c.t.Fatalf("open consent page: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode == http.StatusSeeOther {
		u, _ := url.Parse(loc)
		return u, resp.StatusCode, ""
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, string(body)
	}
	form := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(string(body), -1) {
		form.Set(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	for k, v := range answer {
		form[k] = v
	}
	u, _ := url.Parse(authURL)
	req, _ := http.NewRequest("POST", u.Scheme+"://"+u.Host+"/oauth/authorize", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = noFollow.Do(req)
	if err != nil {
		c.t.Fatalf("answer consent page: %v", err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, resp.StatusCode, string(body)
	}
	loc, _ := url.Parse(resp.Header.Get("Location"))
	return loc, resp.StatusCode, ""
}

// OAuthAgent is a go-sdk MCP client that authorizes itself with the
// SDK's authorization-code handler, as a real client does with no token.
type OAuthAgent struct {
	Handler *auth.AuthorizationCodeHandler
	// Flows counts how often the handler asked the person (via Answer).
	mu    sync.Mutex
	flows int
	last  string // the last bearer token sent to /mcp
}

// Flows is how many times the authorization flow ran.
func (a *OAuthAgent) Flows() int { a.mu.Lock(); defer a.mu.Unlock(); return a.flows }

// LastToken is the last access token the client sent.
func (a *OAuthAgent) LastToken() string { a.mu.Lock(); defer a.mu.Unlock(); return a.last }

type recordBearer struct {
	a    *OAuthAgent
	next http.RoundTripper
}

func (r recordBearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok {
		r.a.mu.Lock()
		r.a.last = tok
		r.a.mu.Unlock()
	}
	return r.next.RoundTrip(req)
}

// OAuthRedirect is the test clients' redirect URI. It is never dialled:
// the answer function reads the redirect the server sent.
const OAuthRedirect = "http://127.0.0.1:1/callback"

// OAuthMCP connects the go-sdk client to /mcp with no token: it discovers
// the authorization server, registers (with the client ID metadata document
// at metadataURL when set, else dynamically), and has answer drive the
// consent page (answer returns the redirect the server sent).
func (e *Env) OAuthMCP(t testing.TB, metadataURL string, answer func(authURL string) (*url.URL, error)) (*mcp.ClientSession, *OAuthAgent, error) {
	t.Helper()
	a := &OAuthAgent{}
	const redirect = OAuthRedirect
	var cimd *auth.ClientIDMetadataDocumentConfig
	if metadataURL != "" {
		cimd = &auth.ClientIDMetadataDocumentConfig{URL: metadataURL}
	}
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		ClientIDMetadataDocumentConfig: cimd,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Go SDK test agent", RedirectURIs: []string{redirect},
			GrantTypes: []string{"authorization_code", "refresh_token"}, TokenEndpointAuthMethod: "none"}},
		RedirectURL:         redirect,
		RequestRefreshToken: true,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			a.mu.Lock()
			a.flows++
			a.mu.Unlock()
			loc, err := answer(args.URL)
			if err != nil {
				return nil, err
			}
			q := loc.Query()
			if q.Get("error") != "" {
				return nil, fmt.Errorf("authorization refused: %s: %s", q.Get("error"), q.Get("error_description"))
			}
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a.Handler = h
	client := mcp.NewClient(&mcp.Implementation{Name: "tabbridge-oauth-test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: e.URL + "/mcp", OAuthHandler: h, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: recordBearer{a, http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, a, err
	}
	t.Cleanup(func() { cs.Close() })
	return cs, a, nil
}

// Allow is an answer for OAuthMCP: person allows for workspaceID.
func (c *Client) Allow(workspaceID string) func(string) (*url.URL, error) {
	return func(authURL string) (*url.URL, error) {
		loc, status, body := c.Consent(authURL, workspaceID, "allow")
		if loc == nil {
			return nil, fmt.Errorf("consent page answered %d: %s", status, body)
		}
		return loc, nil
	}
}

// Refuse is an answer for OAuthMCP: the person denies.
func (c *Client) Refuse() func(string) (*url.URL, error) {
	return func(authURL string) (*url.URL, error) {
		loc, _, _ := c.Consent(authURL, "", "deny")
		if loc == nil {
			return nil, errors.New("deny did not redirect")
		}
		return loc, nil
	}
}
