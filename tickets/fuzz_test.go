package tickets_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
	"github.com/tabbridge/tabbridge/tickets"
)

// FuzzRedeem: a ticket comes back in a socket's query string, so it is any
// text, for either purpose. Whatever is presented that is not a live
// ticket's secret is ErrInvalid, and spends nothing: the live tickets of
// both purposes, whose secrets the fuzzer is not given, stay unspent.
func FuzzRedeem(f *testing.F) {
	ctx := context.Background()
	db := storetest.Open(f, storetest.SQLite)
	u, err := db.CreateOwner(ctx, "fuzz@example.com", "F", "hash")
	if err != nil {
		f.Fatal(err)
	}
	_, family, err := db.IssueRefresh(ctx, u.ID, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	now := store.Now()
	is := tickets.New(db, func() time.Time { return now })
	ext, _, err := is.Issue(ctx, u.ID, family, tickets.PurposeExtension, "")
	if err != nil {
		f.Fatal(err)
	}
	view, _, err := is.Issue(ctx, u.ID, family, tickets.PurposeViewer, "s1")
	if err != nil {
		f.Fatal(err)
	}
	unspent := func(t *testing.T) {
		var n int64
		if err := db.Model(&tickets.Ticket{}).Where("used_at IS NULL").Count(&n).Error; err != nil || n != 2 {
			t.Fatalf("%d unspent tickets (%v), want 2", n, err)
		}
	}
	f.Add("tbt_"+ext[4:len(ext)-1], tickets.PurposeExtension)
	f.Add(ext+" ", tickets.PurposeExtension)
	f.Add(view, tickets.PurposeExtension)
	f.Add(ext, "Extension")
	f.Add("", tickets.PurposeViewer)
	f.Add("tbt_' OR 1=1 --", tickets.PurposeViewer)
	f.Fuzz(func(t *testing.T, plain, purpose string) {
		if (plain == ext && purpose == tickets.PurposeExtension) || (plain == view && purpose == tickets.PurposeViewer) {
			return // the live secrets themselves
		}
		got, err := is.Redeem(ctx, plain, purpose)
		if got != nil || !errors.Is(err, tickets.ErrInvalid) {
			t.Fatalf("Redeem(%q, %q) = %+v, %v; want ErrInvalid", plain, purpose, got, err)
		}
		unspent(t)
	})
}
