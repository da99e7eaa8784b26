package server_test

import (
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestEndingASignInEndsWhatItOpened: signing out in one browser ends that
// sign-in's event stream and the extension socket its ticket opened (so the
// extension stops running agents' calls there), and leaves the person's
// other sign-in alone; a reused refresh token ends its sign-in the same way.
func TestEndingASignInEndsWhatItOpened(t *testing.T) {
	clk := &clock{}
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.Now = clk.now })
	laptop := env.Person(t, "ada@example.com")
	desktop := env.NewClient(t)
	desktop.MustJSON("POST", "/api/auth/signin", map[string]string{"email": "ada@example.com", "password": "password-ada@example.com"}, 200, nil)

	laptopEvents := openStream(t, env, laptop, nil)
	laptopEvents.next(t, true)
	desktopEvents := openStream(t, env, desktop, nil)
	desktopEvents.next(t, true)
	laptopExt, _ := extBrowser(t, env, laptop, "laptop-01")
	desktopExt, _ := extBrowser(t, env, desktop, "desktop-01")

	laptop.MustJSON("POST", "/api/auth/signout", nil, 200, nil)
	laptopEvents.ended(t)
	if code, reason, err := laptopExt.Closed(testutil.WaitShort); err != nil || code != bridge.CloseSignedOut {
		t.Fatalf("the signed-out browser's socket: %d %q %v, want %d", code, reason, err, bridge.CloseSignedOut)
	}
	if _, err := desktopExt.Ping("still-here", testutil.WaitShort); err != nil {
		t.Fatalf("the other sign-in's socket: %v", err)
	}
	desktop.Workspace("After")
	for e := desktopEvents.next(t, false); e.typ != "workspace.created"; e = desktopEvents.next(t, false) {
		// browser.connected and .disconnected come first
	}

	// A thief replays the desktop's spent refresh token: that sign-in ends,
	// and with it what it opened.
	spent := desktop.Cookie("tb_refresh")
	clk.advance(16 * time.Minute)
	desktop.MustJSON("POST", "/api/auth/refresh", nil, 200, nil)
	clk.advance(11 * time.Second) // past the grace for a person's own racing requests
	thief := env.NewClient(t)
	thief.SetCookie("tb_refresh", spent)
	if status, body := thief.Do("POST", "/api/auth/refresh", nil); status != 401 || servertest.ErrorCode(body) != "refresh_reused" {
		t.Fatalf("reuse: %d %s", status, body)
	}
	desktopEvents.ended(t)
	if code, reason, err := desktopExt.Closed(testutil.WaitShort); err != nil || code != bridge.CloseSignedOut {
		t.Fatalf("the revoked sign-in's socket: %d %q %v, want %d", code, reason, err, bridge.CloseSignedOut)
	}
}
