package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestABrowserCannotHoldUnboundedDocuments: a client with a ticket makes up
// document ids and announces each once. Every announcement is held until its
// document goes, so without a bound each one grew the server's memory (about
// 600 KB for a list of 600 KB) for as long as the socket stayed open. The
// documents of one person are bounded in number and in bytes, across their
// browsers; the one over is refused with limit_reached and a sentence, and
// one that goes makes room.
func TestABrowserCannotHoldUnboundedDocuments(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, func(o *server.Options) {
			o.OpenDocumentsMax = 3
			o.ToolBytesMax = 3*len(shopTools) + 100
		}, nil)
		second, _ := extBrowser(t, w.env, w.person, "browser-two")
		announce := func(b *bridgetest.Browser, doc, tools string) *bridgetest.Message {
			t.Helper()
			m, err := b.Announce(bridgetest.Doc{ID: doc, Origin: shop, URL: shop + "/" + doc, Title: doc, TabID: 7, LastUsed: time.Now(), Tools: tools}, testutil.WaitShort)
			if err != nil {
				t.Fatalf("announce %s: %v", doc, err)
			}
			return m
		}
		refused := func(m *bridgetest.Message, want string) {
			t.Helper()
			if m.Type != "error" || m.Code != "limit_reached" || !strings.Contains(m.Message, want) || !strings.Contains(m.Message, "Close tabs") {
				t.Fatalf("want limit_reached saying %q, got %+v", want, m)
			}
		}
		for i, b := range []*bridgetest.Browser{w.br, w.br, second} {
			if m := announce(b, fmt.Sprintf("d%d", i), shopTools); m.Type != "tools.accepted" {
				t.Fatalf("document %d of 3: %+v", i, m)
			}
		}
		refused(announce(w.br, "d3", shopTools), "3 open pages")
		refused(announce(second, "d4", shopTools), "3 open pages")
		if m := announce(w.br, "d0", shopTools); m.Type != "tools.accepted" {
			t.Fatalf("a held document announced again: %+v", m)
		}
		// Bytes: d1 growing by more than the 100 bytes of room.
		bigger := strings.Replace(shopTools, `"Search the catalogue"`, `"`+strings.Repeat("s", 200)+`"`, 1)
		refused(announce(w.br, "d1", bigger), "together")
		// The refused announcement changed nothing: d1 still offers what it did.
		if m := announce(w.br, "d1", shopTools); m.Type != "tools.accepted" {
			t.Fatalf("d1 again: %+v", m)
		}
		if err := w.br.Gone("d0"); err != nil {
			t.Fatal(err)
		}
		if m := announce(w.br, "d3", shopTools); m.Type != "tools.accepted" {
			t.Fatalf("after a document went: %+v", m)
		}
	})
}
