package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/tabbridge/tabbridge/secret"
	"github.com/tabbridge/tabbridge/store"
)

// Cookie names. The access and refresh cookies are HttpOnly. The CSRF
// cookie is readable by the page, for clients that echo it in a header; a
// signed-in request's token is bound to its sign-in (csrfFor), so a cookie
// planted by another port of the host opens nothing.
const (
	cookieAccess  = "tb_access"
	cookieRefresh = "tb_refresh"
	cookieCSRF    = "tb_csrf"
	headerCSRF    = "X-CSRF-Token"
	formCSRF      = "_csrf"
)

// Keys of request-scoped values.
const (
	localUser   = "tb.user"   // string: the signed-in person's id
	localFamily = "tb.family" // string: their sign-in's refresh family
	localAgent  = "tb.agent"  // *store.AgentIdentity
	localCSRF   = "tb.csrf"   // string: this request's CSRF token
	localMark   = "tb.mark"   // string: the person's live events as they stood when the request came (live.Hub.Mark)
)

type accessClaims struct {
	Family string `json:"fam"`
	jwt.RegisteredClaims
}

// issueAccess signs a short-lived access token for a sign-in.
func (s *Server) issueAccess(userID, family string) (string, error) {
	now := s.opts.Now()
	claims := accessClaims{Family: family, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   userID,
		Issuer:    "tabbridge",
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(s.opts.AccessTTL)),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.opts.Key)
}

var errAccessExpired = errors.New("server: access token expired")

func (s *Server) parseAccess(tok string) (*accessClaims, error) {
	var claims accessClaims
	_, err := jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return s.opts.Key, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer("tabbridge"), jwt.WithTimeFunc(s.opts.Now),
		jwt.WithExpirationRequired())
	if errors.Is(err, jwt.ErrTokenExpired) && claims.Family != "" {
		return &claims, errAccessExpired // signed by us: its sign-in is known, if not current
	}
	if errors.Is(err, jwt.ErrTokenExpired) {
		return nil, errAccessExpired
	}
	if err != nil || claims.Subject == "" || claims.Family == "" {
		return nil, errors.New("server: invalid access token")
	}
	return &claims, nil
}

// startSession sets the sign-in cookies for a new or rotated sign-in, and
// the CSRF cookie to the sign-in's token (the same for its whole life).
func (s *Server) startSession(c *fiber.Ctx, userID, family, refresh string) error {
	access, err := s.issueAccess(userID, family)
	if err != nil {
		return err
	}
	s.setCookie(c, cookieAccess, access, s.opts.RefreshTTL, true)
	s.setCookie(c, cookieRefresh, refresh, s.opts.RefreshTTL, true)
	s.setCookie(c, cookieCSRF, s.csrfFor(family), 365*24*time.Hour, false)
	return nil
}

// signIn starts a new refresh family for userID, sets the cookies and
// returns the sign-in's CSRF token.
func (s *Server) signIn(c *fiber.Ctx, userID string) (string, error) {
	refresh, family, err := s.opts.DB.IssueRefreshFor(c.UserContext(), userID, c.Get(fiber.HeaderUserAgent), s.opts.RefreshTTL)
	if err != nil {
		return "", err
	}
	return s.csrfFor(family), s.startSession(c, userID, family, refresh)
}

func (s *Server) setCookie(c *fiber.Ctx, name, value string, ttl time.Duration, httpOnly bool) {
	c.Cookie(&fiber.Cookie{
		Name: name, Value: value, Path: "/", HTTPOnly: httpOnly, Secure: s.secureCookies(),
		SameSite: fiber.CookieSameSiteLaxMode, Expires: s.opts.Now().Add(ttl),
	})
}

func (s *Server) clearSession(c *fiber.Ctx) {
	for _, name := range []string{cookieAccess, cookieRefresh} {
		c.Cookie(&fiber.Cookie{Name: name, Value: "", Path: "/", HTTPOnly: true, Secure: s.secureCookies(),
			SameSite: fiber.CookieSameSiteLaxMode, Expires: time.Unix(1, 0)})
	}
}

// person admits only a signed-in person's cookie session. An agent token is
// refused here even alongside a valid cookie: agent tokens open agent
// endpoints only.
func (s *Server) person(c *fiber.Ctx) error {
	if c.Get(fiber.HeaderAuthorization) != "" {
		return errorf(http.StatusUnauthorized, codeAgentTokenNotAllowed,
			"Agent tokens work only on agent endpoints (/mcp, /api/agent/…); sign in as a person to use this one.")
	}
	tok := c.Cookies(cookieAccess)
	if tok == "" {
		return errorf(http.StatusUnauthorized, codeSignedOut, "You are not signed in; sign in and try again.")
	}
	claims, err := s.parseAccess(tok)
	if errors.Is(err, errAccessExpired) {
		return errorf(http.StatusUnauthorized, codeAccessExpired, "Your sign-in needs refreshing: POST /api/auth/refresh once, then retry this request.")
	}
	if err != nil {
		return errorf(http.StatusUnauthorized, codeSignedOut, "Your sign-in is not valid; sign in again.")
	}
	active, err := s.opts.DB.FamilyActive(c.UserContext(), claims.Family)
	if err != nil {
		return err
	}
	if !active {
		return errorf(http.StatusUnauthorized, codeSignedOut, "This sign-in has ended; sign in again.")
	}
	if err := s.csrfBound(c, claims.Family); err != nil {
		return err
	}
	c.Locals(localUser, claims.Subject)
	c.Locals(localFamily, claims.Family)
	return c.Next()
}

// agent admits only an agent token (Authorization: Bearer), never a cookie.
func (s *Server) agent(c *fiber.Ctx) error {
	auth := c.Get(fiber.HeaderAuthorization)
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || strings.TrimSpace(tok) == "" {
		if c.Cookies(cookieAccess) != "" {
			return errorf(http.StatusUnauthorized, codeCookieNotAllowed,
				"This is an agent endpoint: it takes a workspace's agent token in 'Authorization: Bearer <token>', not a browser sign-in.")
		}
		return errorf(http.StatusUnauthorized, codeAgentTokenRequired,
			"Send a workspace's agent token as 'Authorization: Bearer <token>'; a person creates one in the Tabbridge web app.")
	}
	id, err := s.authenticateAgent(c.UserContext(), strings.TrimSpace(tok))
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusUnauthorized, codeAgentTokenInvalid,
			"This agent token is unknown or revoked; ask the person to create a new one in the Tabbridge web app.")
	}
	if errors.Is(err, store.ErrTokenExpired) {
		return errorf(http.StatusUnauthorized, codeAgentTokenExpired,
			"This agent token has expired (its owner gave it an expiry date); ask the person to create a new one on the workspace's page in the Tabbridge web app and configure it in place of this one.")
	}
	if err != nil {
		return err
	}
	if id.FirstUse {
		s.opts.Logger.Info("agent token used for the first time", "token", id.TokenID, "workspace", id.Workspace.ID, "client", c.Get(fiber.HeaderUserAgent))
		s.publish(id.Workspace.OwnerID, evTokenUsed, fiber.Map{"token": fiber.Map{"id": id.TokenID}, "workspace": fiber.Map{"id": id.Workspace.ID}})
	}
	c.Locals(localAgent, id)
	return c.Next()
}

func userID(c *fiber.Ctx) string { v, _ := c.Locals(localUser).(string); return v }

// familyID is the signed-in person's sign-in (refresh family), "" for others.
func familyID(c *fiber.Ctx) string { v, _ := c.Locals(localFamily).(string); return v }

func agentID(c *fiber.Ctx) *store.AgentIdentity {
	v, _ := c.Locals(localAgent).(*store.AgentIdentity)
	return v
}

// ensureCSRFCookie gives every visitor a CSRF token cookie (the signed-out
// forms' double-submit token) and remembers it for templates.
func (s *Server) ensureCSRFCookie(c *fiber.Ctx) error {
	tok := c.Cookies(cookieCSRF)
	if len(tok) < 32 {
		tok, _ = secret.New("")
		s.setCookie(c, cookieCSRF, tok, 365*24*time.Hour, false)
	}
	c.Locals(localCSRF, tok)
	return c.Next()
}

// csrfFor is a sign-in's CSRF token: an HMAC of its refresh family with the
// server's key. Only the server can make it and only the signed-in page is
// given it, so a tb_csrf cookie planted by a page on another port of the
// same host (cookies ignore ports) matches nothing; it needs no storage, and
// it stays the same across refreshes and ends with the sign-in.
func (s *Server) csrfFor(family string) string {
	mac := hmac.New(sha256.New, s.opts.Key)
	mac.Write([]byte("tabbridge csrf\x00" + family))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// csrfToken is the token a request must send: its sign-in's, when it
// carries an access token of ours (current or expired), else the
// signed-out forms' cookie. Pages are rendered with it, so a page and the
// post it sends agree on which token counts.
func (s *Server) csrfToken(c *fiber.Ctx) string {
	if tok := c.Cookies(cookieAccess); tok != "" {
		if claims, err := s.parseAccess(tok); claims != nil && (err == nil || errors.Is(err, errAccessExpired)) {
			return s.csrfFor(claims.Family)
		}
	}
	v, _ := c.Locals(localCSRF).(string)
	return v
}

// pageCSRF is the token a page carries: its sign-in's, once a guard has
// resolved it (even from the refresh cookie alone), else csrfToken.
func (s *Server) pageCSRF(c *fiber.Ctx) string {
	if f := familyID(c); f != "" {
		return s.csrfFor(f)
	}
	return s.csrfToken(c)
}

func sentCSRF(c *fiber.Ctx) string {
	if v := c.Get(headerCSRF); v != "" {
		return v
	}
	return c.FormValue(formCSRF)
}

func safeMethod(c *fiber.Ctx) bool {
	switch c.Method() {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions:
		return true
	}
	return false
}

func errCSRFToken() error {
	return errorf(http.StatusForbidden, codeCSRFToken,
		"Missing or wrong CSRF token: send your sign-in's token in the X-CSRF-Token header (GET /api/auth/csrf gives it; so does the csrf-token meta tag of every page).")
}

func sameToken(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// csrf protects state-changing cookie requests. An Origin header, when sent,
// must be the server's own or a trusted extension's. A trusted extension's
// requests pass on their Origin alone (no web page can forge it); every other
// request must send csrfToken in the X-CSRF-Token header or the _csrf form
// field: a cross-site page can neither read the page's token nor set the
// header, and cannot compute a sign-in's token. A guard that then resolves
// the sign-in checks the token against that sign-in too (csrfBound).
func (s *Server) csrf(c *fiber.Ctx) error {
	if safeMethod(c) {
		return c.Next()
	}
	origin := c.Get(fiber.HeaderOrigin)
	if s.extensionOrigin(origin) {
		return c.Next()
	}
	if origin != "" && origin != s.publicOrigin() {
		return errorf(http.StatusForbidden, codeCSRFOrigin,
			"Requests that change something must come from %s; this one came from %s.", s.publicOrigin(), origin)
	}
	if !sameToken(sentCSRF(c), s.csrfToken(c)) {
		return errCSRFToken()
	}
	return c.Next()
}

// csrfBound checks a state-changing request's token against the sign-in a
// guard resolved for it. The csrf check went by the access cookie; without
// one (the refresh cookie alone signs the request in) it could only compare
// the token with the cookie, which another port of the host can plant.
func (s *Server) csrfBound(c *fiber.Ctx, family string) error {
	if safeMethod(c) || s.extensionOrigin(c.Get(fiber.HeaderOrigin)) {
		return nil
	}
	if !sameToken(sentCSRF(c), s.csrfFor(family)) {
		return errCSRFToken()
	}
	return nil
}
