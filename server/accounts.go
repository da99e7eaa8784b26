package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/limiter"

	"github.com/tabbridge/tabbridge/store"
)

func (s *Server) mountAccounts(api guard) {
	slow := s.authLimiter()
	api.Get("/auth/csrf", s.getCSRF)
	api.Get("/setup", s.getSetup)
	api.Post("/setup", slow, s.postSetup)
	api.Post("/auth/signin", slow, s.postSignin)
	api.Post("/auth/signup", slow, s.postSignup)
	api.Post("/auth/refresh", s.postRefresh)
	api.Post("/auth/signout", s.postSignout)
	api.Post("/invitations/accept", slow, s.postAcceptInvitation)
	api.Get("/auth/me", s.person, s.getMe)
	api.Get("/invitations", s.person, s.getInvitations)
	api.Post("/invitations", s.person, s.postInvitation)
	api.Delete("/invitations/:id", s.person, s.deleteInvitation)
	s.mountSignIns(api)
}

// authLimiter limits guessing passwords per client address: one budget for
// every sign-in, sign-up and setup route, JSON or page.
func (s *Server) authLimiter() fiber.Handler {
	if s.authLimit != nil {
		return s.authLimit
	}
	s.authLimit = limiter.New(limiter.Config{Max: s.opts.AuthAttemptsPerMinute, Expiration: time.Minute, KeyGenerator: s.clientAddress, LimitReached: func(c *fiber.Ctx) error {
		return errorf(http.StatusTooManyRequests, codeRateLimited, "Too many attempts; wait a minute and try again.")
	}})
	return s.authLimit
}

// getCSRF gives the token state-changing requests must send: the
// sign-in's, or before signing in the signed-out forms' one.
func (s *Server) getCSRF(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"csrfToken": s.csrfToken(c)})
}

func (s *Server) getSetup(c *fiber.Ctx) error {
	has, err := s.opts.DB.HasUsers(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"needsOwner": !has, "openSignup": s.opts.OpenSignup})
}

type newAccount struct {
	Email    string `json:"email"`
	Name     string `json:"name"`
	Password string `json:"password"`
	Token    string `json:"token,omitempty"` // invitations only
}

func (a *newAccount) validate() error {
	a.Email = store.NormalizeEmail(a.Email)
	at := strings.IndexByte(a.Email, '@')
	if at < 1 || at == len(a.Email)-1 || len(a.Email) > 254 || strings.ContainsAny(a.Email, " \t\r\n") {
		return badRequest(codeInvalidField, "Field \"email\" must be an email address like name@example.com.")
	}
	name, err := cleanName("name", a.Name)
	if err != nil {
		return err
	}
	a.Name = name
	return validPassword(a.Password)
}

func validPassword(pw string) error {
	n := utf8.RuneCountInString(pw)
	if n < 8 || len(pw) > 256 {
		return badRequest(codeInvalidField, "Field \"password\" must be 8 to 256 bytes long.")
	}
	return nil
}

// postSetup creates the owner account on a server that has no account yet,
// and signs the owner in.
func (s *Server) postSetup(c *fiber.Ctx) error {
	var in newAccount
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	u, err := s.createOwner(c.UserContext(), in)
	if err != nil {
		return err
	}
	return s.signedIn(c, u, http.StatusCreated)
}

// createOwner validates and creates the first-run owner account; the JSON
// API and the setup page share it.
func (s *Server) createOwner(ctx context.Context, in newAccount) (*store.User, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	u, err := s.opts.DB.CreateOwner(ctx, in.Email, in.Name, hashPassword(in.Password))
	if errors.Is(err, store.ErrOwnerExists) {
		return nil, errorf(http.StatusConflict, codeOwnerExists, "This server already has its owner; sign in, or ask the owner for an invitation.")
	}
	return s.logAccount(u, err, "setup")
}

func (s *Server) postSignup(c *fiber.Ctx) error {
	if !s.opts.OpenSignup {
		return errSignupClosed()
	}
	var in newAccount
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	u, err := s.createOpenAccount(c.UserContext(), in)
	if err != nil {
		return err
	}
	return s.signedIn(c, u, http.StatusCreated)
}

func errSignupClosed() error {
	return errorf(http.StatusForbidden, codeSignupClosed, "Sign-up is by invitation on this server; ask its owner for an invitation link.")
}

// createOpenAccount validates and creates an account by open sign-up.
func (s *Server) createOpenAccount(ctx context.Context, in newAccount) (*store.User, error) {
	if !s.opts.OpenSignup {
		return nil, errSignupClosed()
	}
	if err := in.validate(); err != nil {
		return nil, err
	}
	u, err := s.opts.DB.CreateUser(ctx, in.Email, in.Name, hashPassword(in.Password))
	if errors.Is(err, store.ErrConflict) {
		return nil, errorf(http.StatusConflict, codeEmailTaken, "An account with that email exists; sign in instead.")
	}
	return s.logAccount(u, err, "signup")
}

// logAccount tells the operator an account was created (how: owner, sign-up,
// invitation), and passes u and err through.
func (s *Server) logAccount(u *store.User, err error, how string) (*store.User, error) {
	if err == nil && u != nil {
		s.opts.Logger.Info("account created", "user", u.ID, "email", u.Email, "owner", u.IsOwner, "via", how)
	}
	return u, err
}

func (s *Server) signedIn(c *fiber.Ctx, u *store.User, status int) error {
	csrf, err := s.signIn(c, u.ID)
	if err != nil {
		return err
	}
	return c.Status(status).JSON(fiber.Map{"user": u, "csrfToken": csrf})
}

func (s *Server) postSignin(c *fiber.Ctx) error {
	var in struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	u, err := s.checkCredentials(c.UserContext(), in.Email, in.Password)
	if err != nil {
		return err
	}
	return s.signedIn(c, u, http.StatusOK)
}

// checkCredentials finds the account an email and password belong to. An
// unknown address still runs the hash, so timing does not reveal accounts.
func (s *Server) checkCredentials(ctx context.Context, email, password string) (*store.User, error) {
	u, err := s.opts.DB.UserByEmail(ctx, email)
	hash := dummyHash
	if err == nil {
		hash = u.PasswordHash
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	ok, herr := checkPassword(hash, password)
	if herr != nil {
		return nil, herr
	}
	if err != nil || !ok {
		return nil, errorf(http.StatusUnauthorized, codeBadCredentials, "That email and password do not match an account.")
	}
	return u, nil
}

// postRefresh rotates the refresh cookie and issues a new access token. A
// refresh token presented twice ends the whole sign-in.
func (s *Server) postRefresh(c *fiber.Ctx) error {
	if _, _, err := s.refreshSession(c); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"refreshed": true, "accessExpiresAt": s.opts.Now().Add(s.opts.AccessTTL).UTC()})
}

type rotation struct {
	uid, family, next string
	at                time.Time
}

// rotationGrace is how long a just-rotated refresh token still yields its
// successor: a person's own requests that left before the new cookie arrived
// are not a stolen token being replayed.
const rotationGrace = 10 * time.Second

func (s *Server) recentRotation(tok string) (rotation, bool) {
	now := s.opts.Now()
	s.recent.Range(func(k, v any) bool {
		if now.Sub(v.(rotation).at) > rotationGrace {
			s.recent.Delete(k)
		}
		return true
	})
	v, ok := s.recent.Load(tok)
	if !ok {
		return rotation{}, false
	}
	return v.(rotation), true
}

// refreshSession rotates the request's refresh cookie and sets new session
// cookies. Requests presenting the same refresh token at once, or within
// rotationGrace of its rotation (a page and its event stream, say), share one
// rotation, so they are not mistaken for a stolen token being reused.
func (s *Server) refreshSession(c *fiber.Ctx) (uid, family string, err error) {
	tok := c.Cookies(cookieRefresh)
	if tok == "" {
		return "", "", errorf(http.StatusUnauthorized, codeSignedOut, "You are not signed in; sign in again.")
	}
	v, err, _ := s.rotations.Do(tok, func() (any, error) {
		if r, ok := s.recentRotation(tok); ok {
			return r, nil
		}
		// Within the grace, the database gives a second successor rather than
		// calling it reuse: the same token may be rotating on another
		// instance at this moment.
		uid, family, next, err := s.opts.DB.RotateRefreshWithin(context.WithoutCancel(c.UserContext()), tok, s.opts.RefreshTTL, s.opts.Now().Add(-rotationGrace))
		r := rotation{uid, family, next, s.opts.Now()}
		if err == nil {
			s.recent.Store(tok, r)
		}
		return r, err
	})
	r, _ := v.(rotation)
	switch {
	case errors.Is(err, store.ErrTokenReused):
		s.signins.end(r.family)
		s.clearSession(c)
		s.opts.Logger.Warn("refresh token reused; sign-in revoked")
		return "", "", errorf(http.StatusUnauthorized, codeRefreshReused, "This sign-in was ended because an old refresh token was used again; sign in again.")
	case errors.Is(err, store.ErrInvalidToken):
		s.clearSession(c)
		return "", "", errorf(http.StatusUnauthorized, codeSignedOut, "Your sign-in has ended; sign in again.")
	case err != nil:
		return "", "", err
	}
	if err := s.startSession(c, r.uid, r.family, r.next); err != nil {
		return "", "", err
	}
	return r.uid, r.family, nil
}

// postSignout ends the sign-in: its refresh family is revoked, so the access
// token stops working at once too.
func (s *Server) postSignout(c *fiber.Ctx) error {
	if err := s.endSession(c); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"signedOut": true})
}

// endSession revokes the request's sign-in and clears its cookies.
func (s *Server) endSession(c *fiber.Ctx) error {
	if tok := c.Cookies(cookieAccess); tok != "" {
		if claims, err := s.parseAccess(tok); err == nil || errors.Is(err, errAccessExpired) {
			if claims != nil {
				if err := s.opts.DB.RevokeFamily(c.UserContext(), claims.Family); err != nil {
					return err
				}
				s.signins.end(claims.Family)
			}
		}
	}
	if tok := c.Cookies(cookieRefresh); tok != "" {
		family, err := s.opts.DB.RevokeRefreshFamilyOf(c.UserContext(), tok)
		if err != nil {
			return err
		}
		if family != "" {
			s.signins.end(family)
		}
	}
	s.clearSession(c)
	return nil
}

func (s *Server) getMe(c *fiber.Ctx) error {
	u, err := s.opts.DB.UserByID(c.UserContext(), userID(c))
	if err != nil {
		return storeError(err, "account")
	}
	return c.JSON(fiber.Map{"user": u})
}

func (s *Server) requireOwner(c *fiber.Ctx) (*store.User, error) {
	u, err := s.opts.DB.UserByID(c.UserContext(), userID(c))
	if err != nil {
		return nil, storeError(err, "account")
	}
	if !u.IsOwner {
		return nil, errorf(http.StatusForbidden, codeOwnerOnly, "Only the server's owner can manage invitations.")
	}
	return u, nil
}

func (s *Server) postInvitation(c *fiber.Ctx) error {
	u, err := s.requireOwner(c)
	if err != nil {
		return err
	}
	var in struct {
		Note string `json:"note"`
	}
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &in); err != nil {
			return err
		}
	}
	inv, token, err := s.createInvitation(c.UserContext(), u.ID, in.Note)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{
		"invitation": inv, "token": token, "url": s.invitationURL(token),
	})
}

// createInvitation checks the note and stores a new invitation by ownerID,
// under the person's cap of unused ones (Caps.Invitations).
func (s *Server) createInvitation(ctx context.Context, ownerID, note string) (*store.Invitation, string, error) {
	if utf8.RuneCountInString(note) > maxNameLen {
		return nil, "", badRequest(codeInvalidField, "Field \"note\" is longer than %d characters.", maxNameLen)
	}
	inv, token, err := s.opts.DB.CreateInvitationUpTo(ctx, ownerID, strings.TrimSpace(note), s.opts.InvitationTTL, s.opts.Caps.Invitations)
	if err != nil {
		return nil, "", limitRefusal(err)
	}
	return inv, token, nil
}

// invitationURL is the link an invited person opens: the accept-invitation page.
func (s *Server) invitationURL(token string) string { return s.opts.PublicURL + "/invite/" + token }

func (s *Server) getInvitations(c *fiber.Ctx) error {
	u, err := s.requireOwner(c)
	if err != nil {
		return err
	}
	invs, err := s.opts.DB.Invitations(c.UserContext(), u.ID)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"invitations": invs})
}

func (s *Server) deleteInvitation(c *fiber.Ctx) error {
	u, err := s.requireOwner(c)
	if err != nil {
		return err
	}
	if err := s.opts.DB.DeleteInvitation(c.UserContext(), u.ID, c.Params("id")); err != nil {
		return storeError(err, "unused invitation")
	}
	return c.SendStatus(http.StatusNoContent)
}

func (s *Server) postAcceptInvitation(c *fiber.Ctx) error {
	var in newAccount
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	u, err := s.acceptInvitation(c.UserContext(), in)
	if err != nil {
		return err
	}
	return s.signedIn(c, u, http.StatusCreated)
}

// acceptInvitation validates a new account and creates it by spending the
// invitation in.Token.
func (s *Server) acceptInvitation(ctx context.Context, in newAccount) (*store.User, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	u, err := s.opts.DB.AcceptInvitation(ctx, in.Token, in.Email, in.Name, hashPassword(in.Password))
	switch {
	case errors.Is(err, store.ErrInvalidToken):
		return nil, errorf(http.StatusBadRequest, codeInvitationInvalid, "This invitation link is unknown, used or expired; ask the owner for a new one.")
	case errors.Is(err, store.ErrConflict):
		return nil, errorf(http.StatusConflict, codeEmailTaken, "An account with that email exists; sign in instead.")
	}
	return s.logAccount(u, err, "invitation")
}
