package server

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/store"
)

// Settings a person expects (issue 19): change the password, see every
// sign-in (browser, when it started, when last used) and sign any of them out.
//
// Changing the password signs out every other sign-in and keeps this one: a
// person changes a password most often because someone else may know it, and
// those other sign-ins are exactly what that someone would hold. Ending a
// sign-in goes the way sign-out does: its refresh family is revoked (its access
// token is refused at once) and signIns.end closes its event streams,
// extension socket and terminal viewers.

func (s *Server) mountSignIns(api guard) {
	api.Get("/auth/signins", s.person, s.getSignIns)
	api.Delete("/auth/signins/:id", s.person, s.deleteSignIn)
	api.Post("/auth/password", s.person, s.authLimiter(), s.postPassword)
}

// signInView is one sign-in as the API and the page show it.
type signInView struct {
	store.SignIn
	Browser string `json:"browser"`
	Current bool   `json:"current"`
}

func (s *Server) signInList(ctx context.Context, uid, current string) ([]signInView, error) {
	list, err := s.opts.DB.SignIns(ctx, uid)
	if err != nil {
		return nil, err
	}
	out := make([]signInView, 0, len(list))
	for _, si := range list {
		out = append(out, signInView{SignIn: si, Browser: browserLabel(si.UserAgent), Current: si.ID == current})
	}
	return out, nil
}

func (s *Server) getSignIns(c *fiber.Ctx) error {
	list, err := s.signInList(c.UserContext(), userID(c), familyID(c))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"signIns": list})
}

// endSignIn ends one of the person's sign-ins; ending the current one also
// clears this browser's cookies, as sign-out does.
func (s *Server) endSignIn(c *fiber.Ctx, id string) (current bool, err error) {
	if err := s.opts.DB.EndSignIn(c.UserContext(), userID(c), id); err != nil {
		return false, storeError(err, "sign-in")
	}
	s.signins.end(id)
	s.opts.Logger.Info("sign-in ended", "user", userID(c), "signin", id, "current", id == familyID(c))
	if id == familyID(c) {
		s.clearSession(c)
		return true, nil
	}
	return false, nil
}

func (s *Server) deleteSignIn(c *fiber.Ctx) error {
	current, err := s.endSignIn(c, c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"signedOut": true, "current": current})
}

type passwordChange struct {
	Current string `json:"currentPassword"`
	New     string `json:"newPassword"`
}

// changePassword checks the current password, sets the new one and ends the
// person's other sign-ins; it returns how many it ended.
func (s *Server) changePassword(c *fiber.Ctx, in passwordChange) (int, error) {
	u, err := s.opts.DB.UserByID(c.UserContext(), userID(c))
	if err != nil {
		return 0, storeError(err, "account")
	}
	ok, err := checkPassword(u.PasswordHash, in.Current)
	if err != nil {
		return 0, err
	}
	if !ok {
		s.opts.Logger.Info("password change refused", "user", u.ID, "reason", "wrong current password")
		return 0, badRequest(codeBadCredentials, "Your current password is not right; type it again.")
	}
	if err := validPassword(in.New); err != nil {
		return 0, badRequest(codeInvalidField, "The new password must be 8 to 256 bytes long.")
	}
	ended, err := s.opts.DB.SetPassword(c.UserContext(), u.ID, hashPassword(in.New), familyID(c))
	if err != nil {
		return 0, err
	}
	for _, f := range ended {
		s.signins.end(f)
	}
	s.opts.Logger.Info("password changed", "user", u.ID, "signins_ended", len(ended))
	return len(ended), nil
}

func (s *Server) postPassword(c *fiber.Ctx) error {
	var in passwordChange
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	n, err := s.changePassword(c, in)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"changed": true, "signedOutOthers": n})
}

// The pages' side: forms on /settings.

func (s *Server) mountSignInPages(me guard) {
	me.Post("/settings/password", s.authLimiter(), s.postPagePassword)
	me.Post("/settings/signins/:id/signout", s.postPageEndSignIn)
}

func (s *Server) postPagePassword(c *fiber.Ctx) error {
	n, err := s.changePassword(c, passwordChange{Current: c.FormValue("current_password"), New: c.FormValue("new_password")})
	v, verr := s.settingsView(c)
	if verr != nil {
		return verr
	}
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			return err
		}
		v.Data["PasswordError"] = ae.Message
		return s.render(c, ae.Status, "settings", v)
	}
	v.Data["PasswordChanged"] = n
	v.Data["PasswordDone"] = true
	return s.render(c, http.StatusOK, "settings", v)
}

func (s *Server) postPageEndSignIn(c *fiber.Ctx) error {
	current, err := s.endSignIn(c, c.Params("id"))
	if err != nil {
		return err
	}
	if current {
		return c.Redirect("/signin", http.StatusSeeOther)
	}
	return c.Redirect("/settings", http.StatusSeeOther)
}

var (
	reEdge    = regexp.MustCompile(`Edg(?:e|A|iOS)?/`)
	reFirefox = regexp.MustCompile(`(?:Firefox|FxiOS)/`)
	reChrome  = regexp.MustCompile(`(?:Chrome|CriOS|Chromium)/`)
	reSafari  = regexp.MustCompile(`Version/[\d.]+.*Safari/`)
)

// browserLabel names the browser and system in a user agent the way a person
// recognises their own devices ("Chrome on macOS"); it is a label, not a
// security fact (a user agent says what the client claims).
func browserLabel(ua string) string {
	if strings.TrimSpace(ua) == "" {
		return "Unknown browser"
	}
	name := ""
	switch {
	case reEdge.MatchString(ua):
		name = "Edge"
	case strings.Contains(ua, "OPR/"):
		name = "Opera"
	case reFirefox.MatchString(ua):
		name = "Firefox"
	case reChrome.MatchString(ua):
		name = "Chrome"
	case reSafari.MatchString(ua):
		name = "Safari"
	case strings.HasPrefix(ua, "curl/"):
		return "curl"
	case strings.HasPrefix(ua, "Go-http-client/"):
		return "A Go program"
	default:
		return "Unknown browser"
	}
	if strings.Contains(ua, "HeadlessChrome") {
		name = "Headless Chrome"
	}
	if sys := systemLabel(ua); sys != "" {
		return name + " on " + sys
	}
	return name
}

func systemLabel(ua string) string {
	switch {
	case strings.Contains(ua, "iPhone") || strings.Contains(ua, "iPad"):
		return "iOS"
	case strings.Contains(ua, "Android"):
		return "Android"
	case strings.Contains(ua, "Windows"):
		return "Windows"
	case strings.Contains(ua, "Mac OS X") || strings.Contains(ua, "Macintosh"):
		return "macOS"
	case strings.Contains(ua, "CrOS"):
		return "ChromeOS"
	case strings.Contains(ua, "Linux"):
		return "Linux"
	}
	return ""
}
