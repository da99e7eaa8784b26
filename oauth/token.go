package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/tabbridge/tabbridge/secret"
	"github.com/tabbridge/tabbridge/store"
)

// TokenResponse is a successful token response (RFC 6749 §5.1).
type TokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// verifierRE is RFC 7636 §4.1's code_verifier.
var verifierRE = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// Token handles a token request's form: the authorization_code and
// refresh_token grants of public clients, and returns the tokens with the
// grant they belong to. Failures are *Error.
func (s *Server) Token(ctx context.Context, form url.Values) (*TokenResponse, *store.OAuthGrant, error) {
	clientID := form.Get("client_id")
	if clientID == "" {
		return nil, nil, oauthErr(http.StatusUnauthorized, "invalid_client", "Send client_id: every client here is public and identifies itself with it.")
	}
	if r := form.Get("resource"); r != "" && !s.isResource(r) {
		return nil, nil, badRequest("invalid_target", "This server issues tokens only for %s, not %q.", s.Resource(), short(r))
	}
	switch form.Get("grant_type") {
	case "authorization_code":
		return s.exchangeCode(ctx, clientID, form)
	case "refresh_token":
		return s.refresh(ctx, clientID, form)
	case "":
		return nil, nil, badRequest("invalid_request", "Send grant_type: authorization_code or refresh_token.")
	default:
		return nil, nil, badRequest("unsupported_grant_type", "Grant type %q is not supported; use authorization_code or refresh_token.", form.Get("grant_type"))
	}
}

func (s *Server) exchangeCode(ctx context.Context, clientID string, form url.Values) (*TokenResponse, *store.OAuthGrant, error) {
	code, verifier, redirect := form.Get("code"), form.Get("code_verifier"), form.Get("redirect_uri")
	if code == "" {
		return nil, nil, badRequest("invalid_request", "Send the authorization code as code.")
	}
	if verifier == "" {
		return nil, nil, badRequest("invalid_request", "PKCE is required: send the code_verifier whose S256 challenge the authorization request carried.")
	}
	if !verifierRE.MatchString(verifier) {
		return nil, nil, badRequest("invalid_request", "code_verifier must be 43 to 128 characters of A-Z, a-z, 0-9 and -._~ (RFC 7636).")
	}
	access, refresh, toks := s.newTokens()
	check := func(c *store.OAuthCode) error {
		if c.ClientID != clientID {
			return badRequest("invalid_grant", "This code was issued to another client.")
		}
		if redirect != "" && redirect != c.RedirectURI { // OAuth 2.1 §4.1.3: PKCE makes it optional
			return badRequest("invalid_grant", "redirect_uri differs from the one in the authorization request.")
		}
		sum := sha256.Sum256([]byte(verifier))
		if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(c.CodeChallenge)) != 1 {
			return badRequest("invalid_grant", "The code_verifier does not match the code_challenge (PKCE); start the authorization again.")
		}
		return nil
	}
	g, err := s.opts.DB.ExchangeOAuthCode(ctx, secret.Hash(code), s.now(), check, toks)
	switch {
	case errors.Is(err, store.ErrReused):
		e := badRequest("invalid_grant", "This code was already used; the tokens it gave are revoked. Start the authorization again.")
		if g != nil {
			e.Revoked = g.ID
		}
		return nil, nil, e
	case errors.Is(err, store.ErrNotFound):
		return nil, nil, badRequest("invalid_grant", "The code is unknown or expired; start the authorization again.")
	case err != nil:
		return nil, nil, err
	}
	return s.response(access, refresh, g.Scope), g, nil
}

// rotationGrace is how long a just-rotated refresh token still yields the
// answer its rotation gave: a client's requests that refreshed at once (each
// saw the access token expire) are not a stolen token being replayed. After
// it, presenting the spent token revokes the grant.
const rotationGrace = 10 * time.Second

// rotation is one refresh's answer, kept for rotationGrace.
type rotation struct {
	clientID string
	resp     *TokenResponse
	grant    *store.OAuthGrant
	at       time.Time
}

// refresh rotates a refresh token. Requests presenting the same token at
// once, or within rotationGrace of its rotation, share that one rotation.
func (s *Server) refresh(ctx context.Context, clientID string, form url.Values) (*TokenResponse, *store.OAuthGrant, error) {
	rt := form.Get("refresh_token")
	if rt == "" {
		return nil, nil, badRequest("invalid_request", "Send the refresh token as refresh_token.")
	}
	hash := secret.Hash(rt)
	v, err, _ := s.rotations.Do(hash, func() (any, error) {
		if r, ok := s.recentRotation(hash); ok {
			return r, nil
		}
		resp, g, err := s.rotate(context.WithoutCancel(ctx), hash, clientID)
		if err != nil {
			return nil, err
		}
		r := rotation{clientID: clientID, resp: resp, grant: g, at: s.now()}
		s.recent.Store(hash, r)
		return r, nil
	})
	if err != nil {
		return nil, nil, err
	}
	r := v.(rotation)
	if r.clientID != clientID {
		return nil, nil, badRequest("invalid_grant", "The refresh token is unknown, expired or revoked; authorize again.")
	}
	return r.resp, r.grant, nil
}

// recentRotation finds a rotation within rotationGrace, dropping older ones.
func (s *Server) recentRotation(hash string) (rotation, bool) {
	now := s.now()
	s.recent.Range(func(k, v any) bool {
		if now.Sub(v.(rotation).at) > rotationGrace {
			s.recent.Delete(k)
		}
		return true
	})
	v, ok := s.recent.Load(hash)
	if !ok {
		return rotation{}, false
	}
	return v.(rotation), true
}

// GrantRevoked drops the kept answers of a revoked grant's rotations, so
// its spent refresh tokens yield nothing more, not even within the grace.
func (s *Server) GrantRevoked(grantID string) {
	s.recent.Range(func(k, v any) bool {
		if v.(rotation).grant.ID == grantID {
			s.recent.Delete(k)
		}
		return true
	})
}

func (s *Server) rotate(ctx context.Context, hash, clientID string) (*TokenResponse, *store.OAuthGrant, error) {
	access, refresh, toks := s.newTokens()
	g, err := s.opts.DB.RotateOAuthRefresh(ctx, hash, clientID, s.now(), toks)
	switch {
	case errors.Is(err, store.ErrReused):
		e := badRequest("invalid_grant", "This refresh token was already used, so the grant is revoked; authorize again.")
		if g != nil {
			e.Revoked = g.ID
		}
		return nil, nil, e
	case errors.Is(err, store.ErrNotFound):
		return nil, nil, badRequest("invalid_grant", "The refresh token is unknown, expired or revoked; authorize again.")
	case err != nil:
		return nil, nil, err
	}
	return s.response(access, refresh, g.Scope), g, nil
}

func (s *Server) newTokens() (access, refresh string, toks store.NewTokens) {
	now := s.now()
	access, toks.AccessHash = secret.New(AccessPrefix)
	refresh, toks.RefreshHash = secret.New(RefreshPrefix)
	toks.AccessExpires = now.Add(s.opts.AccessTTL)
	toks.RefreshExpires = now.Add(s.opts.RefreshTTL)
	return access, refresh, toks
}

func (s *Server) response(access, refresh, scope string) *TokenResponse {
	return &TokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int64(s.opts.AccessTTL / time.Second),
		RefreshToken: refresh, Scope: scope}
}

// ErrInvalidToken means an access token is unknown, expired or revoked: the
// client should refresh it or authorize again.
var ErrInvalidToken = errors.New("oauth: invalid access token")

// IsAccessToken tells an OAuth access token from a pasted agent token.
func IsAccessToken(tok string) bool { return strings.HasPrefix(tok, AccessPrefix) }

// Authenticate resolves an access token to its grant's workspace identity.
func (s *Server) Authenticate(ctx context.Context, token string) (*store.OAuthAccess, error) {
	a, err := s.opts.DB.AuthenticateOAuth(ctx, secret.Hash(token), s.now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrInvalidToken
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate access token: %w", err)
	}
	if a.Grant.Resource != s.Resource() {
		return nil, ErrInvalidToken // issued for another audience (another public URL)
	}
	return a, nil
}

// Revoke handles an RFC 7009 revocation form: revoking either token of a
// grant revokes the grant. It returns the revoked grant's id, "" when there
// was nothing to revoke (which is still a success).
func (s *Server) Revoke(ctx context.Context, form url.Values) (string, error) {
	tok := form.Get("token")
	if tok == "" {
		return "", badRequest("invalid_request", "Send the token to revoke as token.")
	}
	return s.opts.DB.RevokeOAuthGrantOfToken(ctx, secret.Hash(tok), form.Get("client_id"))
}
