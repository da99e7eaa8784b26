package sitetools_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestCatalogBoundsAPersonsOpenDocuments: the documents a person's browsers
// announce are held until they go, so their count and their tool lists' bytes
// are bounded per person, across browsers; a document announced again counts
// once, a refused one leaves nothing behind, and one that goes makes room.
func TestCatalogBoundsAPersonsOpenDocuments(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c, uid := newCatalog(t, db)
		c.SetLimits(sitetools.Limits{Documents: 3, ToolBytes: 1000})
		announce := func(browser, doc string, bytes int, tools ...sitetools.Descriptor) error {
			return c.Announce(ctx, uid, sitetools.Document{BrowserID: browser, DocumentID: doc, Origin: site, URL: site + "/" + doc, Tools: tools, Bytes: bytes})
		}
		for i, b := range []string{"b1", "b1", "b2"} {
			if err := announce(b, fmt.Sprintf("d%d", i), 100, tool("search", true)); err != nil {
				t.Fatalf("document %d of 3: %v", i, err)
			}
		}
		if err := announce("b1", "d0", 100, tool("search", true), tool("track", true)); err != nil {
			t.Fatalf("announcing a held document again counted it twice: %v", err)
		}
		var limit *sitetools.LimitError
		err := announce("b3", "d3", 100, tool("sneak", true))
		if !errors.As(err, &limit) || !limit.Documents || limit.Limit != 3 || !strings.Contains(err.Error(), "3 open pages") {
			t.Fatalf("a fourth document: %v", err)
		}
		s, err := c.Site(ctx, uid, site)
		if err != nil || s.Names()[0] == "sneak" || len(s.Names()) != 2 {
			t.Fatalf("the refused document left its tools: %v %v", s.Names(), err)
		}
		if got := c.OpenTabs(uid, site); got["b3"] != 0 {
			t.Fatalf("the refused document is open: %v", got)
		}
		c.Forget(uid, "b1", "d1")
		if err := announce("b3", "d3", 100, tool("search", true)); err != nil {
			t.Fatalf("after a document went: %v", err)
		}

		// Bytes: 300 held by d0, d2, d3; d2 growing to 801 would make 1,001.
		err = announce("b2", "d2", 801, tool("search", true))
		if !errors.As(err, &limit) || limit.Documents || limit.Limit != 1000 {
			t.Fatalf("over the bytes: %v", err)
		}
		if err := announce("b2", "d2", 800, tool("search", true)); err != nil {
			t.Fatalf("at the bytes: %v", err)
		}
		c.ForgetBrowser(uid, "b2")
		if err := announce("b2", "d4", 800, tool("search", true)); err != nil {
			t.Fatalf("after the browser went: %v", err)
		}
	})
}

// TestCatalogLimitsAreEachPersons: one person at the cap does not stop another.
func TestCatalogLimitsAreEachPersons(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u1, err := db.CreateOwner(ctx, "one@example.com", "One", "hash")
		if err != nil {
			t.Fatal(err)
		}
		u2, err := db.CreateUser(ctx, "two@example.com", "Two", "hash")
		if err != nil {
			t.Fatal(err)
		}
		c := sitetools.NewCatalog(db, func(context.Context, string, string) (bool, error) { return true, nil })
		c.SetLimits(sitetools.Limits{Documents: 1, ToolBytes: 1 << 20})
		doc := func(id string) sitetools.Document {
			return sitetools.Document{BrowserID: "b", DocumentID: id, Origin: site, Tools: []sitetools.Descriptor{tool("search", true)}}
		}
		if err := c.Announce(ctx, u1.ID, doc("d1")); err != nil {
			t.Fatal(err)
		}
		var limit *sitetools.LimitError
		if err := c.Announce(ctx, u1.ID, doc("d2")); !errors.As(err, &limit) {
			t.Fatalf("the first person's second document: %v", err)
		}
		if err := c.Announce(ctx, u2.ID, doc("d2")); err != nil {
			t.Fatalf("the second person's first document: %v", err)
		}
	})
}
