package sitetools_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

const site = "https://shop.example"

func tool(name string, readOnly bool) sitetools.Descriptor {
	return sitetools.Descriptor{Name: name, Description: name + " things", InputSchema: []byte(`{"type":"object"}`),
		Annotations: sitetools.Annotations{ReadOnlyHint: readOnly}}
}

func newCatalog(t *testing.T, db *store.DB) (*sitetools.Catalog, string) {
	t.Helper()
	u, err := db.CreateOwner(context.Background(), "a@example.com", "A", "hash")
	if err != nil {
		t.Fatal(err)
	}
	shared := func(_ context.Context, userID, origin string) (bool, error) {
		return userID == u.ID && origin == site, nil
	}
	return sitetools.NewCatalog(db, shared), u.ID
}

func TestCatalogRefusesUnsharedSites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c, uid := newCatalog(t, db)
		err := c.Announce(context.Background(), uid, sitetools.Document{BrowserID: "b1", DocumentID: "d1", Origin: "https://other.example",
			Tools: []sitetools.Descriptor{tool("search", true)}})
		if !errors.Is(err, sitetools.ErrNotShared) {
			t.Fatalf("unshared announce: %v", err)
		}
		s, err := c.Site(context.Background(), uid, "https://other.example")
		if err != nil || len(s.Tools) != 0 || s.Live {
			t.Fatalf("unshared site kept something: %+v %v", s, err)
		}
	})
}

func TestCatalogLiveUnionAndOfflineList(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c, uid := newCatalog(t, db)
		now := time.Now()
		announce := func(doc string, used time.Time, tools ...sitetools.Descriptor) {
			t.Helper()
			err := c.Announce(ctx, uid, sitetools.Document{BrowserID: "b1", DocumentID: doc, Origin: site, URL: site + "/" + doc, LastUsed: used, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
		}
		announce("d1", now.Add(-time.Minute), tool("search", true), tool("buy", false))
		announce("d2", now, tool("search", true), tool("track", true))

		s, err := c.Site(ctx, uid, site)
		if err != nil || !s.Live {
			t.Fatalf("site: %+v %v", s, err)
		}
		if got := s.Names(); !reflect.DeepEqual(got, []string{"buy", "search", "track"}) {
			t.Fatalf("live tools %v", got)
		}
		// The most recently used document offering a tool comes first.
		cands := c.Candidates(uid, site, "search")
		if len(cands) != 2 || cands[0].DocumentID != "d2" {
			t.Fatalf("candidates for search: %+v", cands)
		}
		c.Use(uid, "b1", "d1", now.Add(time.Second))
		if cands := c.Candidates(uid, site, "search"); cands[0].DocumentID != "d1" {
			t.Fatalf("after using d1, first candidate is %s", cands[0].DocumentID)
		}
		if cands := c.Candidates(uid, site, "buy"); len(cands) != 1 || cands[0].DocumentID != "d1" {
			t.Fatalf("candidates for buy: %+v", cands)
		}
		// Re-announcing a document replaces what it offered.
		announce("d1", now.Add(2*time.Second), tool("search", true))
		if cands := c.Candidates(uid, site, "buy"); len(cands) != 0 {
			t.Fatalf("buy still offered after re-announce: %+v", cands)
		}
		// The browser goes away: the site lists its last tools, offline.
		c.ForgetBrowser(uid, "b1")
		s, err = c.Site(ctx, uid, site)
		if err != nil || s.Live {
			t.Fatalf("site after browser left: %+v %v", s, err)
		}
		if got := s.Names(); !reflect.DeepEqual(got, []string{"search", "track"}) || s.LastURL != site+"/d1" {
			t.Fatalf("offline list %v, last url %q", got, s.LastURL)
		}
		if _, err := s.Tool("buy"); !errors.Is(err, sitetools.ErrNoSuchTool) {
			t.Fatalf("offline tool lookup: %v", err)
		}
		// A new catalog (a restarted server) still knows the offline list.
		c2, _ := sitetools.NewCatalog(db, func(context.Context, string, string) (bool, error) { return true, nil }), uid
		s, err = c2.Site(ctx, uid, site)
		if err != nil || len(s.Tools) != 2 {
			t.Fatalf("after restart: %+v %v", s, err)
		}
	})
}

func TestCatalogForgetDocumentAndSite(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c, uid := newCatalog(t, db)
		for _, d := range []string{"d1", "d2"} {
			if err := c.Announce(ctx, uid, sitetools.Document{BrowserID: "b1", DocumentID: d, Origin: site, Tools: []sitetools.Descriptor{tool("search", true)}}); err != nil {
				t.Fatal(err)
			}
		}
		c.Forget(uid, "b1", "d1")
		if got := c.OpenTabs(uid, site); got["b1"] != 1 {
			t.Fatalf("open tabs after one document left: %v", got)
		}
		c.ForgetSite(uid, site)
		if got := c.OpenTabs(uid, site); len(got) != 0 {
			t.Fatalf("open tabs after unsharing: %v", got)
		}
	})
}

// page is a page's n read-only tools, named prefix000, prefix001, …
func page(prefix string, n int) []sitetools.Descriptor {
	var out []sitetools.Descriptor
	for i := 0; i < n; i++ {
		out = append(out, tool(fmt.Sprintf("%s%03d", prefix, i), true))
	}
	return out
}

func TestCatalogLimitsToolsPerSiteAcrossPages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c, uid := newCatalog(t, db)
		if err := c.Announce(ctx, uid, sitetools.Document{BrowserID: "b1", DocumentID: "d1", Origin: site, URL: site + "/a", Tools: page("a", 100)}); err != nil {
			t.Fatal(err)
		}
		err := c.Announce(ctx, uid, sitetools.Document{BrowserID: "b1", DocumentID: "d2", Origin: site, URL: site + "/b", Tools: page("b", 50)})
		if !errors.Is(err, sitetools.ErrBadAnnouncement) || !strings.Contains(err.Error(), "150 tools") {
			t.Fatalf("a second page over the per-site limit: %v", err)
		}
		s, _ := c.Site(ctx, uid, site)
		if len(s.Tools) != 100 {
			t.Fatalf("site offers %d tools after the refused page, want the first page's 100", len(s.Tools))
		}
	})
}

// TestCatalogMakesRoomForAnOpenPage: tools only memory holds (their pages are closed) make room
// for an open page's new tools when the site would be over the cap, so a site that once offered
// many tools (a developer renaming them, routes not visited since) can still share a new page.
func TestCatalogMakesRoomForAnOpenPage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c, uid := newCatalog(t, db)
		for _, d := range []sitetools.Document{
			{BrowserID: "b1", DocumentID: "d1", Origin: site, URL: site + "/a", Tools: page("a", 100)},
			{BrowserID: "b1", DocumentID: "d2", Origin: site, URL: site + "/b", Tools: page("b", 20)},
		} {
			if err := c.Announce(ctx, uid, d); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := c.Forget(uid, "b1", "d1"); !ok {
			t.Fatal("forget d1")
		}
		// /b is still open with its 20; /c brings 50 more: 22 of /a's remembered tools make room.
		if err := c.Announce(ctx, uid, sitetools.Document{BrowserID: "b1", DocumentID: "d3", Origin: site, URL: site + "/c", Tools: page("c", 50)}); err != nil {
			t.Fatalf("an open page over the cap only because of remembered tools: %v", err)
		}
		s, _ := c.Site(ctx, uid, site)
		count := map[byte]int{}
		for _, tl := range s.Tools {
			count[tl.Name[0]]++
		}
		if len(s.Tools) != sitetools.MaxToolsPerSite || count['a'] != 58 || count['b'] != 20 || count['c'] != 50 {
			t.Fatalf("site tools after making room: %d %v", len(s.Tools), count)
		}
		for _, tl := range s.Tools {
			if tl.Name == "a099" {
				t.Fatal("the last of the name order should have made room first")
			}
		}
		// The open pages' own tools are never dropped: 129 of them are refused.
		err := c.Announce(ctx, uid, sitetools.Document{BrowserID: "b1", DocumentID: "d4", Origin: site, URL: site + "/d", Tools: page("d", 59)})
		if !errors.Is(err, sitetools.ErrBadAnnouncement) || !strings.Contains(err.Error(), "129 tools") {
			t.Fatalf("open pages over the cap: %v", err)
		}
	})
}

// TestCatalogKeepsEveryPagesTools: the catalog keeps each tool with the address (without
// fragment) of the page that last offered it, after every tab closed, until a page of that
// address announces without it.
func TestCatalogKeepsEveryPagesTools(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c, uid := newCatalog(t, db)
		announce := func(doc, url string, tools ...sitetools.Descriptor) {
			t.Helper()
			if err := c.Announce(ctx, uid, sitetools.Document{BrowserID: "b1", DocumentID: doc, Origin: site, URL: url, Tools: tools}); err != nil {
				t.Fatal(err)
			}
		}
		announce("d1", site+"/notes.html#top", tool("addNote", false), tool("search", true))
		announce("d2", site+"/tricky.html?x=1", tool("trick", false), tool("search", true))
		announce("d3", site+"/sniffer.html", tool("sniff", true))
		c.ForgetBrowser(uid, "b1")
		urls := func() map[string]string {
			t.Helper()
			s, err := sitetools.NewCatalog(db, nil).Site(ctx, uid, site) // a restarted server
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, d := range s.Tools {
				out[d.Name] = d.URL
			}
			return out
		}
		want := map[string]string{"addNote": site + "/notes.html", "search": site + "/tricky.html?x=1", "trick": site + "/tricky.html?x=1", "sniff": site + "/sniffer.html"}
		if got := urls(); !reflect.DeepEqual(got, want) {
			t.Fatalf("after every tab closed:\n got %v\nwant %v", got, want)
		}
		// Another query string is another page: it leaves trick alone.
		announce("d4", site+"/tricky.html?x=2", tool("search", true))
		// The same page without addNote: addNote is gone, the rest stays.
		announce("d5", site+"/notes.html", tool("search", true))
		want = map[string]string{"search": site + "/notes.html", "trick": site + "/tricky.html?x=1", "sniff": site + "/sniffer.html"}
		if got := urls(); !reflect.DeepEqual(got, want) {
			t.Fatalf("after notes.html announced without addNote:\n got %v\nwant %v", got, want)
		}
	})
}

// TestPageAddressKeepsHashRoutes: an anchor is not a page, but a hash-routed app's route is.
func TestPageAddressKeepsHashRoutes(t *testing.T) {
	for in, want := range map[string]string{
		"https://a.example/notes.html#top":  "https://a.example/notes.html",
		"https://a.example/app?x=1#/cart":   "https://a.example/app?x=1#/cart",
		"https://a.example/app#!/cart/2":    "https://a.example/app#!/cart/2",
		"https://a.example/app#":            "https://a.example/app",
		"https://a.example/app":             "https://a.example/app",
		"https://a.example/app#section/two": "https://a.example/app",
	} {
		if got := sitetools.PageAddress(in); got != want {
			t.Errorf("PageAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
