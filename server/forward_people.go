package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/tabbridge/tabbridge/bridge"
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

// connectedEverywhere lists the person's connected browsers on every
// instance, for the web app's pages: this instance's, and those of each
// instance the directory says holds one (asked in parallel; one that does
// not answer within 2 s is left out, and logged).
func (s *Server) connectedEverywhere(ctx context.Context, uid string) []bridge.BrowserInfo {
	out := s.hub.Connected(uid)
	others := s.dir.withBrowsers(uid)
	if len(others) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got struct {
				Browsers []bridge.BrowserInfo `json:"browsers"`
			}
			if err := s.in.peers.PostJSON(ctx, id, "/internal/v1/browsers", sitesSignal{User: uid}, &got); err != nil {
				s.opts.Logger.Warn("read the browsers another instance holds", "instance", id, "err", err)
				return
			}
			mu.Lock()
			out = append(out, got.Browsers...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].ConnectedAt.After(out[j].ConnectedAt) })
	return out
}

// internalBrowsers answers the person's browsers connected here.
func (s *Server) internalBrowsers(w http.ResponseWriter, r *http.Request) {
	var in sitesSignal
	err := decodeInternalBody(r.Body, 1<<16, &in)
	if err == nil && in.User == "" {
		err = errors.New("it has no user")
	}
	if err != nil {
		writeInternalError(w, http.StatusBadRequest, codeInvalidJSON, "A browsers request is {\"u\": user id}: "+err.Error()+".")
		return
	}
	writeJSON(w, map[string]any{"browsers": s.withDocuments(in.User, s.hub.Connected(in.User))})
}

// withDocuments adds to each browser's open sites (its own sites.open
// report) the documents that announced tools here, as openIn merges them
// for this instance's own pages.
func (s *Server) withDocuments(uid string, browsers []bridge.BrowserInfo) []bridge.BrowserInfo {
	for _, sum := range s.catalog.Summaries() {
		if sum.UserID != uid {
			continue
		}
		docs := s.catalog.OpenIn(uid, sum.Origin)
		for i := range browsers {
			d, ok := docs[browsers[i].BrowserID]
			if !ok {
				continue
			}
			merged := false
			for j := range browsers[i].OpenSites {
				if o := &browsers[i].OpenSites[j]; o.Origin == sum.Origin {
					o.Tabs, merged = max(o.Tabs, d.Tabs), true
					if d.LastUsed.After(o.LastUsed) {
						o.LastUsed = d.LastUsed.UTC()
					}
				}
			}
			if !merged {
				browsers[i].OpenSites = append(browsers[i].OpenSites, bridge.OpenSite{Origin: sum.Origin, Tabs: d.Tabs, LastUsed: d.LastUsed.UTC()})
			}
		}
	}
	return browsers
}
