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
	if err := s.hub.PushSites(c.Context(), uid); err != nil {
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
	uid := userID(c)
	rows, err := s.opts.DB.SharedSites(c.Context(), uid)
	if err != nil {
		return err
	}
	open := map[string][]openIn{}
	for _, b := range s.hub.Connected(uid) {
		for _, o := range b.OpenSites {
			open[o.Origin] = append(open[o.Origin], openIn{BrowserID: b.BrowserID, Name: b.Name, LastUsed: o.LastUsed, Tabs: o.Tabs})
		}
	}
	out := make([]siteView, len(rows))
	for i, r := range rows {
		out[i] = siteView{SharedSite: r, OpenIn: open[r.Origin], Tools: []sitetools.ToolSummary{}}
		if out[i].OpenIn == nil {
			out[i].OpenIn = []openIn{}
		}
		if err := s.fillSite(c, &out[i]); err != nil {
			return err
		}
	}
	return c.JSON(fiber.Map{"sites": out})
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
	origin, err := bridge.NormalizeOrigin(in.Origin)
	if err != nil {
		return badRequest("invalid_origin", "%s.", strings.TrimPrefix(err.Error(), bridge.ErrOrigin.Error()+": "))
	}
	if in.WorkspaceID == "" {
		return badRequest("invalid_field", "Field \"workspaceId\" is required: the workspace to share the site with.")
	}
	uid := userID(c)
	site, prev, err := s.opts.DB.ShareSite(c.Context(), uid, in.WorkspaceID, origin)
	if err != nil {
		return storeError(err, "workspace")
	}
	s.pushSites(c, uid)
	status := http.StatusCreated
	if prev != "" {
		status = http.StatusOK
	}
	return c.Status(status).JSON(fiber.Map{"site": site, "moved": prev != "" && prev != site.WorkspaceID})
}

func (s *Server) deleteSite(c *fiber.Ctx) error {
	uid := userID(c)
	site, err := s.opts.DB.SharedSite(c.Context(), uid, c.Params("id"))
	if err != nil {
		return storeError(err, "shared site")
	}
	if err := s.opts.DB.UnshareSite(c.Context(), uid, site.ID); err != nil {
		return storeError(err, "shared site")
	}
	s.catalog.ForgetSite(uid, site.Origin)
	s.pushSites(c, uid)
	return c.SendStatus(http.StatusNoContent)
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
		return badRequest("invalid_field", "Send {\"askAll\": true} or {\"askAll\": false}.")
	}
	uid := userID(c)
	site, err := s.opts.DB.SharedSite(c.Context(), uid, c.Params("id"))
	if err != nil {
		return storeError(err, "shared site")
	}
	if err := s.gate.SetAskAll(c.Context(), uid, site.Origin, *in.AskAll); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"site": siteView{SharedSite: *site, OpenIn: []openIn{}, AskAll: *in.AskAll}})
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
	rows, err := s.opts.DB.Browsers(c.Context(), uid)
	if err != nil {
		return err
	}
	live := map[string]bridge.BrowserInfo{}
	for _, b := range s.hub.Connected(uid) {
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
	name, err := bridge.CleanBrowserName(in.Name)
	if err != nil {
		return badRequest("invalid_field", "Field %s", err)
	}
	uid := userID(c)
	b, err := s.opts.DB.RenameBrowser(c.Context(), uid, c.Params("id"), name)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("browser")
	}
	if err != nil {
		return err
	}
	s.hub.Rename(uid, b.BrowserID, b.Name)
	return c.JSON(fiber.Map{"browser": browserView{ID: b.BrowserID, Name: b.Name, Version: b.Version, FirstSeen: b.FirstSeen, LastSeen: b.LastSeen, OpenSites: []bridge.OpenSite{}}})
}

// fillSite adds a site's setting and tools to its view.
func (s *Server) fillSite(c *fiber.Ctx, v *siteView) error {
	ask, err := s.gate.AskAll(c.Context(), v.UserID, v.Origin)
	if err != nil {
		return err
	}
	cat, err := s.catalog.Site(c.Context(), v.UserID, v.Origin)
	if err != nil {
		return err
	}
	v.AskAll, v.Live = ask, cat.Live
	for _, t := range cat.Tools {
		v.Tools = append(v.Tools, sitetools.Summary(t))
	}
	return nil
}
