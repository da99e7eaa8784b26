package server

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/gofiber/fiber/v2"
)

// errNoSession says a page request carries no usable sign-in.
var errNoSession = errors.New("server: no session")

// cookieSession resolves the request's sign-in from its cookies. An expired
// (or missing) access token is refreshed here, on the server, and the request
// goes on with fresh cookies: pages and event streams cannot retry after a
// 401 the way API clients do. Racing refreshes share one rotation
// (refreshSession).
func (s *Server) cookieSession(c *fiber.Ctx) (uid, family string, err error) {
	if tok := c.Cookies(cookieAccess); tok != "" {
		claims, err := s.parseAccess(tok)
		if err == nil {
			active, err := s.opts.DB.FamilyActive(c.UserContext(), claims.Family)
			if err != nil {
				return "", "", err
			}
			if !active {
				return "", "", errNoSession
			}
			return claims.Subject, claims.Family, nil
		}
		if !errors.Is(err, errAccessExpired) {
			return "", "", errNoSession
		}
	}
	if c.Cookies(cookieRefresh) == "" {
		return "", "", errNoSession
	}
	uid, family, err = s.refreshSession(c)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		return "", "", errNoSession
	}
	return uid, family, err
}

func errAgentTokenOnPage() error {
	return errorf(http.StatusUnauthorized, codeAgentTokenNotAllowed,
		"Agent tokens do not open the web app; sign in as a person instead.")
}

// sessionOrError admits a person's cookie session like the person guard,
// but refreshes an expired access token itself (for the event stream, which
// a browser cannot retry with a refresh first).
func (s *Server) sessionOrError(c *fiber.Ctx) error {
	if c.Get(fiber.HeaderAuthorization) != "" {
		return errAgentTokenOnPage()
	}
	uid, family, err := s.cookieSession(c)
	if errors.Is(err, errNoSession) {
		return errorf(http.StatusUnauthorized, codeSignedOut, "You are not signed in; sign in and try again.")
	}
	if err != nil {
		return err
	}
	c.Locals(localUser, uid)
	c.Locals(localFamily, family)
	c.Locals(localMark, s.live.Mark(uid))
	return c.Next()
}

// pageSession is the person guard for pages: without a sign-in the browser
// is sent to sign in (or to first-run setup when no account exists) and
// brought back afterwards; an agent token is refused.
func (s *Server) pageSession(c *fiber.Ctx) error {
	if c.Get(fiber.HeaderAuthorization) != "" {
		return errAgentTokenOnPage()
	}
	uid, family, err := s.cookieSession(c)
	if errors.Is(err, errNoSession) {
		return s.toSignin(c)
	}
	if err != nil {
		return err
	}
	if err := s.csrfBound(c, family); err != nil {
		return err
	}
	c.Locals(localUser, uid)
	c.Locals(localFamily, family)
	c.Locals(localMark, s.live.Mark(uid))
	return c.Next()
}

func (s *Server) toSignin(c *fiber.Ctx) error {
	has, err := s.opts.DB.HasUsers(c.UserContext())
	if err != nil {
		return err
	}
	if !has {
		return c.Redirect("/setup", http.StatusSeeOther)
	}
	next := c.OriginalURL()
	if c.Method() != fiber.MethodGet {
		next = "/" // a form's target is no page to come back to
	}
	return c.Redirect("/signin?next="+url.QueryEscape(safeNext(next)), http.StatusSeeOther)
}
