package bridge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// changeSeen is one OnChange call, with what the hub reported connected at
// that moment (read from inside the callback: a lock held would hang it).
type changeSeen struct {
	user      string
	ch        bridge.Change
	connected int
}

// TestOnChangeHearsConnectToolsOpenAndDisconnect drives a real hub over a
// real socket and checks each change is told once, outside the hub's locks.
func TestOnChangeHearsConnectToolsOpenAndDisconnect(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, storetest.SQLite)
	u, err := db.CreateUser(ctx, "alice@example.com", "Alice", "x")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := db.CreateWorkspace(ctx, u.ID, "Work")
	if err != nil {
		t.Fatal(err)
	}
	const shop = "https://shop.example"
	if _, _, err := db.ShareSite(ctx, u.ID, ws.ID, shop); err != nil {
		t.Fatal(err)
	}
	seen := make(chan changeSeen, 32)
	var hub *bridge.Hub
	hub = bridge.NewHub(bridge.Options{DB: db, Catalog: sitetools.NewCatalog(db, db.Shares),
		OnChange: func(user string, ch bridge.Change) {
			seen <- changeSeen{user, ch, len(hub.Connected(user))}
		}})
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		hub.Serve(context.Background(), c, u.ID)
	}))
	defer srv.Close()
	defer hub.Close()

	next := func(want bridge.Change, connected int) {
		t.Helper()
		select {
		case got := <-seen:
			if got.user != u.ID || got.ch != want || got.connected != connected {
				t.Fatalf("change %+v, want %+v with %d connected", got, want, connected)
			}
		case <-time.After(testutil.WaitShort):
			t.Fatalf("no change; want %+v", want)
		}
	}
	// none checks that nothing more was told: a ping's pong comes after
	// every frame sent before it has been handled.
	none := func(b *bridgetest.Browser) {
		t.Helper()
		if _, err := b.Ping("sync", testutil.WaitShort); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-seen:
			t.Fatalf("unexpected change %+v", got)
		default:
		}
	}
	dial := func(id string) *bridgetest.Browser {
		t.Helper()
		b, _, err := bridgetest.Dial(ctx, srv.URL, "ticket", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Hello(id, "Chrome", "1.0.0", testutil.WaitShort); err != nil {
			t.Fatal(err)
		}
		return b
	}

	b := dial("browser-one")
	next(bridge.Change{Kind: bridge.ChangeConnected, BrowserID: "browser-one"}, 1)
	if m, err := b.Announce(bridgetest.Doc{ID: "d1", Origin: shop, URL: shop + "/", Tools: `[{"name":"search","description":"Search"}]`}, testutil.WaitShort); err != nil || m.Type != bridge.TypeToolsAccepted {
		t.Fatalf("announce: %+v %v", m, err)
	}
	next(bridge.Change{Kind: bridge.ChangeTools, BrowserID: "browser-one", Origin: shop}, 1)

	open := func(tabs int, used int64) {
		t.Helper()
		if err := b.Send(map[string]any{"type": bridge.TypeSitesOpen, "sites": []map[string]any{{"origin": shop, "lastUsed": used, "tabs": tabs}}}); err != nil {
			t.Fatal(err)
		}
	}
	open(1, 1000)
	next(bridge.Change{Kind: bridge.ChangeOpen, BrowserID: "browser-one"}, 1)
	open(1, 2000) // only used later: nothing a page shows changed
	none(b)
	open(2, 2000)
	next(bridge.Change{Kind: bridge.ChangeOpen, BrowserID: "browser-one"}, 1)

	if err := b.Gone("d1"); err != nil {
		t.Fatal(err)
	}
	next(bridge.Change{Kind: bridge.ChangeTools, BrowserID: "browser-one", Origin: shop}, 1)
	if err := b.Gone("d1"); err != nil { // already gone
		t.Fatal(err)
	}
	none(b)

	// A newer socket of the same browser replaces the old one: the browser
	// stays connected, so no disconnect is told for the old socket.
	again := dial("browser-one")
	next(bridge.Change{Kind: bridge.ChangeConnected, BrowserID: "browser-one"}, 1)
	if code, _, err := b.Closed(testutil.WaitShort); err != nil || code != bridge.CloseReplaced {
		t.Fatalf("old socket: %d %v", code, err)
	}
	none(again)

	again.Close()
	next(bridge.Change{Kind: bridge.ChangeDisconnected, BrowserID: "browser-one"}, 0)
}
