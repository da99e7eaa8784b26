package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestBrowsersAreBoundedPerPerson: a client names its own browser id, so
// seeing more than store.MaxBrowsers of one person's forgets the least
// recently seen others; the one just seen is always kept, a browser seen
// again is no new row, and another person's browsers are not touched.
func TestBrowsersAreBoundedPerPerson(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a, err := db.CreateUser(ctx, "a@example.com", "A", "hash")
		if err != nil {
			t.Fatal(err)
		}
		b, err := db.CreateUser(ctx, "b@example.com", "B", "hash")
		if err != nil {
			t.Fatal(err)
		}
		see := func(user, id string) {
			t.Helper()
			row, err := db.SeeBrowser(ctx, user, id, "Chrome", "1.0")
			if err != nil || row.BrowserID != id {
				t.Fatalf("see %s: %+v %v", id, row, err)
			}
		}
		see(b.ID, "b-only")
		for i := range store.MaxBrowsers {
			see(a.ID, fmt.Sprintf("a-%03d", i))
		}
		see(a.ID, "a-000") // seen again: now the most recent, and no new row
		if _, err := db.RenameBrowser(ctx, a.ID, "a-000", "Laptop"); err != nil {
			t.Fatal(err)
		}
		list := func(user string) []store.Browser {
			t.Helper()
			rows, err := db.Browsers(ctx, user)
			if err != nil {
				t.Fatal(err)
			}
			return rows
		}
		if n := len(list(a.ID)); n != store.MaxBrowsers {
			t.Fatalf("%d browsers after %d seen, one twice", n, store.MaxBrowsers)
		}
		for i := range 5 {
			see(a.ID, fmt.Sprintf("new-%d", i))
		}
		rows := list(a.ID)
		if len(rows) != store.MaxBrowsers {
			t.Fatalf("%d browsers kept, want %d", len(rows), store.MaxBrowsers)
		}
		kept := map[string]store.Browser{}
		for _, r := range rows {
			kept[r.BrowserID] = r
		}
		for i := range 5 {
			if _, ok := kept[fmt.Sprintf("new-%d", i)]; !ok {
				t.Errorf("new-%d, just seen, was forgotten", i)
			}
			if _, ok := kept[fmt.Sprintf("a-%03d", i+1)]; ok {
				t.Errorf("a-%03d, among the least recently seen, is still listed", i+1)
			}
		}
		if r, ok := kept["a-000"]; !ok || r.Name != "Laptop" {
			t.Errorf("a-000, seen again later, was forgotten or lost its name: %+v", r)
		}
		if rows := list(b.ID); len(rows) != 1 || rows[0].BrowserID != "b-only" {
			t.Errorf("another person's browsers: %+v", rows)
		}
	})
}
