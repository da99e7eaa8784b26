package bridge_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/memnet"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// timedHub serves a hub over an in-memory network inside the calling
// synctest bubble (when there is one), so its timers run on the bubble's
// clock. Each socket is served with ctx.
type timedHub struct {
	hub  *bridge.Hub
	ln   *memnet.Listener
	user string
}

// newTimedHub serves a hub with its default options.
func newTimedHub(t *testing.T, db *store.DB, user string, ctx context.Context) *timedHub {
	t.Helper()
	return serveInMemory(t, bridge.NewHub(bridge.Options{DB: db, Catalog: sitetools.NewCatalog(db, db.Shares)}), user, ctx)
}

// serveInMemory serves hub for user over an in-memory network.
func serveInMemory(t *testing.T, hub *bridge.Hub, user string, ctx context.Context) *timedHub {
	t.Helper()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	h := &timedHub{hub: hub, ln: memnet.Listen(), user: user}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close() // net/http leaves a hijacked connection to its handler
		hub.Serve(ctx, c, user)
	})}
	go srv.Serve(h.ln)
	t.Cleanup(func() { hub.Close(); srv.Close() })
	return h
}

// browser dials the hub and says hello.
func (h *timedHub) browser(t *testing.T) *bridgetest.Browser {
	t.Helper()
	d := websocket.Dialer{NetDialContext: h.ln.Dial}
	conn, _, err := d.DialContext(context.Background(), "ws://bridge.test/ws/extension", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &bridgetest.Browser{Conn: conn}
	t.Cleanup(func() { conn.Close() })
	if _, err := b.Hello("browser-one", "Chrome", "1.0.0", time.Minute); err != nil {
		t.Fatal(err)
	}
	return b
}

func timedUser(t *testing.T) (*store.DB, string) {
	t.Helper()
	db := storetest.Open(t, storetest.SQLite)
	u, err := db.CreateUser(context.Background(), "alice@example.com", "Alice", "x")
	if err != nil {
		t.Fatal(err)
	}
	return db, u.ID
}

// TestSilentBrowserIsClosedAfterTheIdleTimeout: a browser that sends nothing
// is closed as idle exactly the default 60 s after its last frame, on a
// synctest bubble's clock.
func TestSilentBrowserIsClosedAfterTheIdleTimeout(t *testing.T) {
	db, user := timedUser(t)
	synctest.Test(t, func(t *testing.T) {
		b := newTimedHub(t, db, user, context.Background()).browser(t)
		last := time.Now()
		code, _, err := b.Closed(time.Hour)
		if err != nil || code != bridge.CloseIdle {
			t.Fatalf("closed with %d (%v), want %d", code, err, bridge.CloseIdle)
		}
		if idle := time.Since(last); idle != 60*time.Second {
			t.Fatalf("closed as idle after %v, want exactly 60s", idle)
		}
	})
}

// TestClosingWaitsTheGraceForTheBrowsersAnswer: the server closing a socket
// (here: the sign-in that opened it ended) waits the default 1 s close grace
// for the browser's close frame, then cuts the connection; a browser that
// answers is let go at once.
func TestClosingWaitsTheGraceForTheBrowsersAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers bool
		want    time.Duration
	}{{"silent browser", false, time.Second}, {"answering browser", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			db, user := timedUser(t) // a database of its own: gorm's schema cache belongs to the first bubble that fills it
			synctest.Test(t, func(t *testing.T) {
				ctx, signOut := context.WithCancel(context.Background())
				b := newTimedHub(t, db, user, ctx).browser(t)
				if !tc.answers {
					b.Conn.SetCloseHandler(func(int, string) error { return nil }) // read the close, send none back
				}
				signOut()
				code, _, err := b.Closed(time.Hour)
				if err != nil || code != bridge.CloseSignedOut {
					t.Fatalf("closed with %d (%v), want %d", code, err, bridge.CloseSignedOut)
				}
				closed := time.Now()
				// The socket's reads fail from now on; the connection under it
				// tells when the server cuts it.
				raw := b.Conn.NetConn()
				raw.SetReadDeadline(time.Now().Add(time.Hour))
				if n, err := raw.Read(make([]byte, 1)); err == nil {
					t.Fatalf("the connection still carries %d bytes after the close", n)
				}
				if took := time.Since(closed); took != tc.want {
					t.Fatalf("the connection ended %v after the close frame, want %v", took, tc.want)
				}
			})
		})
	}
}
