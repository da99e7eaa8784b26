package server

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestDirectoryAppliesNewestFirst: entries apply by sequence number, so a
// snapshot taken before a change and arriving after it changes nothing,
// even when the change emptied the entry.
func TestDirectoryAppliesNewestFirst(t *testing.T) {
	d := newDirectory()
	site := func(seq uint64, tabs int) dirEntry {
		return dirEntry{User: "u", Origin: "https://shop.example", Seq: seq, Tabs: tabs, LastUsed: int64(seq)}
	}
	d.apply("b", site(10, 2))
	if r, ok := d.RemoteSite("u", "https://shop.example"); !ok || r.Tabs != 2 {
		t.Fatalf("after the first entry: %+v %v", r, ok)
	}
	d.apply("b", site(12, 0)) // the last tab closed
	if d.apply("b", site(11, 1)) {
		t.Fatal("an older snapshot's entry was applied over a newer one")
	}
	if _, ok := d.RemoteSite("u", "https://shop.example"); ok {
		t.Fatal("a site whose last tab closed is still listed")
	}
	d.apply("b", dirEntry{User: "u", Seq: 13, Browsers: 1})
	d.apply("c", dirEntry{User: "u", Seq: 1, Browsers: 2})
	if n := d.browsers("u"); n != 3 {
		t.Fatalf("browsers %d, want 3", n)
	}
	d.keep(map[string]bool{"c": true})
	if n := d.browsers("u"); n != 2 {
		t.Fatalf("after b died: browsers %d, want 2", n)
	}
}

func TestClipTitleKeepsCharactersWhole(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	got := clipTitle(long)
	if len(got) > 200 || !utf8.ValidString(got) || len(got) != 200 {
		t.Fatalf("clipped to %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if clipTitle("Shop") != "Shop" {
		t.Fatal("a short title changed")
	}
}
