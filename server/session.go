package server

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/tabbridge/tabbridge/secret"
	"github.com/tabbridge/tabbridge/store"
)

// Cookie names. The access and refresh cookies are HttpOnly; the CSRF cookie
// is readable by the page so it can echo it in a header (double submit).
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
	if errors.Is(err, jwt.ErrTokenExpired) {
		return nil, errAccessExpired
	}
	if err != nil || claims.Subject == "" || claims.Family == "" {
		return nil, errors.New("server: invalid access token")
	}
	return &claims, nil
}

// startSession sets both sign-in cookies for a new or rotated sign-in.
func (s *Server) startSession(c *fiber.Ctx, userID, family, refresh string) error {
	access, err := s.issueAccess(userID, family)
	if err != nil {
		return err
	}
	s.setCookie(c, cookieAccess, access, s.opts.RefreshTTL, true)
	s.setCookie(c, cookieRefresh, refresh, s.opts.RefreshTTL, true)
	return nil
}

// signIn starts a new refresh family for userID and sets the cookies.
func (s *Server) signIn(c *fiber.Ctx, userID string) error {
	refresh, family, err := s.opts.DB.IssueRefresh(c.Context(), userID, s.opts.RefreshTTL)
	if err != nil {
		return err
	}
	return s.startSession(c, userID, family, refresh)
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
		return errorf(http.StatusUnauthorized, "agent_token_not_allowed",
			"Agent tokens work only on agent endpoints (/mcp, /api/agent/…); sign in as a person to use this one.")
	}
	tok := c.Cookies(cookieAccess)
	if tok == "" {
		return errorf(http.StatusUnauthorized, "signed_out", "You are not signed in; sign in and try again.")
	}
	claims, err := s.parseAccess(tok)
	if errors.Is(err, errAccessExpired) {
		return errorf(http.StatusUnauthorized, "access_expired", "Your sign-in needs refreshing: POST /api/auth/refresh once, then retry this request.")
	}
	if err != nil {
		return errorf(http.StatusUnauthorized, "signed_out", "Your sign-in is not valid; sign in again.")
	}
	active, err := s.opts.DB.FamilyActive(c.Context(), claims.Family)
	if err != nil {
		return err
	}
	if !active {
		return errorf(http.StatusUnauthorized, "signed_out", "This sign-in has ended; sign in again.")
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
			return errorf(http.StatusUnauthorized, "cookie_not_allowed",
				"This is an agent endpoint: it takes a workspace's agent token in 'Authorization: Bearer <token>', not a browser sign-in.")
		}
		return errorf(http.StatusUnauthorized, "agent_token_required",
			"Send a workspace's agent token as 'Authorization: Bearer <token>'; a person creates one in the Tabbridge web app.")
	}
	id, err := s.authenticateAgent(c.Context(), strings.TrimSpace(tok))
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusUnauthorized, "agent_token_invalid",
			"This agent token is unknown or revoked; ask the person to create a new one in the Tabbridge web app.")
	}
	if err != nil {
		return err
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

// ensureCSRFCookie gives every visitor a CSRF token cookie and remembers the
// token for templates.
func (s *Server) ensureCSRFCookie(c *fiber.Ctx) error {
	tok := c.Cookies(cookieCSRF)
	if len(tok) < 32 {
		tok, _ = secret.New("")
		s.setCookie(c, cookieCSRF, tok, 365*24*time.Hour, false)
	}
	c.Locals(localCSRF, tok)
	return c.Next()
}

// csrf protects state-changing cookie requests. An Origin header, when sent,
// must be the server's own or a trusted extension's. A trusted extension's
// requests pass on their Origin alone (no web page can forge it); every other
// request must echo the tb_csrf cookie in the X-CSRF-Token header or the
// _csrf form field (double submit): a cross-site page can neither read the
// cookie nor set the header.
func (s *Server) csrf(c *fiber.Ctx) error {
	switch c.Method() {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions:
		return c.Next()
	}
	origin := c.Get(fiber.HeaderOrigin)
	if s.extensionOrigin(origin) {
		return c.Next()
	}
	if origin != "" && origin != s.publicOrigin() {
		return errorf(http.StatusForbidden, "csrf_origin",
			"Requests that change something must come from %s; this one came from %s.", s.publicOrigin(), origin)
	}
	cookie := c.Cookies(cookieCSRF)
	sent := c.Get(headerCSRF)
	if sent == "" {
		sent = c.FormValue(formCSRF)
	}
	if cookie == "" || sent == "" || subtle.ConstantTimeCompare([]byte(cookie), []byte(sent)) != 1 {
		return errorf(http.StatusForbidden, "csrf_token",
			"Missing or wrong CSRF token: send the tb_csrf cookie's value in the X-CSRF-Token header (GET /api/auth/csrf gives it).")
	}
	return c.Next()
}
