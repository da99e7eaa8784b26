package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tabbridge/tabbridge/cluster"
)

// What a person changes through one instance that the browsers on the
// others must hear: the shared sites (a browser announces only the sites it
// is told are shared) and a browser's new name.
const (
	topicSites  = "sites.changed"  // {"u"}: push the person's shared sites to their browsers here
	topicRename = "browser.rename" // {"u", "b", "n"}: tell the browser here its new name
)

type sitesSignal struct {
	User string `json:"u"`
}

type renameSignal struct {
	User    string `json:"u"`
	Browser string `json:"b"`
	Name    string `json:"n"`
}

func (s *Server) subscribePeople() {
	s.bus.Subscribe(topicSites, func(m cluster.Message) {
		var sig sitesSignal
		if m.From == s.id || json.Unmarshal(m.Data, &sig) != nil || sig.User == "" {
			return
		}
		go s.sitesChangedLocal(sig.User)
	})
	s.bus.Subscribe(topicRename, func(m cluster.Message) {
		var sig renameSignal
		if m.From == s.id || json.Unmarshal(m.Data, &sig) != nil || sig.User == "" {
			return
		}
		s.hub.Rename(sig.User, sig.Browser, sig.Name)
	})
}

// sitesChanged tells the other instances that the person's shared sites
// changed here.
func (s *Server) sitesChanged(uid string) { s.signalJSON(topicSites, sitesSignal{User: uid}) }

// sitesChangedLocal pushes the person's shared sites to their browsers
// here, and forgets the open documents of sites no longer shared (the
// instance where the change was made forgot its own).
func (s *Server) sitesChangedLocal(uid string) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	if len(s.hub.Connected(uid)) > 0 {
		if err := s.hub.PushSites(ctx, uid); err != nil {
			s.opts.Logger.Warn("push shared sites changed on another instance", "user", uid, "err", err)
		}
	}
	for _, sum := range s.catalog.Summaries() {
		if sum.UserID != uid {
			continue
		}
		if ok, err := s.opts.DB.Shares(ctx, uid, sum.Origin); err == nil && !ok {
			s.catalog.ForgetSite(uid, sum.Origin)
		}
	}
}

// browserRenamed tells the other instances a browser's new name.
func (s *Server) browserRenamed(uid, browserID, name string) {
	s.signalJSON(topicRename, renameSignal{User: uid, Browser: browserID, Name: name})
}
