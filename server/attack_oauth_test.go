package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// register posts a dynamic registration and returns the status and the
// OAuth error code and description.
func register(t *testing.T, base string, meta map[string]any) (int, string, string) {
	t.Helper()
	b, _ := json.Marshal(meta)
	resp, err := http.Post(base+"/oauth/register", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	body, _ := io.ReadAll(resp.Body)
	json.Unmarshal(body, &out)
	return resp.StatusCode, out.Error, out.Description
}

// TestOAuthClientCannotDisguiseItself: a hostile client's registration may
// not make the consent page read as another app's. A name with a
// right-to-left override or other invisible characters, and redirect URIs
// whose text is not what the page can show plainly (a look-alike host in
// another script, credentials before the host, a pattern for a host), are
// refused with what to send instead.
func TestOAuthClientCannotDisguiseItself(t *testing.T) {
	w := newOAuthWorld(t, storetest.SQLite)
	for _, name := range []string{"Claude Code\u202e", "Claude\u200bCode", "Claude Code\u2066evil\u2069", "\u3164Claude"} {
		st, code, desc := register(t, w.env.URL, map[string]any{"client_name": name, "redirect_uris": []string{testRedirect}})
		if st != 400 || code != "invalid_client_metadata" || !strings.Contains(desc, "invisible character U+") {
			t.Errorf("name %q: %d %s %q", name, st, code, desc)
		}
	}
	for uri, want := range map[string]string{
		"https://\u0430pple.com/cb":         "punycode",        // Cyrillic а
		"https://ex\u202eample.com/cb":      "punycode",        // an override inside the host
		"https://claude.ai@evil.example/cb": "credentials",     // the answer goes to evil.example
		"https://*.evil.example/cb":         "not a host name", // a pattern
		"https://evil.example/c b":          "cannot hold",     // a space
		"http://127.0.0.1:7777/cb?a=<x>":    "percent-encode",  // not URI text
		"https://xn--pple-43d.com/cb":       "",                // the same host, as it is: allowed
		"com.example.app:/oauth":            "",                // a private-use scheme
		"http://[::1]:5000/cb":              "",                // a loopback address literal
		"https://app.example/cb?tenant=x":   "",                // a query
	} {
		st, code, desc := register(t, w.env.URL, map[string]any{"client_name": "C", "redirect_uris": []string{uri}})
		if want == "" {
			if st != 201 {
				t.Errorf("redirect %q refused: %d %s %q", uri, st, code, desc)
			}
			continue
		}
		if st != 400 || code != "invalid_redirect_uri" || !strings.Contains(desc, want) {
			t.Errorf("redirect %q: %d %s %q, want %q", uri, st, code, desc, want)
		}
	}
}

// readPage is a page's text with its character references resolved.
func readPage(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return html.UnescapeString(string(b))
}

// TestOAuthConsentShowsHiddenCharacters: the consent page, its title, the
// workspace's connected apps and the approval cards show a client's name and
// host with every invisible character named, as the approval cards do for an
// agent's text — also for a client registered before names were checked.
func TestOAuthConsentShowsHiddenCharacters(t *testing.T) {
	w := newOAuthWorld(t, storetest.SQLite)
	const disguised = "Claude Code\u202eexe.tnegA"
	id := "tbcl_registered_before_the_check"
	if err := w.env.Opts.DB.CreateOAuthClient(context.Background(), &store.OAuthClient{ID: id, Name: disguised, RedirectURIs: testRedirect}); err != nil {
		t.Fatal(err)
	}
	resp, err := w.alice.HTTP.Get(w.authURL(map[string]string{"client_id": id}))
	if err != nil {
		t.Fatal(err)
	}
	page := readPage(resp)
	if resp.StatusCode != 200 || strings.ContainsRune(page, '\u202e') || strings.Count(page, "Claude Code⟨U+202E⟩exe.tnegA") < 3 {
		t.Fatalf("consent page (%d) shows the name hidden:\n%s", resp.StatusCode, page)
	}
	loc, st, body := w.alice.Consent(w.authURL(map[string]string{"client_id": id}), w.ws, "allow")
	if loc == nil || loc.Query().Get("code") == "" {
		t.Fatalf("consent: %v %d %s", loc, st, body)
	}
	if out := w.token(t, url.Values{"client_id": {id}, "grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"redirect_uri": {testRedirect}, "code_verifier": {verifier}}); out.AccessToken == "" {
		t.Fatalf("exchange: %+v", out)
	}
	resp, err = w.alice.HTTP.Get(w.env.URL + "/workspaces/" + w.ws)
	if err != nil {
		t.Fatal(err)
	}
	page = readPage(resp)
	if strings.ContainsRune(page, '\u202e') || !strings.Contains(page, "Claude Code⟨U+202E⟩exe.tnegA") {
		t.Fatalf("workspace page shows the connected app's name hidden:\n%s", page)
	}
}

// TestOAuthParametersAreGivenOnce: RFC 6749 forbids a parameter given twice (§3.1, §3.2), and
// the server read the first of two code or client_id parameters at the token endpoint (and of
// any in an authorization request) while a proxy or a log may read the last. Refused at the
// token, revocation and authorization endpoints, saying which; the same requests once each
// work.
func TestOAuthParametersAreGivenOnce(t *testing.T) {
	w := newOAuthWorld(t, storetest.SQLite)
	for name, form := range map[string]url.Values{
		"code":      {"grant_type": {"authorization_code"}, "code": {w.code(t, nil), "tbc_other"}, "redirect_uri": {testRedirect}, "code_verifier": {verifier}},
		"client_id": {"grant_type": {"authorization_code"}, "code": {w.code(t, nil)}, "client_id": {w.clientID, "tbcl_other"}, "redirect_uri": {testRedirect}, "code_verifier": {verifier}},
	} {
		if out := w.token(t, form); out.status != 400 || out.Error != "invalid_request" || !strings.Contains(out.Description, "parameter "+name+" is given more than once") || out.AccessToken != "" {
			t.Errorf("two %s: %+v", name, out)
		}
	}
	tok := w.exchange(t, w.code(t, nil), verifier)
	resp, err := http.PostForm(w.env.URL+"/oauth/revoke", url.Values{"token": {tok.RefreshToken, "x"}, "client_id": {w.clientID}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || w.mcpStatus(t, tok.AccessToken) != 200 {
		t.Errorf("a revocation with two tokens: %d", resp.StatusCode)
	}
	_, status, body := w.alice.Consent(w.authURL(nil)+"&state=again", w.ws, "allow")
	if status != 400 || !strings.Contains(body, "parameter state is given more than once") {
		t.Errorf("an authorization request with two states: %d %.300s", status, body)
	}
	if out := w.exchange(t, w.code(t, nil), verifier); out.status != 200 {
		t.Errorf("a request with each parameter once: %+v", out)
	}
}

// TestOAuthRegistrationOverTheBudgetSaysSoInOAuthTerms: registering in a
// loop spends the address's sign-in budget, and the refusal is an OAuth
// error (a string "error" and an "error_description", with Retry-After), as
// a client's registration code reads it; before, it was the app's shape,
// whose "error" is an object no OAuth client parses.
func TestOAuthRegistrationOverTheBudgetSaysSoInOAuthTerms(t *testing.T) {
	const budget = 3
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.AuthAttemptsPerMinute = budget })
	meta := map[string]any{"client_name": "Looping client", "redirect_uris": []string{testRedirect}}
	for i := range budget {
		if st, code, desc := register(t, env.URL, meta); st != http.StatusCreated {
			t.Fatalf("registration %d within the budget: %d %s %s", i+1, st, code, desc)
		}
	}
	b, _ := json.Marshal(meta)
	resp, err := http.Post(env.URL+"/oauth/register", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusTooManyRequests ||
		out.Error != "temporarily_unavailable" || !strings.Contains(out.Description, "wait a minute") {
		t.Fatalf("over the budget: %d %s (%v), want 429 temporarily_unavailable in the OAuth shape", resp.StatusCode, body, err)
	}
	if resp.Header.Get("Retry-After") == "" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("over the budget: Retry-After %q, Cache-Control %q", resp.Header.Get("Retry-After"), resp.Header.Get("Cache-Control"))
	}
	// go-sdk's client registration reads it as an OAuth error.
	_, err = oauthex.RegisterClient(context.Background(), env.URL+"/oauth/register", &oauthex.ClientRegistrationMetadata{
		ClientName: "Looping client", RedirectURIs: []string{testRedirect}, TokenEndpointAuthMethod: "none"}, http.DefaultClient)
	if err == nil || !strings.Contains(err.Error(), "temporarily_unavailable") {
		t.Fatalf("go-sdk's RegisterClient over the budget: %v", err)
	}
}
