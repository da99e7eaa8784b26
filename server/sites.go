package server

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
)

// pushSites sends the person's new list of shared sites to every browser of
// theirs. The change itself has succeeded; a failed push is logged, and the
// browsers catch up on their next connect.
func (s *Server) pushSites(c *fiber.Ctx, uid string) {
	s.sitesChanged(uid) // and to those the other instances hold (forward_people.go)
	if err := s.hub.PushSites(c.UserContext(), uid); err != nil {
		s.opts.Logger.Warn("push shared sites", "user", uid, "err", err)
	}
}

// siteView is a shared site with the connected browsers that have it open.
type siteView struct {
	store.SharedSite
	OpenIn []openIn `json:"openIn"`
	// AskAll is the "ask for every tool" setting.
	AskAll bool `json:"askAll"`
	// Tools are the site's tools, live or as last announced.
	Tools []sitetools.ToolSummary `json:"tools"`
	// Live is true while an open tab of the site announces its tools.
	Live bool `json:"live"`
}

type openIn struct {
	BrowserID string    `json:"browserId"`
	Name      string    `json:"name"`
	LastUsed  time.Time `json:"lastUsed"`
	Tabs      int       `json:"tabs"`
}

func (s *Server) getSites(c *fiber.Ctx) error {
	out, err := s.siteViews(c, userID(c))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"sites": out})
}

// siteViews lists the person's shared sites with the connected browsers that
// have each open — by their sites.open list or a page that announced tools —
// and each site's setting and tools.
func (s *Server) siteViews(c *fiber.Ctx, uid string) ([]siteView, error) {
	rows, err := s.opts.DB.SharedSites(c.UserContext(), uid)
	if err != nil {
		return nil, err
	}
	browsers := s.connectedEverywhere(c.UserContext(), uid)
	out := make([]siteView, len(rows))
	for i, r := range rows {
		out[i] = siteView{SharedSite: r, OpenIn: s.openIn(uid, r.Origin, browsers), Tools: []sitetools.ToolSummary{}}
		if err := s.fillSite(c, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// openIn lists the browsers that have origin open. A browser's sites.open
// entry and its announcing pages may disagree for a moment (one message
// arrives before the other): the larger tab count and later use win.
func (s *Server) openIn(uid, origin string, browsers []bridge.BrowserInfo) []openIn {
	docs := s.catalog.OpenIn(uid, origin)
	out := []openIn{}
	for _, b := range browsers {
		o := openIn{BrowserID: b.BrowserID, Name: b.Name}
		for _, site := range b.OpenSites {
			if site.Origin == origin {
				o.Tabs, o.LastUsed = site.Tabs, site.LastUsed
			}
		}
		d, announced := docs[b.BrowserID]
		if announced {
			o.Tabs = max(o.Tabs, d.Tabs)
			if d.LastUsed.After(o.LastUsed) {
				o.LastUsed = d.LastUsed.UTC()
			}
		}
		if o.Tabs > 0 || announced || !o.LastUsed.IsZero() {
			out = append(out, o)
		}
	}
	return out
}

type shareBody struct {
	Origin      string `json:"origin"`
	WorkspaceID string `json:"workspaceId"`
}

// postSite shares one origin with one workspace; an origin already shared
// with another workspace moves (docs/DECISIONS.md).
func (s *Server) postSite(c *fiber.Ctx) error {
	var in shareBody
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	site, prev, err := s.shareSite(c, userID(c), in.Origin, in.WorkspaceID)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if prev != "" {
		status = http.StatusOK
	}
	return c.Status(status).JSON(fiber.Map{"site": site, "moved": prev != "" && prev != site.WorkspaceID})
}

// shareSite shares origin with a workspace of uid's (a new one under the
// person's cap, Caps.SharedSites), or moves it there, and tells the
// person's browsers and pages. prev is the workspace it was shared
// with before ("" when it was not shared).
func (s *Server) shareSite(c *fiber.Ctx, uid, rawOrigin, workspaceID string) (site *store.SharedSite, prev string, err error) {
	origin, err := sitetools.NormalizeOrigin(rawOrigin)
	if err != nil {
		return nil, "", badRequest(codeInvalidOrigin, "%s.", strings.TrimPrefix(err.Error(), sitetools.ErrOrigin.Error()+": "))
	}
	if workspaceID == "" {
		return nil, "", badRequest(codeInvalidField, "Field \"workspaceId\" is required: the workspace to share the site with.")
	}
	site, prev, err = s.opts.DB.ShareSiteUpTo(c.UserContext(), uid, workspaceID, origin, s.opts.Caps.SharedSites)
	if err != nil {
		return nil, "", limitRefusal(storeError(err, "workspace"))
	}
	if prev != "" && prev != site.WorkspaceID {
		// Moved: the previous workspace's agents lose it, with their grants
		// and waiting requests, as if it had been unshared from them.
		if err := s.gate.ForgetSite(c.UserContext(), uid, prev, origin); err != nil {
			return nil, "", err
		}
	}
	s.pushSites(c, uid)
	switch {
	case prev == "":
		s.publish(uid, evSiteShared, fiber.Map{"site": site})
	case prev != site.WorkspaceID:
		s.publish(uid, evSiteUpdated, fiber.Map{"site": site, "movedFrom": prev})
	}
	return site, prev, nil
}

func (s *Server) deleteSite(c *fiber.Ctx) error {
	if _, err := s.unshareSite(c, userID(c), c.Params("id")); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// unshareSite stops sharing one of uid's sites and tells the person's
// browsers and pages.
func (s *Server) unshareSite(c *fiber.Ctx, uid, id string) (*store.SharedSite, error) {
	site, err := s.opts.DB.SharedSite(c.UserContext(), uid, id)
	if err != nil {
		return nil, storeError(err, "shared site")
	}
	if err := s.opts.DB.UnshareSite(c.UserContext(), uid, site.ID); err != nil {
		return nil, storeError(err, "shared site")
	}
	s.catalog.ForgetSite(uid, site.Origin)
	if err := s.gate.ForgetSite(c.UserContext(), uid, "", site.Origin); err != nil {
		return nil, err
	}
	s.pushSites(c, uid)
	s.publish(uid, evSiteUnshared, fiber.Map{"site": fiber.Map{"id": site.ID, "origin": site.Origin}})
	return site, nil
}

// patchSite changes a shared site's settings: {"askAll": true} asks the
// person about every tool of the site, read-only ones too.
func (s *Server) patchSite(c *fiber.Ctx) error {
	var in struct {
		AskAll *bool `json:"askAll"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if in.AskAll == nil {
		return badRequest(codeInvalidField, "Send {\"askAll\": true} or {\"askAll\": false}.")
	}
	site, err := s.setAskAll(c, userID(c), c.Params("id"), *in.AskAll)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"site": siteView{SharedSite: *site, OpenIn: []openIn{}, AskAll: *in.AskAll}})
}

// setAskAll sets the "ask for every tool" setting of one of uid's sites.
func (s *Server) setAskAll(c *fiber.Ctx, uid, id string, on bool) (*store.SharedSite, error) {
	site, err := s.opts.DB.SharedSite(c.UserContext(), uid, id)
	if err != nil {
		return nil, storeError(err, "shared site")
	}
	if err := s.gate.SetAskAll(c.UserContext(), uid, site.Origin, on); err != nil {
		return nil, err
	}
	s.signal(topicCache, []byte(cacheAskAll))
	s.publish(uid, evSiteUpdated, fiber.Map{"site": site, "askAll": on})
	return site, nil
}

// browserView is a browser the person has connected, live or not.
type browserView struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Version        string            `json:"version"`
	FirstSeen      time.Time         `json:"firstSeen"`
	LastSeen       time.Time         `json:"lastSeen"`
	Connected      bool              `json:"connected"`
	ConnectedSince *time.Time        `json:"connectedSince"`
	LastPing       *time.Time        `json:"lastPing"`
	OpenSites      []bridge.OpenSite `json:"openSites"`
}

func (s *Server) getBrowsers(c *fiber.Ctx) error {
	uid := userID(c)
	rows, err := s.opts.DB.Browsers(c.UserContext(), uid)
	if err != nil {
		return err
	}
	live := map[string]bridge.BrowserInfo{}
	for _, b := range s.connectedEverywhere(c.UserContext(), uid) {
		live[b.BrowserID] = b
	}
	out := make([]browserView, len(rows))
	for i, r := range rows {
		out[i] = browserView{ID: r.BrowserID, Name: r.Name, Version: r.Version, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen, OpenSites: []bridge.OpenSite{}}
		if b, ok := live[r.BrowserID]; ok {
			since := b.ConnectedAt
			out[i].Connected, out[i].ConnectedSince, out[i].LastPing, out[i].OpenSites = true, &since, b.LastPing, b.OpenSites
			out[i].Version = b.Version
		}
	}
	return c.JSON(fiber.Map{"browsers": out})
}

func (s *Server) patchBrowser(c *fiber.Ctx) error {
	var in nameBody
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	b, err := s.renameBrowser(c, userID(c), c.Params("id"), in.Name)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"browser": browserView{ID: b.BrowserID, Name: b.Name, Version: b.Version, FirstSeen: b.FirstSeen, LastSeen: b.LastSeen, OpenSites: []bridge.OpenSite{}}})
}

// renameBrowser renames one of uid's browsers, tells it if it is connected,
// and tells the person's pages.
func (s *Server) renameBrowser(c *fiber.Ctx, uid, id, rawName string) (*store.Browser, error) {
	name, err := bridge.CleanBrowserName(rawName)
	if err != nil {
		return nil, badRequest(codeInvalidField, "Field %s", err)
	}
	b, err := s.opts.DB.RenameBrowser(c.UserContext(), uid, id, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("browser")
	}
	if err != nil {
		return nil, err
	}
	s.hub.Rename(uid, b.BrowserID, b.Name)
	s.browserRenamed(uid, b.BrowserID, b.Name)
	s.publish(uid, evBrowserRenamed, fiber.Map{"browser": fiber.Map{"id": b.BrowserID, "name": b.Name}})
	return b, nil
}

// fillSite adds a site's setting and tools to its view.
func (s *Server) fillSite(c *fiber.Ctx, v *siteView) error {
	ask, err := s.gate.AskAll(c.UserContext(), v.UserID, v.Origin)
	if err != nil {
		return err
	}
	cat, err := s.catalog.Site(c.UserContext(), v.UserID, v.Origin)
	if err != nil {
		return err
	}
	v.AskAll, v.Live = ask, cat.Live
	for _, t := range cat.Tools {
		v.Tools = append(v.Tools, sitetools.Summary(t))
	}
	return nil
}
