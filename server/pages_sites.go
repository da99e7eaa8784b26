package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/cluster"
)

// The events of shared sites and browsers (docs/PROTOCOL.md, "Server-sent
// events (web app)"). The site ones come from the API and page handlers;
// the browser ones and site.tools from the hub, through hubChanged.
const (
	evSiteShared          = "site.shared"
	evSiteUpdated         = "site.updated"
	evSiteUnshared        = "site.unshared"
	evSiteTools           = "site.tools"
	evBrowserConnected    = "browser.connected"
	evBrowserDisconnected = "browser.disconnected"
	evBrowserRenamed      = "browser.renamed"
	evBrowserSites        = "browser.sites"
)

// hubChanged turns a change the hub saw into an event for the person's
// pages. The hub calls it outside its locks; publish never blocks.
func (s *Server) hubChanged(uid string, ch bridge.Change) {
	browser := fiber.Map{"id": ch.BrowserID}
	switch ch.Kind {
	case bridge.ChangeConnected:
		s.opts.Logger.Info("browser linked", "user", uid, "browser", ch.BrowserID)
		s.metrics.browsers.Inc()
		s.link(cluster.LinkBrowser, ch.BrowserID, uid, true)
		s.publish(uid, evBrowserConnected, fiber.Map{"browser": browser})
		s.sendApprovalCount(uid, ch.BrowserID)
	case bridge.ChangeDisconnected:
		s.opts.Logger.Info("browser gone", "user", uid, "browser", ch.BrowserID)
		s.metrics.browsers.Dec()
		s.link(cluster.LinkBrowser, ch.BrowserID, uid, false)
		s.publish(uid, evBrowserDisconnected, fiber.Map{"browser": browser})
	case bridge.ChangeOpen:
		s.publish(uid, evBrowserSites, fiber.Map{"browser": browser})
	case bridge.ChangeTools:
		s.publish(uid, evSiteTools, fiber.Map{"site": fiber.Map{"origin": ch.Origin}, "browser": browser})
	}
}

// The sites and browsers pages: what is shared, where it is open, its
// tools and setting; and every browser that has connected, with rename.
func (s *Server) mountSitePages(me guard) {
	me.Get("/sites", s.pageSites)
	me.Post("/sites", s.postPageShareSite)
	me.Post("/sites/:id/ask", s.postPageAskAll)
	me.Post("/sites/:id/move", s.postPageMoveSite)
	me.Get("/sites/:id/delete", s.pageUnshareSite)
	me.Post("/sites/:id/delete", s.postPageUnshareSite)
	me.Get("/browsers", s.pageBrowsers)
	me.Post("/browsers/:id/rename", s.postPageRenameBrowser)
}

// sitePage is a shared site as the sites page shows it.
type sitePage struct {
	siteView
	// Online: a connected browser has a tab of the site open.
	Online bool
}

func (s *Server) sitesView(c *fiber.Ctx) (view, error) {
	uid := userID(c)
	views, err := s.siteViews(c, uid)
	if err != nil {
		return view{}, err
	}
	ws, err := s.opts.DB.Workspaces(c.UserContext(), uid)
	if err != nil {
		return view{}, err
	}
	sites := make([]sitePage, len(views))
	for i, v := range views {
		sites[i] = sitePage{siteView: v, Online: len(v.OpenIn) > 0}
	}
	return view{Title: "Sites", Nav: "sites", Src: "/sites", User: s.pageUser(c),
		Data: fiber.Map{"Sites": sites, "Workspaces": ws, "Browsers": len(s.hub.Connected(uid)) + s.dir.browsers(uid)}}, nil
}

func (s *Server) pageSites(c *fiber.Ctx) error {
	v, err := s.sitesView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, "sites", v)
}

// sitesFormFailed shows the sites page again with a form's error next to
// the form that failed (form: "share", or a site's id) and what was typed.
func (s *Server) sitesFormFailed(c *fiber.Ctx, form string, err error) error {
	v, verr := s.sitesView(c)
	if verr != nil {
		return verr
	}
	v.Data["Failed"] = form
	v.Data["Origin"] = c.FormValue("origin")
	v.Data["WorkspaceID"] = c.FormValue("workspaceId")
	return s.formFailed(c, "sites", v, err)
}

// postPageShareSite shares a site typed into the page (the popup shares the
// current tab's; this is for full-size use).
func (s *Server) postPageShareSite(c *fiber.Ctx) error {
	_, _, err := s.shareSite(c, userID(c), c.FormValue("origin"), c.FormValue("workspaceId"))
	if isNotFound(err) {
		// A workspace picked in this form that is gone (or not the
		// person's): say so at the form rather than on an error page.
		err = errorf(http.StatusNotFound, codeNotFound, "That workspace no longer exists; pick another.")
	}
	if err != nil {
		return s.sitesFormFailed(c, "share", err)
	}
	return c.Redirect("/sites", http.StatusSeeOther)
}

// isNotFound reports a 404 answer.
func isNotFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

func (s *Server) postPageAskAll(c *fiber.Ctx) error {
	var on bool
	switch c.FormValue("askAll") {
	case "on":
		on = true
	case "off":
	default:
		return s.sitesFormFailed(c, c.Params("id"), badRequest(codeInvalidField, "Choose whether to ask before every tool: send askAll=on or askAll=off."))
	}
	if _, err := s.setAskAll(c, userID(c), c.Params("id"), on); err != nil {
		return err
	}
	return c.Redirect("/sites", http.StatusSeeOther)
}

// postPageMoveSite shares a site with another workspace instead.
func (s *Server) postPageMoveSite(c *fiber.Ctx) error {
	uid := userID(c)
	site, err := s.opts.DB.SharedSite(c.UserContext(), uid, c.Params("id"))
	if err != nil {
		return storeError(err, "shared site")
	}
	if c.FormValue("workspaceId") == "" {
		return s.sitesFormFailed(c, site.ID, badRequest(codeInvalidField, "Choose the workspace to move %s to.", site.Origin))
	}
	if _, _, err := s.shareSite(c, uid, site.Origin, c.FormValue("workspaceId")); err != nil {
		return err
	}
	return c.Redirect("/sites", http.StatusSeeOther)
}

func (s *Server) pageUnshareSite(c *fiber.Ctx) error {
	site, err := s.opts.DB.SharedSite(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "shared site")
	}
	return s.render(c, http.StatusOK, "site_delete", view{Title: "Stop sharing " + site.Origin, Nav: "sites",
		Src: "/sites/" + site.ID + "/delete", User: s.pageUser(c), Data: fiber.Map{"Site": site}})
}

func (s *Server) postPageUnshareSite(c *fiber.Ctx) error {
	if _, err := s.unshareSite(c, userID(c), c.Params("id")); err != nil {
		return err
	}
	return c.Redirect("/sites", http.StatusSeeOther)
}

// browserPage is a browser as the browsers page shows it.
type browserPage struct {
	browserView
	// Sites names the shared sites it has open, with their workspaces.
	Sites []browserSite
}

type browserSite struct {
	Origin, Workspace string
	Tabs              int
	LastUsed          time.Time
}

func (s *Server) browsersView(c *fiber.Ctx) (view, error) {
	uid := userID(c)
	rows, err := s.opts.DB.Browsers(c.UserContext(), uid)
	if err != nil {
		return view{}, err
	}
	sites, err := s.siteViews(c, uid)
	if err != nil {
		return view{}, err
	}
	live := map[string]bridge.BrowserInfo{}
	for _, b := range s.connectedEverywhere(c.UserContext(), uid) {
		live[b.BrowserID] = b
	}
	out := make([]browserPage, len(rows))
	for i, r := range rows {
		out[i].browserView = browserView{ID: r.BrowserID, Name: r.Name, Version: r.Version, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen}
		if b, ok := live[r.BrowserID]; ok {
			since := b.ConnectedAt
			out[i].Connected, out[i].ConnectedSince, out[i].LastPing, out[i].Version = true, &since, b.LastPing, b.Version
		}
		for _, site := range sites {
			for _, o := range site.OpenIn {
				if o.BrowserID == r.BrowserID {
					out[i].Sites = append(out[i].Sites, browserSite{Origin: site.Origin, Workspace: site.WorkspaceName, Tabs: o.Tabs, LastUsed: o.LastUsed})
				}
			}
		}
	}
	return view{Title: "Browsers", Nav: "browsers", Src: "/browsers", User: s.pageUser(c),
		Data: fiber.Map{"Browsers": out}}, nil
}

func (s *Server) pageBrowsers(c *fiber.Ctx) error {
	v, err := s.browsersView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, "browsers", v)
}

func (s *Server) postPageRenameBrowser(c *fiber.Ctx) error {
	_, err := s.renameBrowser(c, userID(c), c.Params("id"), c.FormValue("name"))
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
		v, verr := s.browsersView(c)
		if verr != nil {
			return verr
		}
		v.Data["Failed"] = c.Params("id")
		v.Data["Name"] = c.FormValue("name")
		return s.formFailed(c, "browsers", v, errorf(http.StatusBadRequest, ae.Code, "%s", browserNameError(ae.Message)))
	}
	if err != nil {
		return err
	}
	return c.Redirect("/browsers", http.StatusSeeOther)
}

// browserNameError words the name check for the form, which has a label
// rather than a field name.
func browserNameError(msg string) string {
	switch msg {
	case `Field "name" is required and must not be blank.`:
		return "Type a name for the browser."
	}
	return msg
}
