package sitetools_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestCatalogTargetsFollowUse: a call's targets are, per browser, its most
// recently used document offering the tool, most recently used first; they
// follow announces, use, unloads and browsers leaving, as the site's tools do.
func TestCatalogTargetsFollowUse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c, uid := newCatalog(t, db)
		now := time.Now()
		announce := func(browser, doc string, used time.Time, tools ...sitetools.Descriptor) {
			t.Helper()
			if err := c.Announce(ctx, uid, sitetools.Document{BrowserID: browser, DocumentID: doc, Origin: site, URL: site + "/" + doc, Title: doc, LastUsed: used, Tools: tools}); err != nil {
				t.Fatal(err)
			}
		}
		want := func(tool string, targets ...string) {
			t.Helper()
			var got []string
			for _, tg := range c.Targets(uid, site, tool) {
				got = append(got, tg.BrowserID+"/"+tg.DocumentID)
			}
			if !reflect.DeepEqual(got, targets) {
				t.Fatalf("targets for %s: %v, want %v", tool, got, targets)
			}
		}
		announce("b1", "d1", now.Add(-3*time.Minute), tool("search", true), tool("buy", false))
		announce("b1", "d2", now.Add(-2*time.Minute), tool("search", true))
		announce("b2", "d3", now.Add(-time.Minute), tool("search", true))
		want("search", "b2/d3", "b1/d2")
		want("buy", "b1/d1")
		want("track")

		c.Use(uid, "b1", "d1", now)
		want("search", "b1/d1", "b2/d3")
		if s, err := c.Site(ctx, uid, site); err != nil || s.LastURL != site+"/d1" || !s.Live {
			t.Fatalf("site after use: %+v %v", s, err)
		}
		// The most recently used document's descriptor wins in the site's tools.
		announce("b2", "d3", now.Add(time.Minute), sitetools.Descriptor{Name: "search", Description: "newer", InputSchema: []byte(`{"type":"object"}`)})
		if s, _ := c.Site(ctx, uid, site); s.Tools[1].Name != "search" || s.Tools[1].Description != "newer" {
			t.Fatalf("site tools after re-announce: %+v", s.Tools)
		}
		want("search", "b2/d3", "b1/d1")

		if _, ok := c.Forget(uid, "b2", "d3"); !ok {
			t.Fatal("forget d3")
		}
		want("search", "b1/d1")
		c.Forget(uid, "b1", "d1")
		want("search", "b1/d2")
		want("buy")
		c.ForgetBrowser(uid, "b1")
		want("search")
		if s, _ := c.Site(ctx, uid, site); s.Live {
			t.Fatalf("site live with no document: %+v", s)
		}
		if n := len(c.OpenTabs(uid, site)); n != 0 {
			t.Fatalf("open tabs with no document: %d", n)
		}
	})
}

// BenchmarkCatalogRoute is what a call asks of the catalog (the site's tools,
// then where to send the call) with 1 and 1,000 open documents of the site,
// all offering the tool: the cost must not grow with them (issue 16).
//
//	go test ./sitetools -run XXX -bench CatalogRoute
func BenchmarkCatalogRoute(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("docs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db := storetest.Open(b, storetest.SQLite)
			u, err := db.CreateOwner(ctx, "a@example.com", "A", "hash")
			if err != nil {
				b.Fatal(err)
			}
			c := sitetools.NewCatalog(db, func(context.Context, string, string) (bool, error) { return true, nil })
			now := time.Now()
			for i := 0; i < n; i++ {
				err := c.Announce(ctx, u.ID, sitetools.Document{BrowserID: fmt.Sprintf("b%d", i%3), DocumentID: fmt.Sprintf("d%d", i), Origin: site,
					URL: site + "/", LastUsed: now.Add(-time.Duration(i) * time.Second), Tools: []sitetools.Descriptor{tool("search", true), tool("buy", false)}})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, err := c.Site(ctx, u.ID, site)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Tool("search"); err != nil {
					b.Fatal(err)
				}
				if len(c.Targets(u.ID, site, "search")) == 0 {
					b.Fatal("no target")
				}
			}
		})
	}
}
