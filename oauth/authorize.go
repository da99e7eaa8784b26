package oauth

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/tabbridge/tabbridge/secret"
	"github.com/tabbridge/tabbridge/store"
)

// AuthRequest is a checked authorization request, waiting for the person's
// answer on the consent page.
type AuthRequest struct {
	Client     *Client
	ClientHost string // what the consent page shows beside the name
	// Local is true when the answer goes to a loopback address: to an app
	// on the computer the browser runs on.
	Local       bool
	RedirectURI string // as the client sent it (the token request must repeat it)
	State       string
	Challenge   string // PKCE S256 code_challenge
	Scope       string // granted scope
	Resource    string // canonical resource the tokens are for
	// Params are the request's parameters, for the consent form to send back.
	Params url.Values
}

// RedirectError is an authorization error that goes back to the client on
// its redirect URI (RFC 6749 §4.1.2.1), as opposed to an *Error about the
// client or redirect URI themselves, which the person sees instead.
type RedirectError struct {
	Err *Error
	URL string // the redirect with error, error_description, state and iss
}

func (e *RedirectError) Error() string { return e.Err.Error() }

var challengeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// ParseAuthorize checks an authorization request. It returns an *Error when
// the client or redirect URI is wrong (show it to the person; never
// redirect), a *RedirectError for any other fault, or the request.
func (s *Server) ParseAuthorize(ctx context.Context, q url.Values) (*AuthRequest, error) {
	c, err := s.client(ctx, q.Get("client_id"))
	if err != nil {
		return nil, err
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" && len(c.RedirectURIs) == 1 {
		redirect = c.RedirectURIs[0]
	}
	if !slices.ContainsFunc(c.RedirectURIs, func(r string) bool { return redirectMatches(r, redirect) }) {
		return nil, badRequest("invalid_request", "The redirect_uri %q is not one that client %q registered, so the answer cannot be sent to it. "+
			"The client must register this redirect URI first.", short(redirect), c.Name)
	}
	req := &AuthRequest{Client: c, ClientHost: c.Host(redirect), RedirectURI: redirect, State: q.Get("state"), Params: keep(q)}
	if u, err := url.Parse(redirect); err == nil && u.Scheme == "http" && isLoopbackHost(u.Hostname()) {
		req.Local = true
	}
	fail := func(code, format string, args ...any) error {
		e := badRequest(code, format, args...)
		return &RedirectError{Err: e, URL: req.errorURL(s.opts.Issuer, e)}
	}
	if rt := q.Get("response_type"); rt != "code" {
		return nil, fail("unsupported_response_type", "response_type must be \"code\", not %q.", rt)
	}
	if q.Get("code_challenge") == "" {
		return nil, fail("invalid_request", "PKCE is required: send code_challenge and code_challenge_method=S256.")
	}
	if m := q.Get("code_challenge_method"); m != "S256" {
		return nil, fail("invalid_request", "code_challenge_method must be S256, not %q.", m)
	}
	if !challengeRE.MatchString(q.Get("code_challenge")) {
		return nil, fail("invalid_request", "code_challenge must be the 43-character base64url SHA-256 of the code verifier.")
	}
	req.Challenge = q.Get("code_challenge")
	if r := q.Get("resource"); r != "" && !s.isResource(r) {
		return nil, fail("invalid_target", "This server issues tokens only for %s, not %q.", s.Resource(), short(r))
	}
	req.Resource = s.Resource()
	req.Scope = grantedScope(q.Get("scope"))
	return req, nil
}

// keep copies the parameters the consent form carries back.
func keep(q url.Values) url.Values {
	out := url.Values{}
	for _, k := range []string{"client_id", "redirect_uri", "response_type", "state", "code_challenge", "code_challenge_method", "scope", "resource"} {
		if v, ok := q[k]; ok && len(v) > 0 {
			out.Set(k, v[0])
		}
	}
	return out
}

// isResource accepts the canonical resource and the origin (the resource of
// the root well-known document), with or without a trailing slash.
func (s *Server) isResource(r string) bool {
	r = strings.TrimRight(r, "/")
	return r == s.Resource() || r == s.opts.Issuer
}

// grantedScope is always "mcp", with offline_access echoed when asked for.
// Other scopes are not errors (RFC 6749 §3.3 lets the server grant less);
// the token response says what was granted.
func grantedScope(asked string) string {
	if slices.Contains(strings.Fields(asked), scopeOffline) {
		return Scope + " " + scopeOffline
	}
	return Scope
}

// Approve records the person's consent for workspaceID (which the caller
// has checked is theirs) and returns the redirect that carries the code.
func (s *Server) Approve(ctx context.Context, req *AuthRequest, userID, workspaceID string) (string, error) {
	plain, hash := secret.New(codePrefix)
	now := s.now()
	err := s.opts.DB.CreateOAuthCode(ctx, &store.OAuthCode{CodeHash: hash, ClientID: req.Client.ID, ClientName: req.Client.Name,
		ClientHost: req.ClientHost, UserID: userID, WorkspaceID: workspaceID, RedirectURI: req.RedirectURI,
		CodeChallenge: req.Challenge, Scope: req.Scope, Resource: req.Resource, ExpiresAt: now.Add(s.opts.CodeTTL), CreatedAt: now})
	if err != nil {
		return "", fmt.Errorf("approve: %w", err)
	}
	return req.redirect(url.Values{"code": {plain}}, s.opts.Issuer), nil
}

// DenyURL is the redirect that tells the client the person said no.
func (s *Server) DenyURL(req *AuthRequest) string {
	return req.errorURL(s.opts.Issuer, badRequest("access_denied", "The person denied access."))
}

func (r *AuthRequest) errorURL(issuer string, e *Error) string {
	return r.redirect(url.Values{"error": {e.Code}, "error_description": {e.Description}}, issuer)
}

// redirect adds params, state and iss (RFC 9207) to the redirect URI.
func (r *AuthRequest) redirect(params url.Values, issuer string) string {
	u, err := url.Parse(r.RedirectURI)
	if err != nil {
		return r.RedirectURI // checked when the request was parsed
	}
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	if r.State != "" {
		q.Set("state", r.State)
	}
	q.Set("iss", issuer)
	u.RawQuery = q.Encode()
	return u.String()
}
