package server

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/store"
)

// The web app the extension's popup frames: server-rendered pages from
// html/template, a stylesheet and one small script, all embedded so the
// binary needs nothing else to serve them.
//
//go:embed web/templates/*.html
var templateFiles embed.FS

//go:embed web/static
var staticFiles embed.FS

// pages holds one parsed template set per page: the shared layout plus that
// page's own file, so pages may each define "main" without clashing.
type pages struct {
	byName map[string]*template.Template
}

func loadPages() (*pages, error) {
	funcs := template.FuncMap{"statusLabel": statusLabel, "at": at, "size": size, "took": took,
		"requestLabel": requestLabel, "outcomeLabel": outcomeLabel, "outcomeClass": outcomeClass, "requestClass": requestClass, "answering": answering, "personError": personError,
		"inc": func(i int) int { return i + 1 }, "copyRow": newCopyRow, "shown": shown, "shownJSON": shownJSON, "shownValue": shownValue,
		"revoke": newRevoke, "empty": func(title, text string) emptyState { return emptyState{title, text} }}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "web/templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("load pages: %w", err)
	}
	files, err := fs.Glob(templateFiles, "web/templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("load pages: %w", err)
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFiles, f)
		if err != nil {
			return nil, fmt.Errorf("load page %s: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// navItem is one entry of the app's navigation. Later features add theirs here.
// Group says where it sits: "" in the top row, "more" in the More menu (the
// pages a person opens now and then), "user" in the menu under their name. Five
// top-level entries fit one row at 440 px and never clip at 1280 px (issue 19).
type navItem struct {
	Key, Label, Path, Group string
}

var navItems = []navItem{
	{"inbox", "Inbox", "/", ""},
	{"workspaces", "Workspaces", "/workspaces", ""},
	{"sites", "Sites", "/sites", ""},
	{"machines", "Machines", "/machines", ""},
	{"browsers", "Browsers", "/browsers", "more"},
	{"grants", "Grants", "/grants", "more"},
	{"audit", "Audit", "/audit", "more"},
	{"settings", "Settings", "/settings", "user"},
}

// MoreLabel names the More menu: the current page's name when it is one of
// the menu's, so the top row always says where the person is.
func (v view) MoreLabel() string {
	for _, it := range v.Items {
		if it.Group == "more" && it.Key == v.Nav {
			return it.Label
		}
	}
	return "More"
}

// InGroup reports whether the current page is in the navigation group g.
func (v view) InGroup(g string) bool {
	for _, it := range v.Items {
		if it.Group == g && it.Key == v.Nav {
			return true
		}
	}
	return false
}

// Initial is the first letter of the person's name, for the compact header.
func (v view) Initial() string {
	if v.User == nil {
		return ""
	}
	for _, r := range strings.TrimSpace(v.User.Name) {
		return strings.ToUpper(string(r))
	}
	return "?"
}

// view is what every page template receives.
type view struct {
	Title string      // the page's name, before " · Tabbridge"
	Nav   string      // key of the active navItem
	Src   string      // the page's own GET path: live refreshes fetch it, and the address bar shows it
	User  *store.User // nil when signed out
	CSRF  string
	Error string // a form's error, shown above it
	Data  fiber.Map
	Now   time.Time
	Items []navItem
	// Pending counts the person's requests waiting for an answer, for the
	// Inbox badge in the navigation; set by render.
	Pending int
	// Arrived is "cross-site" when another site sent the browser to this
	// page (set by render; see arrivedFrom).
	Arrived string
	// Mark is where the person's live events stood when the request came,
	// before the page's data was read (set by render): the page opens its
	// event stream with it and is told if it missed one in between.
	Mark string
}

// arrivedFrom says whether another site navigated the browser to this page:
// the browser's own Sec-Fetch headers, which no page can set, name a
// top-level navigation started by a page of another site (window.open, a
// link, or a popup setting its opener's location). Such a page's buttons
// wait until the window has held focus a moment (static/lib/settle.js):
// the site may have placed it under the person's second click of a
// double-click it asked for, so the click lands on Allow (double-
// clickjacking, which frame-ancestors cannot stop, as nothing is framed).
// Typed addresses, bookmarks, the app's own links and the popup's frame
// are not touched.
func arrivedFrom(c *fiber.Ctx) string {
	switch c.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		if c.Get("Sec-Fetch-Dest") == "document" {
			return "cross-site"
		}
	}
	return ""
}

// render writes a page with status.
func (s *Server) render(c *fiber.Ctx, status int, name string, v view) error {
	t, ok := s.pages.byName[name]
	if !ok {
		return fmt.Errorf("render: no page %q", name)
	}
	v.CSRF = s.pageCSRF(c)
	v.Arrived = arrivedFrom(c)
	v.Now = s.opts.Now()
	v.Items = navItems
	if v.User != nil {
		v.Mark, _ = c.Locals(localMark).(string)
		n, err := s.gate.PendingCount(c.UserContext(), v.User.ID)
		if err != nil {
			return fmt.Errorf("render %s: %w", name, err)
		}
		v.Pending = n
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	s.pageHeaders(c)
	c.Status(status).Type("html", "utf-8")
	return c.Send(buf.Bytes())
}

// pageHeaders keeps pages out of caches (they can show secrets once) and out
// of other sites' frames (clickjacking the Allow button), and sends Referer
// only back to this server, so an invitation link never leaks to another site.
// ("no-referrer" would make Chrome send "Origin: null" on form posts, which
// the CSRF check rightly refuses.)
func (s *Server) pageHeaders(c *fiber.Ctx) {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderReferrerPolicy, "same-origin")
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors "+s.frameAncestors())
}

// frameAncestors lists who may frame the app: itself and the trusted
// extensions, whose popup is this app in a frame.
func (s *Server) frameAncestors() string {
	if s.opts.AnyExtension {
		return "'self' chrome-extension:"
	}
	out := "'self'"
	for _, id := range s.opts.ExtensionIDs {
		out += " chrome-extension://" + id
	}
	return out
}

// timeAt is the argument of the "time" template: a time and the view whose
// clock it is read against.
type timeAt struct {
	V view
	T time.Time
}

func at(v view, t time.Time) timeAt { return timeAt{v, t} }

// copyRow is the argument of the "copy-row" template: a labelled block of
// text (a command, an address, a one-time secret) with a button that copies
// it (app.js, data-copy). Its element ids all derive from ID.
type copyRow struct {
	ID, Label, Text, Button string
	Primary                 bool // the page's main action: the button is primary
}

func newCopyRow(id, label, text, button string, primary bool) copyRow {
	return copyRow{ID: id, Label: label, Text: text, Button: button, Primary: primary}
}

// revokeForm is the argument of the "revoke" template: one item's button
// that ends it (a token revoked, an app disconnected), posting to Action.
type revokeForm struct {
	Action, ID, Label, Button, CSRF string
}

func newRevoke(action, id, label, button, csrf string) revokeForm {
	return revokeForm{Action: action, ID: id, Label: label, Button: button, CSRF: csrf}
}

// emptyState is the argument of the "empty" template: what a list without
// items says instead, and what to do about it.
type emptyState struct{ Title, Text string }

// answerAt is the argument of the "answer-forms" template: the request, the
// page to come back to, and the view (for its CSRF token and names).
type answerAt struct {
	V    view
	R    approvals.Request
	Back string
}

func answering(v view, r approvals.Request, back string) answerAt { return answerAt{v, r, back} }

// Ago says how long before v.Now t was, in words a person reads at a glance.
func (v view) Ago(t time.Time) string {
	d := v.Now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute") + " ago"
	case d < 24*time.Hour:
		return plural(int(d/time.Hour), "hour") + " ago"
	case d < 30*24*time.Hour:
		return plural(int(d/(24*time.Hour)), "day") + " ago"
	}
	return t.UTC().Format("2 Jan 2006")
}

// In says how long after v.Now t is (expiry times).
func (v view) In(t time.Time) string {
	d := t.Sub(v.Now)
	switch {
	case d <= 0:
		return "expired"
	case d < time.Hour:
		return "in " + plural(int(d/time.Minute)+1, "minute")
	case d < 48*time.Hour:
		return "in " + plural(int(d/time.Hour), "hour")
	}
	return "in " + plural(int((d+12*time.Hour)/(24*time.Hour)), "day")
}

// Countdown is a request's "expires in 4:59", written as the page's script writes it each second
// (static/lib/live.js countdown): a first tick that changed the text's length could rewrap the
// line and move the answer buttons below it.
func (v view) Countdown(t time.Time) string {
	left := int((t.Sub(v.Now) + time.Second/2) / time.Second)
	if left <= 0 {
		return "expired"
	}
	return fmt.Sprintf("expires in %d:%02d", left/60, left%60)
}

// Stamp is the exact UTC time, for <time datetime> and tooltips.
func (v view) Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Past reports whether t has come (an expiry that has passed).
func (v view) Past(t time.Time) bool { return !v.Now.Before(t) }

// Full is the exact time written for a person.
func (v view) Full(t time.Time) string { return t.UTC().Format("2 Jan 2006, 15:04 UTC") }

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

var statusLabels = map[string]string{
	"notstarted": "Not started", "ongoing": "Ongoing", "blocked": "Blocked",
	"completed": "Completed", "rejected": "Rejected",
}

func statusLabel(s string) string {
	if l, ok := statusLabels[s]; ok {
		return l
	}
	return s
}

// htmlErrors turns errors from page handlers (and the guards in front of
// them) into an error page with the same status, instead of the JSON error
// shape the API answers with.
func (s *Server) htmlErrors(c *fiber.Ctx) error {
	err := c.Next()
	if err == nil {
		return nil
	}
	status, msg := http.StatusInternalServerError, "Something went wrong on the server; try again, and report it if it keeps happening."
	var ae *apiError
	var fe *fiber.Error
	switch {
	case errors.As(err, &ae):
		s.logRefusal(c, ae)
		status, msg = ae.Status, ae.Message
	case errors.As(err, &fe) && fe.Code == http.StatusNotFound:
		status, msg = fe.Code, "There is no such page."
	case errors.As(err, &fe):
		status, msg = fe.Code, fe.Message
	default:
		s.opts.Logger.Error("page failed", "method", c.Method(), "path", c.Path(), "err", err)
	}
	return s.render(c, status, "error", view{Title: http.StatusText(status), Error: msg, User: s.pageUser(c)})
}

// notFoundPage answers a path no route took (mounted after every route). A
// browser asking for a page (Accept: text/html) gets the app's "There is no
// such page" page, with the navigation when it is signed in; the API
// (/api/…) and every other client keep the JSON error.
func (s *Server) notFoundPage(c *fiber.Ctx) error {
	p := c.Path()
	if p == "/api" || strings.HasPrefix(p, "/api/") || !strings.Contains(c.Get(fiber.HeaderAccept), "text/html") {
		return c.Next() // fiber's own 404 or 405, as JSON from handleError
	}
	if c.Get(fiber.HeaderAuthorization) == "" {
		if uid, family, err := s.cookieSession(c); err == nil {
			c.Locals(localUser, uid)
			c.Locals(localFamily, family)
			c.Locals(localMark, s.live.Mark(uid))
		}
	}
	// The navigation's sign-out form needs the token: render gives the
	// sign-in's (pageCSRF); the cookie's stands in for a signed-out browser.
	c.Locals(localCSRF, c.Cookies(cookieCSRF))
	return s.htmlErrors(c) // its c.Next() meets fiber's 404 or 405 and shows it as a page
}

// pageUser is the signed-in person of a page request, or nil.
func (s *Server) pageUser(c *fiber.Ctx) *store.User {
	if id := userID(c); id != "" {
		if u, err := s.opts.DB.UserByID(c.UserContext(), id); err == nil {
			return u
		}
	}
	return nil
}

// staticHandler serves the embedded stylesheet and script. They change only
// with the binary, so browsers may keep them for an hour.
func staticHandler() fiber.Handler {
	sub, err := fs.Sub(staticFiles, "web/static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	return filesystem.New(filesystem.Config{Root: http.FS(sub), MaxAge: 3600})
}

// safeNext keeps a post-sign-in destination on this server: a local path,
// never "//host" or a scheme. Browsers drop tabs and newlines from a URL and
// read "\\" as "/", so "/\t/evil.example" would become "//evil.example":
// any control character or backslash sends the person home instead.
func safeNext(next string) string {
	if strings.IndexFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) >= 0 ||
		!strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}
