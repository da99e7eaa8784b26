package server

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/store"
)

// mountPages registers the web app. Every page runs behind the CSRF cookie
// and check, like the JSON API; signed-in pages add pageSession.
func (s *Server) mountPages() {
	s.app.Use("/static", staticHandler())
	open := guard{s.app, []fiber.Handler{s.htmlErrors, s.ensureCSRFCookie, s.csrf}}
	slow := s.authLimiter()
	open.Get("/setup", s.pageSetup)
	open.Post("/setup", slow, s.postPageSetup)
	open.Get("/signin", s.pageSignin)
	open.Post("/signin", slow, s.postPageSignin)
	open.Get("/signup", s.pageSignup)
	open.Post("/signup", slow, s.postPageSignup)
	open.Get("/invite/:token", s.pageInvite)
	open.Post("/invite/:token", slow, s.postPageInvite)
	open.Post("/signout", s.postPageSignout)

	me := open.with(s.pageSession)
	me.Get("/settings", s.pageSettings)
	me.Post("/settings/invitations", s.postPageInvitation)
	me.Post("/settings/invitations/:id/withdraw", s.postPageWithdrawInvitation)
	s.mountSignInPages(me)
	s.mountWorkspacePages(me)
	s.mountApprovalPages(me)
	s.mountSitePages(me)
	s.mountMachinePages(me)
}

// accountForm reads the fields the setup, sign-up and invitation forms share.
func accountForm(c *fiber.Ctx) newAccount {
	return newAccount{Email: c.FormValue("email"), Name: c.FormValue("name"), Password: c.FormValue("password")}
}

// formView is a signed-out form page with the values to keep.
func formView(title string, in newAccount) view {
	return view{Title: title, Data: fiber.Map{"Email": in.Email, "Name": in.Name}}
}

// formFailed re-renders a form page with its error, or hands a server error
// to the error page.
func (s *Server) formFailed(c *fiber.Ctx, page string, v view, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err
	}
	v.Error = ae.Message
	return s.render(c, ae.Status, page, v)
}

func (s *Server) pageSetup(c *fiber.Ctx) error {
	has, err := s.opts.DB.HasUsers(c.UserContext())
	if err != nil {
		return err
	}
	if has {
		return c.Redirect("/signin", http.StatusSeeOther)
	}
	return s.render(c, http.StatusOK, "setup", formView("Set up Tabbridge", newAccount{}))
}

func (s *Server) postPageSetup(c *fiber.Ctx) error {
	in := accountForm(c)
	u, err := s.createOwner(c.UserContext(), in)
	if err != nil {
		return s.formFailed(c, "setup", formView("Set up Tabbridge", in), err)
	}
	return s.pageSignedIn(c, u, "/workspaces")
}

// pageSignedIn starts a sign-in and sends the browser on.
func (s *Server) pageSignedIn(c *fiber.Ctx, u *store.User, next string) error {
	if _, err := s.signIn(c, u.ID); err != nil {
		return err
	}
	return c.Redirect(safeNext(next), http.StatusSeeOther)
}

func (s *Server) pageSignin(c *fiber.Ctx) error {
	has, err := s.opts.DB.HasUsers(c.UserContext())
	if err != nil {
		return err
	}
	if !has {
		return c.Redirect("/setup", http.StatusSeeOther)
	}
	if uid, _, err := s.cookieSession(c); err == nil && uid != "" {
		return c.Redirect(safeNext(c.Query("next")), http.StatusSeeOther)
	}
	return s.render(c, http.StatusOK, "signin", s.signinView(c, ""))
}

func (s *Server) signinView(c *fiber.Ctx, email string) view {
	return view{Title: "Sign in", Data: fiber.Map{"Email": email, "Next": safeNext(c.Query("next", c.FormValue("next"))), "OpenSignup": s.opts.OpenSignup}}
}

func (s *Server) postPageSignin(c *fiber.Ctx) error {
	email := c.FormValue("email")
	u, err := s.checkCredentials(c.UserContext(), email, c.FormValue("password"))
	if err != nil {
		return s.formFailed(c, "signin", s.signinView(c, email), err)
	}
	return s.pageSignedIn(c, u, c.FormValue("next"))
}

func (s *Server) pageSignup(c *fiber.Ctx) error {
	if !s.opts.OpenSignup {
		return errSignupClosed()
	}
	return s.render(c, http.StatusOK, "signup", formView("Create an account", newAccount{}))
}

func (s *Server) postPageSignup(c *fiber.Ctx) error {
	in := accountForm(c)
	u, err := s.createOpenAccount(c.UserContext(), in)
	if err != nil {
		return s.formFailed(c, "signup", formView("Create an account", in), err)
	}
	return s.pageSignedIn(c, u, "/workspaces")
}

func (s *Server) pageInvite(c *fiber.Ctx) error {
	v := formView("Join Tabbridge", newAccount{})
	v.Data["Token"] = c.Params("token")
	return s.render(c, http.StatusOK, "invite", v)
}

func (s *Server) postPageInvite(c *fiber.Ctx) error {
	in := accountForm(c)
	in.Token = c.Params("token")
	u, err := s.acceptInvitation(c.UserContext(), in)
	if err != nil {
		v := formView("Join Tabbridge", in)
		v.Data["Token"] = in.Token
		return s.formFailed(c, "invite", v, err)
	}
	return s.pageSignedIn(c, u, "/workspaces")
}

func (s *Server) postPageSignout(c *fiber.Ctx) error {
	if err := s.endSession(c); err != nil {
		return err
	}
	return c.Redirect("/signin", http.StatusSeeOther)
}

// settingsView loads the account and, for the owner, the invitations.
func (s *Server) settingsView(c *fiber.Ctx) (view, error) {
	u, err := s.opts.DB.UserByID(c.UserContext(), userID(c))
	if err != nil {
		return view{}, storeError(err, "account")
	}
	v := view{Title: "Settings", Nav: "settings", Src: "/settings", User: u, Data: fiber.Map{}}
	signIns, err := s.signInList(c.UserContext(), u.ID, familyID(c))
	if err != nil {
		return view{}, err
	}
	v.Data["SignIns"] = signIns
	if u.IsOwner {
		invs, err := s.opts.DB.Invitations(c.UserContext(), u.ID)
		if err != nil {
			return view{}, err
		}
		v.Data["Invitations"] = invs
	}
	return v, nil
}

func (s *Server) pageSettings(c *fiber.Ctx) error {
	v, err := s.settingsView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, "settings", v)
}

// postPageInvitation creates an invitation and shows its link this once.
func (s *Server) postPageInvitation(c *fiber.Ctx) error {
	u, err := s.requireOwner(c)
	if err != nil {
		return err
	}
	inv, token, err := s.createInvitation(c.UserContext(), u.ID, c.FormValue("note"))
	if err != nil {
		v, verr := s.settingsView(c)
		if verr != nil {
			return verr
		}
		v.Data["Note"] = c.FormValue("note")
		return s.formFailed(c, "settings", v, err)
	}
	v, err := s.settingsView(c)
	if err != nil {
		return err
	}
	v.Data["NewInvitation"] = inv
	v.Data["NewURL"] = s.invitationURL(token)
	return s.render(c, http.StatusCreated, "settings", v)
}

func (s *Server) postPageWithdrawInvitation(c *fiber.Ctx) error {
	u, err := s.requireOwner(c)
	if err != nil {
		return err
	}
	if err := s.opts.DB.DeleteInvitation(c.UserContext(), u.ID, c.Params("id")); err != nil {
		return storeError(err, "unused invitation")
	}
	return c.Redirect("/settings", http.StatusSeeOther)
}
