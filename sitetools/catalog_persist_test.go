package sitetools_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// siteToolWrites counts the statements that write site_tools (a site's remembered tools).
type siteToolWrites struct{ statements atomic.Int64 }

func countSiteToolWrites(t testing.TB, db *store.DB) *siteToolWrites {
	t.Helper()
	w := &siteToolWrites{}
	count := func(tx *gorm.DB) {
		if tx.Statement.Table == "site_tools" {
			w.statements.Add(1)
		}
	}
	if err := db.Callback().Create().After("gorm:create").Register("test:site_tools_writes", count); err != nil {
		t.Fatal(err)
	}
	if err := db.Callback().Update().After("gorm:update").Register("test:site_tools_writes", count); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *siteToolWrites) take() int64 { return w.statements.Swap(0) }

// TestAnnouncementWritesOnlyWhatChanged: a site's remembered tools (up to MaxToolsPerSite
// descriptors, megabytes) are written when they change, not on every announcement; the page
// that announced last is written alone when only it changed; and what was written is what a
// restarted server reads.
func TestAnnouncementWritesOnlyWhatChanged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c, uid := newCatalog(t, db)
		w := countSiteToolWrites(t, db)
		announce := func(c *sitetools.Catalog, doc, url, title string, tools ...sitetools.Descriptor) {
			t.Helper()
			if err := c.Announce(ctx, uid, sitetools.Document{BrowserID: "b1", DocumentID: doc, Origin: site, URL: url, Title: title, Tools: tools}); err != nil {
				t.Fatal(err)
			}
		}
		expect := func(what string, want int64) {
			t.Helper()
			if got := w.take(); got != want {
				t.Fatalf("%s: %d writes of site_tools, want %d", what, got, want)
			}
		}
		remembered := func(wantTitle string, wantTools ...string) {
			t.Helper()
			s, err := sitetools.NewCatalog(db, nil).Site(ctx, uid, site) // a restarted server
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range s.Tools {
				names = append(names, d.Name)
			}
			if strings.Join(names, ",") != strings.Join(wantTools, ",") || s.LastTitle != wantTitle {
				t.Fatalf("remembered %v titled %q, want %v titled %q", names, s.LastTitle, wantTools, wantTitle)
			}
		}

		announce(c, "d1", site+"/shop", "Shop", tool("buy", false), tool("search", true))
		expect("first announcement", 1)
		announce(c, "d1", site+"/shop", "Shop", tool("buy", false), tool("search", true))
		expect("the same again", 0)
		announce(c, "d2", site+"/shop", "Shop", tool("search", true), tool("buy", false))
		expect("another page load of the same page, tools in another order", 0)
		remembered("Shop", "buy", "search")

		announce(c, "d3", site+"/shop#reviews", "Shop: reviews", tool("buy", false), tool("search", true))
		expect("the same tools from the page with another title", 1)
		remembered("Shop: reviews", "buy", "search")

		announce(c, "d4", site+"/shop", "Shop", tool("buy", false), tool("search", true), tool("compare", true))
		expect("a tool more", 1)
		remembered("Shop", "buy", "compare", "search")

		c2 := sitetools.NewCatalog(db, func(context.Context, string, string) (bool, error) { return true, nil })
		announce(c2, "d5", site+"/shop", "Shop", tool("buy", false), tool("search", true), tool("compare", true))
		expect("a restarted server, the same announcement as remembered", 0)
		announce(c2, "d5", site+"/shop", "Shop", tool("buy", false))
		expect("a restarted server, tools gone", 1)
		remembered("Shop", "buy")
	})
}

// BenchmarkAnnounceUnchanged is a busy site's page load: the same page announces the same tools
// again, with the site's remembered tools about 2 MiB (the cap is MaxAnnouncementBytes per page,
// 8 MiB per site). writes/op counts the statements that write site_tools.
func BenchmarkAnnounceUnchanged(b *testing.B) {
	ctx := context.Background()
	db := storetest.Open(b, storetest.SQLite)
	u, err := db.CreateOwner(ctx, "a@example.com", "A", "hash")
	if err != nil {
		b.Fatal(err)
	}
	w := countSiteToolWrites(b, db)
	c := sitetools.NewCatalog(db, func(context.Context, string, string) (bool, error) { return true, nil })
	var tools []sitetools.Descriptor
	for i := 0; i < 100; i++ {
		d := tool(fmt.Sprintf("tool%03d", i), i%2 == 0)
		d.Description = strings.Repeat("What this tool does, at length. ", 600) // ~19 KiB each
		tools = append(tools, d)
	}
	doc := sitetools.Document{BrowserID: "b1", DocumentID: "d1", Origin: site, URL: site + "/", Title: "Shop", Tools: tools}
	if err := c.Announce(ctx, u.ID, doc); err != nil {
		b.Fatal(err)
	}
	w.take()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Announce(ctx, u.ID, doc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(w.take())/float64(b.N), "writes/op")
}

// TestStoredToolsAreCheckedWhenReadBack: a site's stored tools are data read
// back (written by an older version under other rules, or changed by hand),
// so a restarted server offers only what an announcement's checks take: a
// tool whose name or schema they refuse, or a second tool of a name, is not
// offered, and a tool's address off the site's origin is not where its page
// is reopened (the site's last address is).
func TestStoredToolsAreCheckedWhenReadBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		_, uid := newCatalog(t, db)
		tools := `[{"name":"search","description":"d","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"kind":"imperative","autosubmit":true,"url":"https://evil.example/phish"},` +
			`{"name":"bad name\u0007","description":"d","inputSchema":{},"annotations":{},"kind":"imperative","autosubmit":true},` +
			`{"name":"buy","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"integer","minimum":"one"}}},"annotations":{},"kind":"imperative","autosubmit":true},` +
			`{"name":"search","description":"second","inputSchema":{},"annotations":{},"kind":"imperative","autosubmit":true}]`
		err := db.Exec("INSERT INTO site_tools (user_id, origin, tools, last_url, last_title, announced_at) VALUES (?, ?, ?, ?, ?, ?)",
			uid, site, tools, site+"/shop", "Shop", store.Now()).Error
		if err != nil {
			t.Fatal(err)
		}
		s, err := sitetools.NewCatalog(db, nil).Site(ctx, uid, site)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Tools) != 1 || s.Tools[0].Name != "search" || s.Tools[0].Description != "d" || s.Tools[0].URL != site+"/shop" {
			t.Fatalf("read back %+v; want only the first search, at %s/shop", s.Tools, site)
		}
	})
}
